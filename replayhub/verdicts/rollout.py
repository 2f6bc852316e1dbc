"""The verdict of a rollout replay, judged by the environment's verifier.

A rollout seed is replayed by the project's harness, which continues the seed
with the model. The new completion is scored either by the project's separate
verifier, run afterwards in a sandbox of its own with no way out and nothing
the harness phase wrote (``reward_source`` "separate_verifier"), or, when the
project has none, by the harness itself in the sandbox the model's tool calls
ran in ("harness"). ``decide_rollout`` compares that reward and completion
with the original's. Rows, top to bottom, the first match wins:

1. the harness or the verifier could not produce a result (no sandbox, a cap,
   the harness or verifier failed, a result file is missing or malformed) →
   inconclusive, its reason;
2. the record holds no reward for the original → inconclusive;
3. the same completion → identical, unless the verifier scored it on the other
   side of the threshold this time → inconclusive (its reward is no evidence);
4. both rewards at or above the pass threshold, completions differ →
   equivalent: the agent solved it another way, first in the review queue —
   but only on a separate verifier's reward. A passing reward the harness
   wrote in the model's own sandbox could have been written by the model's
   tool calls, so then → inconclusive (``reward_unverified``);
5. rewards on opposite sides of the threshold → divergent;
6. both below it, completions differ → divergent (two failures are never
   equivalent).

Rows 5 and 6 stand on a harness's reward too: the completions differ, and with
the original below the threshold the verdict is divergent whatever the replay
scored, so the only verdict a forged reward could buy is row 4's.

The token-level Jaccard similarity of the completions is recorded as secondary
evidence only; no row rests on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from replayhub.verdicts.facts import (
    Check,
    EvidenceClass,
    Outcome,
    Reason,
    Ruling,
    Verdict,
)
from replayhub.verdicts.text import clean

# The failures a rollout replay can end in before its completion is judged.
ROLLOUT_FAILURES: frozenset[Reason] = frozenset(
    {
        Reason.SANDBOX_UNAVAILABLE,
        Reason.FIXTURE_FAILED,
        Reason.SETUP_FAILED,
        Reason.TIMEOUT,
        Reason.CAP_FIRED,
        Reason.WORKER_LOST,
        Reason.HARNESS_ERROR,
        Reason.PROVIDER_ERROR,
        Reason.REPO_UNREACHABLE,
        Reason.HOST_FAILED,
        Reason.HARNESS_FAILED,
        Reason.RESULT_MISSING,
        Reason.RESULT_MALFORMED,
        Reason.VERIFIER_FAILED,
    }
)

# Where the replay's reward came from.
SEPARATE_VERIFIER = "separate_verifier"
HARNESS = "harness"
REWARD_SOURCES = frozenset({SEPARATE_VERIFIER, HARNESS})

_FAILURE_SENTENCE = {
    Reason.SANDBOX_UNAVAILABLE: "No isolating sandbox runner was available, so "
    "the rollout was not replayed",
    Reason.FIXTURE_FAILED: "The sandbox workspace for the rollout harness could "
    "not be provisioned",
    Reason.SETUP_FAILED: "The project's setup phase failed, so the rollout "
    "harness had no environment to run in",
    Reason.TIMEOUT: "The rollout harness hit its time limit before writing a result",
    Reason.CAP_FIRED: "A per-replay cap fired before the rollout harness wrote a "
    "result",
    Reason.WORKER_LOST: "The worker running the replay was lost before it finished",
    Reason.HARNESS_ERROR: "ReplayHub failed to run the rollout harness",
    Reason.PROVIDER_ERROR: "Every model call the rollout harness made failed at "
    "the provider",
    Reason.REPO_UNREACHABLE: "The project's repository could not be fetched "
    "from its remote, so the rollout harness had no commit to run from",
    Reason.HOST_FAILED: "The worker's host could not provision the rollout "
    "harness, so the rollout was not replayed there",
    Reason.HARNESS_FAILED: "The project's rollout harness failed",
    Reason.RESULT_MISSING: "The rollout harness wrote no result, so the verifier's "
    "reward is unknown",
    Reason.RESULT_MALFORMED: "The rollout harness's result could not be read, so "
    "the verifier's reward is unknown",
    Reason.VERIFIER_FAILED: "The project's separate verifier did not score the "
    "replay's completion",
}


@dataclass(frozen=True)
class RolloutFacts:
    """What a rollout replay is judged on.

    ``failure`` is set (one of ``ROLLOUT_FAILURES``) when the harness produced no
    usable result; otherwise ``replay_reward`` and ``same_completion`` must be.
    ``original_reward`` is the record's reward (the sum of its rewards), None
    when the record has none. ``reward_source`` says who produced
    ``replay_reward``: ``SEPARATE_VERIFIER`` or ``HARNESS`` (the default, the
    one that proves less).
    """

    pass_threshold: float
    original_reward: float | None
    replay_reward: float | None = None
    same_completion: bool | None = None
    similarity: float | None = None
    failure: Reason | None = None
    failure_detail: str = ""
    cap_detail: str = ""
    reward_source: str = HARNESS

    def __post_init__(self) -> None:
        if self.reward_source not in REWARD_SOURCES:
            raise ValueError(f"unknown reward source {self.reward_source!r}")
        if self.failure is not None and self.failure not in ROLLOUT_FAILURES:
            raise ValueError(f"{self.failure!r} is not a rollout failure code")
        if self.failure is None and (
            self.replay_reward is None or self.same_completion is None
        ):
            raise ValueError(
                "a rollout without a failure needs its reward and completion"
            )

    def passes(self, reward: float) -> bool:
        return reward >= self.pass_threshold


def decide_rollout(facts: RolloutFacts) -> Ruling:
    verdict, code, reason = _row(facts)
    return Ruling(
        verdict=verdict, reason_code=code, reason=reason, checks=_checks(facts)
    )


def _row(facts: RolloutFacts) -> tuple[Verdict, Reason, str]:
    inconclusive = Verdict.INCONCLUSIVE
    if facts.failure is not None:
        return inconclusive, facts.failure, _failure_reason(facts)
    if facts.original_reward is None:
        return (
            inconclusive,
            Reason.ORIGINAL_REWARD_MISSING,
            "The record holds no reward for the original rollout, so the replay's "
            "reward has nothing to be compared with.",
        )
    assert facts.replay_reward is not None
    original, replay = facts.original_reward, facts.replay_reward
    rewards = (
        f"(original reward {_number(original)}, replay reward {_number(replay)}, "
        f"pass threshold {_number(facts.pass_threshold)})"
    )
    same_side = facts.passes(original) == facts.passes(replay)
    if facts.same_completion:
        if not same_side:
            return (
                inconclusive,
                Reason.VERIFIER_DISAGREES,
                "The replay produced the same completion, but the verifier scored it "
                f"on the other side of the threshold {rewards}, so its reward is not "
                "evidence.",
            )
        return (
            Verdict.IDENTICAL,
            Reason.SAME_COMPLETION,
            f"The replay produced the same completion as the original {rewards}.",
        )
    if facts.passes(original) and facts.passes(replay):
        if facts.reward_source != SEPARATE_VERIFIER:
            return (
                inconclusive,
                Reason.REWARD_UNVERIFIED,
                "The completions differ and the harness passes the replay's, but "
                "it scored it in the sandbox the model's tool calls ran in, where "
                f"the model could have written the reward itself {rewards}; a "
                "separate verifier's reward is needed for an equivalent verdict.",
            )
        return (
            Verdict.EQUIVALENT,
            Reason.REWARDS_PASS,
            f"The completions differ but the verifier passes both {rewards}.",
        )
    if facts.passes(original):
        return (
            Verdict.DIVERGENT,
            Reason.REPLAY_REWARD_FAILS,
            "The verifier passes the original but the replay's completion falls "
            f"below the threshold {rewards}.",
        )
    if facts.passes(replay):
        return (
            Verdict.DIVERGENT,
            Reason.REPLAY_REWARD_PASSES,
            "The verifier passes the replay's completion, while the original fell "
            f"below the threshold {rewards}.",
        )
    return (
        Verdict.DIVERGENT,
        Reason.BOTH_REWARDS_FAIL,
        f"The completions differ and both fall below the threshold {rewards}.",
    )


def _failure_reason(facts: RolloutFacts) -> str:
    assert facts.failure is not None
    sentence = _FAILURE_SENTENCE[facts.failure]
    cap = clean(facts.cap_detail)
    if cap and facts.failure in {Reason.TIMEOUT, Reason.CAP_FIRED}:
        sentence += f" ({cap})"
    detail = clean(facts.failure_detail).rstrip(".")
    if detail:
        sentence += f": {detail}"
    return sentence + "."


def _checks(facts: RolloutFacts) -> tuple[Check, ...]:
    threshold = _number(facts.pass_threshold)
    checks = []
    if facts.original_reward is None:
        checks.append(
            Check(
                "original reward",
                Outcome.UNKNOWN,
                EvidenceClass.UNAVAILABLE,
                "The record holds no reward.",
            )
        )
    else:
        checks.append(
            Check(
                "original reward",
                _outcome(facts.passes(facts.original_reward)),
                EvidenceClass.EXECUTOR_SUPPLIED,
                f"{_number(facts.original_reward)} as recorded "
                f"(pass threshold {threshold}).",
            )
        )
    if facts.replay_reward is None:
        checks.append(
            Check(
                "replay reward",
                Outcome.UNKNOWN,
                EvidenceClass.UNAVAILABLE,
                "The harness produced no usable result."
                if facts.failure != Reason.VERIFIER_FAILED
                else "The separate verifier produced no usable result.",
            )
        )
    elif facts.reward_source == SEPARATE_VERIFIER:
        checks.append(
            Check(
                "replay reward",
                _outcome(facts.passes(facts.replay_reward)),
                EvidenceClass.INDEPENDENTLY_EXECUTED,
                f"{_number(facts.replay_reward)} from the project's verifier, run "
                "in a sandbox of its own with no network and none of the harness "
                f"phase's files (pass threshold {threshold}).",
            )
        )
    else:
        checks.append(
            Check(
                "replay reward",
                _outcome(facts.passes(facts.replay_reward)),
                # Written in the sandbox the model's tool calls ran in: the
                # replay's executor supplied it, nothing checked it.
                EvidenceClass.EXECUTOR_SUPPLIED,
                f"{_number(facts.replay_reward)} as the harness wrote it, in the "
                "sandbox the model's tool calls ran in; the project has no "
                f"separate verifier (pass threshold {threshold}).",
            )
        )
    if facts.same_completion is not None:
        checks.append(
            Check(
                "completion identity",
                _outcome(facts.same_completion),
                EvidenceClass.INDEPENDENTLY_OBSERVED,
                "The replay's completion is the original's."
                if facts.same_completion
                else "The replay's completion differs from the original's.",
            )
        )
    if facts.similarity is not None:
        checks.append(
            Check(
                "completion similarity",
                Outcome.UNKNOWN,
                EvidenceClass.INDEPENDENTLY_OBSERVED,
                f"Token-level Jaccard similarity {facts.similarity:.2f}; secondary "
                "evidence, not a pass or fail.",
            )
        )
    return tuple(checks)


def _outcome(passed: bool) -> Outcome:
    return Outcome.PASS if passed else Outcome.FAIL


def _number(value: float) -> str:
    return f"{value:g}"
