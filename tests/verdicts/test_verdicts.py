from __future__ import annotations

import dataclasses

import pytest

from replayhub.verdicts import (
    HARNESS_REASONS,
    INCONCLUSIVE_REASONS,
    REASON_TEXT,
    REASON_VERDICT,
    ROLLOUT_REASONS,
    EvidenceClass,
    Facts,
    Outcome,
    Reason,
    SuiteResult,
    Verdict,
    decide,
)


def passing(executed=12, **kwargs):
    return SuiteResult(ran=True, passed=True, tests_executed=executed, **kwargs)


def failing(executed=12, **kwargs):
    return SuiteResult(ran=True, passed=False, tests_executed=executed, **kwargs)


NOT_RUN = SuiteResult(ran=False, passed=None, tests_executed=None, exit_code=127)


def facts(**changes):
    """Differing trees on a recorded base, both suites green, recorded as passing."""
    base = Facts(
        base_source="recorded",
        base_confirmed=True,
        trees_identical=False,
        original=passing(),
        replay=passing(),
        original_recorded_passed=True,
    )
    return dataclasses.replace(base, **changes)


def check(decision, name):
    (found,) = [c for c in decision.checks if c.name == name]
    return found


# Row 1


@pytest.mark.parametrize("code", sorted(HARNESS_REASONS))
def test_a_replay_that_could_not_run_is_inconclusive_with_its_own_code(code):
    decision = decide(facts(harness_failure=code))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == code


def test_a_missing_sandbox_names_what_is_missing():
    decision = decide(
        facts(
            harness_failure=Reason.SANDBOX_UNAVAILABLE,
            harness_detail="bubblewrap is not installed.",
        )
    )

    assert decision.reason == (
        "No isolating sandbox runner was available, so the replay was refused: "
        "bubblewrap is not installed."
    )


def test_a_fired_cap_names_which_cap():
    decision = decide(
        facts(harness_failure=Reason.CAP_FIRED, cap_detail="turn cap of 40 turns")
    )

    assert decision.reason_code == Reason.CAP_FIRED
    assert "(turn cap of 40 turns)" in decision.reason


def test_a_caps_name_reads_as_words_and_a_timeout_does_not_repeat_itself():
    files = decide(facts(harness_failure=Reason.CAP_FIRED, cap_detail="max_files"))
    late = decide(facts(harness_failure=Reason.TIMEOUT, cap_detail="wall_time"))

    assert files.reason.startswith(
        "A per-replay cap fired before the replay produced a change (max files)"
    )
    assert late.reason == "The replay hit its time limit before producing a change."


def test_harness_detail_is_folded_into_one_line():
    decision = decide(
        facts(
            harness_failure=Reason.HARNESS_ERROR,
            harness_detail="Traceback:\n  boom\x1b[31m\n" + "x" * 5000,
        )
    )

    assert "\n" not in decision.reason
    assert "\x1b" not in decision.reason
    assert len(decision.reason) < 400
    assert decision.reason.endswith(".")


def test_a_replay_that_could_not_run_has_no_tree_to_compare():
    decision = decide(facts(harness_failure=Reason.NO_CHANGE))

    identity = check(decision, "tree identity")
    assert identity.outcome == Outcome.UNKNOWN
    assert identity.evidence_class == EvidenceClass.UNAVAILABLE
    assert check(decision, "replay run").outcome == Outcome.FAIL


# Row 2


def test_first_parent_base_is_never_trusted():
    decision = decide(facts(base_source="first-parent", base_confirmed=True))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.BASE_UNTRUSTED
    assert "first-parent guess" in decision.reason


def test_an_original_that_does_not_descend_from_the_base_is_untrusted():
    decision = decide(facts(base_source="fork-point", base_confirmed=False))

    assert decision.reason_code == Reason.BASE_UNTRUSTED
    assert decision.reason == (
        "The original commit does not descend from the fork-point base commit."
    )
    assert check(decision, "base ancestry").outcome == Outcome.FAIL


def test_an_unresolved_base_is_untrusted():
    decision = decide(facts(base_source="none", base_confirmed=False))

    assert decision.reason_code == Reason.BASE_UNTRUSTED


def test_a_fork_point_base_that_the_original_descends_from_is_trusted():
    decision = decide(facts(base_source="fork-point"))

    assert decision.verdict == Verdict.EQUIVALENT
    ancestry = check(decision, "base ancestry")
    assert ancestry.outcome == Outcome.PASS
    assert ancestry.evidence_class == EvidenceClass.INDEPENDENTLY_OBSERVED


