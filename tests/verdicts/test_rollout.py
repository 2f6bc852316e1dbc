"""The rollout verdict rule, exhaustively over rewards, completions and failures."""

from __future__ import annotations

import itertools

import pytest

from replayhub.models import ReviewBand
from replayhub.verdicts import (
    INCONCLUSIVE_REASONS,
    REASON_TEXT,
    REASON_VERDICT,
    ROLLOUT_REASONS,
    Reason,
    Verdict,
)
from replayhub.verdicts.rollout import (
    HARNESS,
    ROLLOUT_FAILURES,
    SEPARATE_VERIFIER,
    RolloutFacts,
    decide_rollout,
)


def judged(original=1.0, replay=1.0, same=False, threshold=0.5, **kw):
    return decide_rollout(
        RolloutFacts(
            pass_threshold=threshold,
            original_reward=original,
            replay_reward=replay,
            same_completion=same,
            similarity=kw.pop("similarity", 0.3),
            reward_source=kw.pop("source", SEPARATE_VERIFIER),
            **kw,
        )
    )


def test_two_passing_rewards_with_other_completions_are_equivalent_and_first_in_queue():
    decision = judged(original=1.0, replay=0.75)
    assert (decision.verdict, decision.reason_code) == ("equivalent", "rewards_pass")
    assert (
        ReviewBand.for_verdict(decision.verdict, retries_exhausted=False)
        == ReviewBand.PASSED_DIFF_DIVERGED
    )


def test_a_reward_exactly_at_the_threshold_passes():
    assert judged(original=0.5, replay=0.5).verdict == Verdict.EQUIVALENT
    assert judged(original=0.5, replay=0.4999).reason_code == "replay_reward_fails"


def test_the_same_completion_is_identical_whatever_the_side():
    assert judged(original=1, replay=1, same=True).reason_code == "same_completion"
    assert judged(original=0, replay=0, same=True).verdict == Verdict.IDENTICAL


def test_the_same_completion_scored_across_the_threshold_is_not_evidence():
    decision = judged(original=1.0, replay=0.0, same=True)
    assert (decision.verdict, decision.reason_code) == (
        "inconclusive",
        "verifier_disagrees",
    )


def test_rewards_on_opposite_sides_are_divergent():
    assert judged(original=1, replay=0).reason_code == "replay_reward_fails"
    assert judged(original=0, replay=1).reason_code == "replay_reward_passes"
    assert judged(original=0, replay=1).verdict == Verdict.DIVERGENT


def test_two_failing_rewards_are_never_equivalent():
    decision = judged(original=0.1, replay=0.2)
    assert (decision.verdict, decision.reason_code) == (
        "divergent",
        "both_rewards_fail",
    )


def test_an_original_without_a_reward_is_inconclusive():
    decision = judged(original=None)
    assert decision.reason_code == "original_reward_missing"
    assert decision.verdict == Verdict.INCONCLUSIVE


@pytest.mark.parametrize("failure", sorted(ROLLOUT_FAILURES))
def test_every_failure_is_inconclusive_with_its_reason(failure):
    decision = decide_rollout(
        RolloutFacts(
            pass_threshold=0.5,
            original_reward=1.0,
            failure=failure,
            failure_detail="exit status 3\n<script>",
        )
    )
    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == failure
    assert "exit status 3 <script>" in decision.reason  # one line, as given
    assert "\n" not in decision.reason


def test_a_code_run_only_reason_is_not_a_rollout_failure():
    with pytest.raises(ValueError):
        RolloutFacts(pass_threshold=0.5, original_reward=1, failure=Reason.NO_CHANGE)
    with pytest.raises(ValueError):
        RolloutFacts(pass_threshold=0.5, original_reward=1)


def test_the_reward_and_similarity_are_shown_as_checks_with_their_evidence_class():
    checks = {c.name: c for c in judged(original=1, replay=0.25).checks}
    assert checks["original reward"].evidence_class == "executor_supplied"
    assert checks["replay reward"].evidence_class == "independently_executed"
    assert checks["replay reward"].outcome == "fail"
    assert "0.30" in checks["completion similarity"].detail


def test_a_passing_reward_from_the_harness_sandbox_is_never_equivalent():
    decision = judged(original=1.0, replay=1.0, source=HARNESS)
    assert (decision.verdict, decision.reason_code) == (
        "inconclusive",
        "reward_unverified",
    )
    assert "separate verifier" in decision.reason


def test_a_harness_reward_still_decides_what_it_cannot_forge_its_way_out_of():
    assert judged(original=1, replay=0, source=HARNESS).reason_code == (
        "replay_reward_fails"
    )
    assert judged(original=0, replay=1, source=HARNESS).verdict == Verdict.DIVERGENT
    assert judged(original=0.1, replay=0.2, source=HARNESS).verdict == "divergent"
    assert judged(same=True, source=HARNESS).reason_code == "same_completion"


def test_the_replay_reward_is_independently_executed_only_from_a_separate_verifier():
    verified = {c.name: c for c in judged(original=1, replay=0.25).checks}
    harness = {c.name: c for c in judged(replay=0.25, source=HARNESS).checks}
    assert verified["replay reward"].evidence_class == "independently_executed"
    assert "no network" in verified["replay reward"].detail
    assert harness["replay reward"].evidence_class == "executor_supplied"
    assert "no separate verifier" in harness["replay reward"].detail


def test_a_failed_verifier_is_inconclusive_and_its_reward_unavailable():
    decision = decide_rollout(
        RolloutFacts(
            pass_threshold=0.5,
            original_reward=1.0,
            failure=Reason.VERIFIER_FAILED,
            failure_detail="it exited with status 2",
            reward_source=SEPARATE_VERIFIER,
        )
    )
    assert (decision.verdict, decision.reason_code) == (
        "inconclusive",
        "verifier_failed",
    )
    assert "separate verifier" in decision.reason and "status 2" in decision.reason
    checks = {c.name: c for c in decision.checks}
    assert checks["replay reward"].evidence_class == "unavailable"
    assert "separate verifier" in checks["replay reward"].detail


def test_an_unknown_reward_source_is_refused():
    with pytest.raises(ValueError):
        judged(source="the model said so")


def sweep():
    rewards = (None, 0.0, 0.49, 0.5, 1.0, -2.0)
    for original, replay, same, threshold, source in itertools.product(
        rewards,
        rewards[1:],
        (True, False),
        (0.0, 0.5, 1.0),
        (SEPARATE_VERIFIER, HARNESS),
    ):
        yield judged(
            original=original,
            replay=replay,
            same=same,
            threshold=threshold,
            source=source,
        )
    for failure in ROLLOUT_FAILURES:
        yield decide_rollout(
            RolloutFacts(pass_threshold=0.5, original_reward=None, failure=failure)
        )


def test_the_sweep_reaches_every_rollout_reason():
    reached = {d.reason_code for d in sweep()}
    assert reached >= ROLLOUT_REASONS


def test_every_rollout_decision_is_one_sentence_matching_its_code():
    for decision in sweep():
        assert decision.verdict == REASON_VERDICT[decision.reason_code]
        inconclusive = decision.reason_code in INCONCLUSIVE_REASONS
        assert inconclusive == (decision.verdict == Verdict.INCONCLUSIVE)
        assert decision.reason.endswith(".") and decision.reason[0].isupper()
        assert REASON_TEXT[decision.reason_code]
