"""The verdict rests on the original's tests run on the replay's code."""

from __future__ import annotations

from replayhub.verdicts import EvidenceClass, Outcome, Reason, Verdict, decide
from tests.verdicts.test_verdicts import check, facts, failing, passing


def test_the_reference_run_decides_not_the_replays_own_suite():
    # The replay rewrote the tests until they passed; the original's fail.
    decision = decide(
        facts(
            replay=passing(3),
            reference=failing(9),
            newly_failing=("tests/test_calc.py::test_negative",),
            test_changes="the replay changed 1 test file the original has",
        )
    )

    assert decision.verdict == Verdict.DIVERGENT
    assert decision.reason_code == Reason.REPLAY_FAILS_REFERENCE_TESTS
    assert "tests/test_calc.py::test_negative" in decision.reason
    assert "reference: 9 tests" in decision.reason


def test_a_correct_replay_with_tests_of_its_own_stays_equivalent():
    decision = decide(facts(replay=passing(4), reference=passing(9), per_test=True))

    assert decision.verdict == Verdict.EQUIVALENT
    assert check(decision, "tests on reference").outcome == Outcome.PASS
    assert check(decision, "test ids").outcome == Outcome.PASS


def test_the_replays_own_failing_suite_does_not_overrule_the_reference():
    decision = decide(facts(replay=failing(4), reference=passing(9)))

    assert decision.verdict == Verdict.EQUIVALENT
    assert check(decision, "tests on replay").outcome == Outcome.FAIL


def test_a_reference_run_below_the_floor_is_refused():
    decision = decide(facts(replay=passing(9), reference=passing(0)))

    assert decision.reason_code == Reason.BELOW_EVIDENCE_FLOOR
    assert "replay's code with the original's tests" in decision.reason


def test_tests_the_judging_run_did_not_report_are_missing_evidence():
    decision = decide(facts(missing_tests=("t.py::a", "t.py::b"), per_test=True))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.TESTS_MISSING
    assert "2 tests" in decision.reason and "t.py::a, t.py::b" in decision.reason


def test_a_divergence_resting_only_on_known_flaky_tests_is_refused():
    decision = decide(
        facts(replay=failing(), newly_failing=("t::a",), known_flaky=("t::a",))
    )

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.FLAKY_TESTS
    assert "t::a" in decision.reason


def test_one_steady_failure_beside_a_flaky_one_is_still_a_divergence():
    decision = decide(
        facts(replay=failing(), newly_failing=("t::a", "t::b"), known_flaky=("t::a",))
    )

    assert decision.reason_code == Reason.REPLAY_FAILS_TESTS
    assert "known to flip: t::a" in check(decision, "test ids").detail


def test_interference_caps_a_pass_at_inconclusive_and_names_the_lines():
    hit = "calc.py line 3 calls os._exit at import"
    decision = decide(facts(interference=hit))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.TEST_INTERFERENCE
    assert "calc.py line 3" in decision.reason
    found = check(decision, "test interference")
    assert found.outcome == Outcome.FAIL
    assert found.evidence_class == EvidenceClass.INDEPENDENTLY_OBSERVED


def test_interference_does_not_soften_a_failing_reference_run():
    decision = decide(
        facts(reference=failing(), interference="calc.py line 3 exits at import")
    )

    assert decision.reason_code == Reason.REPLAY_FAILS_REFERENCE_TESTS


def test_a_project_may_allow_what_looks_like_interference():
    decision = decide(
        facts(interference="cli.py line 9 exits", interference_allowed=True)
    )

    assert decision.verdict == Verdict.EQUIVALENT
    assert "allows it" in check(decision, "test interference").detail


def test_test_changes_are_shown_as_observed_evidence():
    summary = (
        "the replay deleted 2 test files the original has (tests/a.py, tests/b.py)"
    )
    decision = decide(facts(reference=passing(), test_changes=summary))

    found = check(decision, "test changes")
    assert found.outcome == Outcome.FAIL
    assert found.detail.startswith("the replay deleted 2 test files")
    assert check(decide(facts()), "test changes").outcome == Outcome.PASS


def test_hostile_test_ids_stay_on_one_line_in_the_reason():
    decision = decide(facts(replay=failing(), newly_failing=("evil\nid\x1b[2J",)))

    assert "\n" not in decision.reason and "\x1b" not in decision.reason


def test_another_model_is_flagged_but_does_not_decide_unless_required():
    flagged = decide(facts(model_recorded="claude-x", models_called=("gpt-y",)))
    refused = decide(
        facts(
            model_recorded="claude-x",
            models_called=("claude-x", "gpt-y"),
            require_recorded_model=True,
            trees_identical=True,
        )
    )

    assert flagged.verdict == Verdict.EQUIVALENT
    assert check(flagged, "model called").outcome == Outcome.FAIL
    assert "gpt-y" in check(flagged, "model called").detail
    assert refused.reason_code == Reason.MODEL_MISMATCH
    assert "gpt-y" in refused.reason and "claude-x" in refused.reason


def test_the_recorded_model_alone_passes_the_model_check():
    decision = decide(facts(model_recorded="m", models_called=("m", "m")))

    assert check(decision, "model called").outcome == Outcome.PASS


def test_a_failure_after_denied_egress_is_not_a_divergence():
    decision = decide(
        facts(reference=failing(), denied_hosts=("pypi.org:443", "files.x:443"))
    )

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.NETWORK_REQUIRED
    assert "pypi.org:443" in decision.reason


def test_denied_egress_does_not_matter_when_the_tests_pass():
    decision = decide(facts(denied_hosts=("pypi.org:443",)))

    assert decision.reason_code == Reason.TESTS_AGREE