# Row 3


def test_identical_trees_are_identical():
    decision = decide(facts(trees_identical=True, original=None, replay=None))

    assert decision.verdict == Verdict.IDENTICAL
    assert decision.reason_code == Reason.SAME_TREE
    identity = check(decision, "tree identity")
    assert identity.outcome == Outcome.PASS
    assert identity.evidence_class == EvidenceClass.CRYPTOGRAPHICALLY_VERIFIED


# Row 4


def test_differing_trees_without_a_test_command_are_inconclusive():
    decision = decide(facts(has_test_command=False, original=None, replay=None))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.NO_TEST_COMMAND
    assert check(decision, "tests on replay").outcome == Outcome.SKIPPED


def test_differing_trees_with_tests_skipped_by_request_are_inconclusive():
    decision = decide(facts(tests_skipped=True, original=None, replay=None))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.TESTS_SKIPPED


# Row 5


def test_a_suite_that_could_not_execute_on_the_replay_is_inconclusive():
    decision = decide(facts(replay=NOT_RUN))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.TESTS_NOT_RUN
    assert decision.reason == (
        "The test suite could not execute on the replay tree (replay exit code 127)."
    )


def test_a_suite_that_could_not_execute_on_the_original_names_that_tree():
    decision = decide(facts(original=NOT_RUN))

    assert decision.reason_code == Reason.TESTS_NOT_RUN
    assert "on the original tree" in decision.reason


def test_a_tree_with_no_test_result_at_all_counts_as_not_run():
    decision = decide(facts(original=None, replay=None))

    assert decision.reason == "The test suite could not execute on either tree."


# Row 6


def test_a_suite_that_executed_no_tests_is_below_the_evidence_floor():
    decision = decide(facts(replay=passing(executed=0)))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.BELOW_EVIDENCE_FLOOR
    assert "the replay tree's suite executed no tests" in decision.reason


def test_a_suite_with_fewer_tests_than_the_floor_is_below_it():
    decision = decide(facts(original=passing(executed=3), evidence_floor=5))

    assert decision.reason_code == Reason.BELOW_EVIDENCE_FLOOR
    assert decision.reason == (
        "Not enough test evidence (evidence floor: 5 tests): "
        "the original tree's suite executed 3 tests."
    )


def test_a_suite_with_exactly_the_floor_meets_it():
    decision = decide(facts(original=passing(5), replay=passing(5), evidence_floor=5))

    assert decision.verdict == Verdict.EQUIVALENT


def test_an_unknown_test_count_never_meets_the_default_floor():
    decision = decide(facts(replay=passing(executed=None)))

    assert decision.reason_code == Reason.BELOW_EVIDENCE_FLOOR
    assert "reported no test count" in decision.reason


def test_an_unknown_test_count_is_accepted_only_at_a_floor_of_zero():
    decision = decide(
        facts(
            original=passing(executed=None),
            replay=passing(executed=None),
            evidence_floor=0,
        )
    )

    assert decision.verdict == Verdict.EQUIVALENT
    assert "test count unknown" in decision.reason


def test_zero_tests_are_refused_even_at_a_floor_of_zero():
    decision = decide(facts(replay=passing(executed=0), evidence_floor=0))

    assert decision.reason_code == Reason.BELOW_EVIDENCE_FLOOR


def test_a_floor_shortfall_on_both_trees_names_both():
    decision = decide(
        facts(original=failing(executed=0), replay=passing(executed=None))
    )

    assert "original tree's suite executed no tests" in decision.reason
    assert "replay tree's suite reported no test count" in decision.reason


# Row 7


@pytest.mark.parametrize("tree", ["original", "replay"])
def test_an_outcome_that_flipped_across_reruns_is_flaky(tree):
    decision = decide(facts(**{tree: passing(flaky=True)}))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.FLAKY_TESTS
    assert f"on the {tree} tree" in decision.reason
    assert check(decision, f"tests on {tree}").outcome == Outcome.UNKNOWN


# Row 8


def test_an_original_failing_in_the_sandbox_after_passing_on_record_is_refused():
    decision = decide(facts(original=failing(), original_recorded_passed=True))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.BASELINE_FAILED
    assert "although its recorded result passed" in decision.reason


def test_an_original_that_fails_with_no_recorded_result_is_a_failed_baseline():
    decision = decide(facts(original=failing(), original_recorded_passed=None))

    assert decision.reason_code == Reason.BASELINE_FAILED
    assert "has no result for it" in decision.reason


# Row 9


def test_touching_disallowed_paths_is_divergent():
    decision = decide(facts(disallowed_paths=(".github/workflows/ci.yml",)))

    assert decision.verdict == Verdict.DIVERGENT
    assert decision.reason_code == Reason.DISALLOWED_PATHS
    assert decision.reason == (
        "The replay touched 1 path outside the allowed globs: .github/workflows/ci.yml."
    )
    paths = check(decision, "allowed paths")
    assert paths.outcome == Outcome.FAIL
    assert paths.evidence_class == EvidenceClass.INDEPENDENTLY_OBSERVED


def test_many_disallowed_paths_are_summarised():
    paths = tuple(f"secrets/{n}.env" for n in range(8))

    decision = decide(facts(disallowed_paths=paths))

    assert decision.reason.startswith("The replay touched 8 paths")
    assert "secrets/4.env and 3 more." in decision.reason
    assert "secrets/5.env" not in decision.reason


def test_a_disallowed_path_with_control_characters_stays_on_one_line():
    decision = decide(facts(disallowed_paths=("evil\nname\x1b[2J",)))

    assert "\n" not in decision.reason
    assert "\x1b" not in decision.reason


# Rows 10-12


def test_differing_trees_that_both_pass_are_equivalent():
    decision = decide(facts(original=passing(12), replay=passing(14)))

    assert decision.verdict == Verdict.EQUIVALENT
    assert decision.reason_code == Reason.TESTS_AGREE
    assert decision.reason == (
        "The trees differ but both pass the test suite "
        "(original: 12 tests, replay: 14 tests)."
    )


def test_a_replay_that_fails_where_the_original_passes_is_divergent():
    decision = decide(facts(replay=failing()))

    assert decision.verdict == Verdict.DIVERGENT
    assert decision.reason_code == Reason.REPLAY_FAILS_TESTS


def test_a_replay_that_passes_where_the_original_failed_as_recorded_is_divergent():
    decision = decide(facts(original=failing(), original_recorded_passed=False))

    assert decision.verdict == Verdict.DIVERGENT
    assert decision.reason_code == Reason.REPLAY_PASSES_TESTS


def test_two_red_suites_are_divergent_never_equivalent():
    decision = decide(
        facts(original=failing(), replay=failing(), original_recorded_passed=False)
    )

    assert decision.verdict == Verdict.DIVERGENT
    assert decision.reason_code == Reason.BOTH_FAIL
    assert decision.reason.startswith("Both trees fail the test suite")


# One example per reason code.

REASON_EXAMPLES = {
    **{code: facts(harness_failure=code) for code in HARNESS_REASONS},
    Reason.BASE_UNTRUSTED: facts(base_source="first-parent"),
    Reason.SAME_TREE: facts(trees_identical=True),
    Reason.NO_TEST_COMMAND: facts(has_test_command=False),
    Reason.TESTS_SKIPPED: facts(tests_skipped=True),
    Reason.TESTS_NOT_RUN: facts(replay=NOT_RUN),
    Reason.BELOW_EVIDENCE_FLOOR: facts(original=passing(0)),
    Reason.FLAKY_TESTS: facts(replay=failing(flaky=True)),
    Reason.BASELINE_FAILED: facts(original=failing()),
    Reason.DISALLOWED_PATHS: facts(disallowed_paths=("Makefile",)),
    Reason.TESTS_AGREE: facts(),
    Reason.REPLAY_FAILS_TESTS: facts(replay=failing()),
    Reason.REPLAY_PASSES_TESTS: facts(
        original=failing(), original_recorded_passed=False
    ),
    Reason.BOTH_FAIL: facts(
        original=failing(), replay=failing(), original_recorded_passed=False
    ),
    Reason.REPLAY_FAILS_REFERENCE_TESTS: facts(
        replay=passing(3), reference=failing(9), newly_failing=("t.py::test_edge",)
    ),
    Reason.TESTS_MISSING: facts(missing_tests=("t.py::test_edge",)),
    Reason.TEST_INTERFERENCE: facts(
        interference="calc.py line 3 exits the process at import"
    ),
    Reason.MODEL_MISMATCH: facts(
        model_recorded="claude-x",
        models_called=("gpt-y",),
        require_recorded_model=True,
    ),
    Reason.NETWORK_REQUIRED: facts(replay=failing(), denied_hosts=("pypi.org:443",)),
    Reason.UNSTORABLE_PATHS: facts(unstorable_paths=".GIT/config"),
}


CODE_RUN_REASONS = [code for code in Reason if code not in ROLLOUT_REASONS]


def test_every_reason_code_has_an_example():
    # Rollout reasons have theirs in tests/verdicts/test_rollout.py.
    assert set(REASON_EXAMPLES) == set(CODE_RUN_REASONS)


@pytest.mark.parametrize("code", CODE_RUN_REASONS)
def test_each_reason_code_is_reached_with_its_verdict(code):
    decision = decide(REASON_EXAMPLES[code])

    assert decision.reason_code == code
    assert decision.verdict == REASON_VERDICT[code]


# Precedence between adjacent rows.


def test_a_harness_failure_beats_an_untrusted_base():
    decision = decide(
        facts(harness_failure=Reason.WORKER_LOST, base_source="first-parent")
    )

    assert decision.reason_code == Reason.WORKER_LOST


def test_identical_trees_with_paths_git_could_not_store_are_not_identical():
    decision = decide(facts(trees_identical=True, unstorable_paths=".GIT/config"))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.UNSTORABLE_PATHS
    assert ".GIT/config" in decision.reason


def test_disallowed_paths_beat_paths_git_could_not_store():
    decision = decide(
        facts(disallowed_paths=(".GIT/config",), unstorable_paths=".GIT/config")
    )

    assert decision.reason_code == Reason.DISALLOWED_PATHS


def test_an_untrusted_base_beats_identical_trees():
    decision = decide(facts(base_source="first-parent", trees_identical=True))

    assert decision.verdict == Verdict.INCONCLUSIVE
    assert decision.reason_code == Reason.BASE_UNTRUSTED
    assert decision.reason.endswith("so even identical trees prove nothing.")


def test_identical_trees_beat_a_missing_test_command():
    decision = decide(facts(trees_identical=True, has_test_command=False))

    assert decision.reason_code == Reason.SAME_TREE


def test_identical_trees_beat_every_test_outcome():
    decision = decide(
        facts(
            trees_identical=True,
            original=failing(flaky=True),
            replay=NOT_RUN,
            disallowed_paths=("Makefile",),
        )
    )

    assert decision.verdict == Verdict.IDENTICAL


def test_a_missing_test_command_beats_skipped_tests():
    decision = decide(facts(has_test_command=False, tests_skipped=True))

    assert decision.reason_code == Reason.NO_TEST_COMMAND


def test_a_missing_test_command_beats_suites_that_did_not_run():
    decision = decide(facts(has_test_command=False, original=NOT_RUN, replay=NOT_RUN))

    assert decision.reason_code == Reason.NO_TEST_COMMAND


def test_skipped_tests_beat_suites_that_did_not_run():
    decision = decide(facts(tests_skipped=True, replay=NOT_RUN))

    assert decision.reason_code == Reason.TESTS_SKIPPED


def test_a_suite_that_did_not_run_beats_a_floor_shortfall_on_the_other():
    decision = decide(facts(original=passing(0), replay=NOT_RUN))

    assert decision.reason_code == Reason.TESTS_NOT_RUN


def test_the_evidence_floor_is_checked_before_flakiness():
    decision = decide(facts(original=passing(0), replay=passing(flaky=True)))

    assert decision.reason_code == Reason.BELOW_EVIDENCE_FLOOR


def test_flakiness_is_checked_before_the_baseline():
    decision = decide(
        facts(original=failing(flaky=True), original_recorded_passed=True)
    )

    assert decision.reason_code == Reason.FLAKY_TESTS


def test_disallowed_paths_beat_every_test_refusal():
    for refusal in (
        facts(original=failing()),
        facts(replay=NOT_RUN),
        facts(original=passing(0)),
        facts(replay=failing(flaky=True)),
        facts(has_test_command=False),
        facts(missing_tests=("t.py::a",)),
        facts(interference="x.py line 1 exits the process at import"),
    ):
        changed = dataclasses.replace(refusal, disallowed_paths=("Makefile",))
        assert decide(changed).reason_code == Reason.DISALLOWED_PATHS


def test_disallowed_paths_beat_two_passing_suites():
    decision = decide(facts(disallowed_paths=("Makefile",)))

    assert decision.verdict == Verdict.DIVERGENT
    assert decision.reason_code == Reason.DISALLOWED_PATHS


def test_replay_failing_tests_is_checked_after_disallowed_paths():
    decision = decide(facts(replay=failing(), disallowed_paths=("Makefile",)))

    assert decision.reason_code == Reason.DISALLOWED_PATHS


# Checks and their evidence classes.


def test_the_checks_are_always_the_same_list_in_the_same_order():
    names = [c.name for c in decide(facts()).checks]

    assert names == [
        "replay run",
        "recorded base",
        "base ancestry",
        "tree identity",
        "allowed paths",
        "recorded test result",
        "tests on original",
        "tests on replay",
        "tests on reference",
        "test changes",
        "test interference",
        "test ids",
        "model called",
    ]
    for example in REASON_EXAMPLES.values():
        assert [c.name for c in decide(example).checks] == names


def test_test_gate_checks_are_independently_executed():
    decision = decide(facts(replay=failing(7, exit_code=1)))

    replay = check(decision, "tests on replay")
    assert replay.evidence_class == EvidenceClass.INDEPENDENTLY_EXECUTED
    assert replay.outcome == Outcome.FAIL
    assert replay.detail == "Failed in the sandbox (7 tests, exit code 1)."


def test_a_recorded_base_is_executor_supplied():
    decision = decide(facts(base_source="recorded"))

    assert check(decision, "recorded base").evidence_class == (
        EvidenceClass.EXECUTOR_SUPPLIED
    )


def test_a_computed_base_has_no_recorded_base_evidence():
    decision = decide(facts(base_source="fork-point"))

    recorded = check(decision, "recorded base")
    assert recorded.evidence_class == EvidenceClass.UNAVAILABLE
    assert recorded.outcome == Outcome.UNKNOWN


def test_the_recorded_test_result_is_executor_supplied_when_present():
    present = check(decide(facts()), "recorded test result")
    absent = check(decide(facts(original_recorded_passed=None)), "recorded test result")

    assert present.evidence_class == EvidenceClass.EXECUTOR_SUPPLIED
    assert present.outcome == Outcome.PASS
    assert absent.evidence_class == EvidenceClass.UNAVAILABLE


def test_tests_not_needed_for_identical_trees_are_marked_skipped():
    decision = decide(facts(trees_identical=True, original=None, replay=None))

    original = check(decision, "tests on original")
    assert original.outcome == Outcome.SKIPPED
    assert original.evidence_class == EvidenceClass.UNAVAILABLE


# Labels and contracts.


def test_every_reason_has_a_label_and_a_verdict():
    assert set(REASON_TEXT) == set(Reason)
    assert set(REASON_VERDICT) == set(Reason)
    assert all(REASON_TEXT.values())


def test_inconclusive_reasons_include_every_harness_reason():
    assert HARNESS_REASONS < INCONCLUSIVE_REASONS
    assert {
        code
        for code, verdict in REASON_VERDICT.items()
        if verdict == Verdict.INCONCLUSIVE
    } == INCONCLUSIVE_REASONS


def test_a_suite_that_ran_must_say_whether_it_passed():
    with pytest.raises(ValueError):
        SuiteResult(ran=True, passed=None, tests_executed=3)


def test_a_suite_that_did_not_run_cannot_have_passed():
    with pytest.raises(ValueError):
        SuiteResult(ran=False, passed=False, tests_executed=None)


def test_a_negative_test_count_is_rejected():
    with pytest.raises(ValueError):
        passing(executed=-1)


def test_only_row_one_codes_are_harness_failures():
    with pytest.raises(ValueError):
        Facts(harness_failure=Reason.FLAKY_TESTS)


def test_an_unknown_base_source_is_rejected():
    with pytest.raises(ValueError):
        Facts(base_source="merge-base")


def test_a_negative_evidence_floor_is_rejected():
    with pytest.raises(ValueError):
        Facts(evidence_floor=-1)


def test_disallowed_paths_given_as_a_list_become_a_tuple():
    assert Facts(disallowed_paths=["a", "b"]).disallowed_paths == ("a", "b")


def test_disallowed_paths_given_as_one_string_are_rejected():
    with pytest.raises(TypeError):
        Facts(disallowed_paths="Makefile")
