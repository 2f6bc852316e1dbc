"""The verdict table: rows evaluated top to bottom, the first match wins."""

from __future__ import annotations

from replayhub.verdicts.check_list import checks_for
from replayhub.verdicts.facts import Facts, Reason, Ruling, SuiteResult, Verdict
from replayhub.verdicts.text import (
    base_reason,
    base_trusted,
    baseline_reason,
    clean,
    count_text,
    floor_shortfalls,
    harness_reason,
    judged_label,
    lacks_toolchain,
    names_text,
    not_run_reason,
    paths_reason,
    tests_text,
    which_trees,
)


def decide(facts: Facts) -> Ruling:
    """Apply the verdict table to ``facts``; the first matching row wins.

    Evidence floor: a suite meets it only when its count is known, non-zero and at
    least ``facts.evidence_floor``. An unknown count is never taken to be one test
    or more, since a command that exits without a readable summary may have run
    nothing at all; so with the default floor of 1 an unknown count is
    inconclusive. Only a floor of 0, set by a project whose runner prints no
    count, accepts an unknown count, and a count known to be zero is refused
    whatever the floor.
    """
    verdict, code, reason = _row(facts)
    return Ruling(
        verdict=verdict, reason_code=code, reason=reason, checks=checks_for(facts)
    )


# A row of the table as it rules: the verdict, its reason code and its sentence.
_Row = tuple[Verdict, Reason, str]


def _row(facts: Facts) -> _Row:
    """The table's first matching row: first the rows no test run decides
    (the harness, the base, the model, identical trees, the paths, no test
    command or tests skipped), then the rows that read the test runs."""
    return _row_before_tests(facts) or _row_by_tests(facts)


def _row_before_tests(facts: Facts) -> _Row | None:
    inconclusive = Verdict.INCONCLUSIVE
    if facts.harness_failure is not None:
        return inconclusive, facts.harness_failure, harness_reason(facts)
    if not base_trusted(facts):
        return inconclusive, Reason.BASE_UNTRUSTED, base_reason(facts)
    if facts.other_models and facts.require_recorded_model:
        return (
            inconclusive,
            Reason.MODEL_MISMATCH,
            f"The agent called {names_text(facts.other_models)}, not the recorded "
            f"{clean(facts.model_recorded)}, and the project requires the recorded "
            "model.",
        )
    if facts.trees_identical and not facts.unstorable_paths:
        return (
            Verdict.IDENTICAL,
            Reason.SAME_TREE,
            "The replay's result tree has the same tree hash as the original's.",
        )
    # Observed without running anything the replay wrote, so no test refusal
    # below can stand in for it.
    if facts.disallowed_paths:
        return (
            Verdict.DIVERGENT,
            Reason.DISALLOWED_PATHS,
            paths_reason(facts.disallowed_paths),
        )
    if facts.unstorable_paths:
        return (
            inconclusive,
            Reason.UNSTORABLE_PATHS,
            f"The agent left paths git cannot store ({clean(facts.unstorable_paths)}"
            "), so the stored tree is not what it left and was not judged.",
        )
    if not facts.has_test_command:
        return (
            inconclusive,
            Reason.NO_TEST_COMMAND,
            "The trees differ and the project has no test command to compare "
            "their behaviour.",
        )
    if facts.tests_skipped:
        return (
            inconclusive,
            Reason.TESTS_SKIPPED,
            "The trees differ and the tests were skipped by request, so their "
            "behaviour was not compared.",
        )
    return None


def _row_by_tests(facts: Facts) -> _Row:
    inconclusive = Verdict.INCONCLUSIVE
    # The replay is judged by the original's tests run on its code (the
    # reference run) whenever its own test files differ from the original's.
    original, judged = facts.original, facts.judged
    short, label = judged_label(facts)
    if (
        original is None
        or judged is None
        or not original.ran
        or not judged.ran
        # The original's every test failed for a missing module or command:
        # the sandbox, not the code, lacks it.
        or lacks_toolchain(original)
    ):
        return (
            inconclusive,
            Reason.TESTS_NOT_RUN,
            not_run_reason(original, judged, (short, label)),
        )
    shortfalls = floor_shortfalls(facts.evidence_floor, original, judged, label)
    if shortfalls:
        return (
            inconclusive,
            Reason.BELOW_EVIDENCE_FLOOR,
            f"Not enough test evidence (evidence floor: "
            f"{tests_text(facts.evidence_floor)}): {' and '.join(shortfalls)}.",
        )
    if original.flaky or judged.flaky:
        where = which_trees(original.flaky, judged.flaky, label)
        return (
            inconclusive,
            Reason.FLAKY_TESTS,
            f"The test outcome flipped across reruns on {where}.",
        )
    if facts.denied_hosts and not (original.passed and judged.passed):
        return (
            inconclusive,
            Reason.NETWORK_REQUIRED,
            "A test run failed after the egress proxy refused "
            f"{names_text(facts.denied_hosts)}, so the failure may be the "
            "sandbox's, not the code's.",
        )
    if not original.passed and facts.original_recorded_passed is not False:
        return inconclusive, Reason.BASELINE_FAILED, baseline_reason(facts)
    counts = f"(original: {count_text(original)}, {short}: {count_text(judged)})"
    if original.passed:
        return _original_passed(facts, judged, counts)
    # From here the original fails in the sandbox as its record says it did.
    if judged.passed:
        return (
            Verdict.DIVERGENT,
            Reason.REPLAY_PASSES_TESTS,
            f"The {label} passes the test suite the original tree fails, as "
            f"recorded {counts}.",
        )
    return (
        Verdict.DIVERGENT,
        Reason.BOTH_FAIL,
        f"Both trees fail the test suite, the original as recorded {counts}.",
    )


def _original_passed(facts: Facts, judged: SuiteResult, counts: str) -> _Row:
    failing = facts.newly_failing
    if not judged.passed:
        if failing and set(failing) <= set(facts.known_flaky):
            return (
                Verdict.INCONCLUSIVE,
                Reason.FLAKY_TESTS,
                "The replay fails only tests known to flip on this project: "
                f"{names_text(failing)}.",
            )
        named = f"; failing: {names_text(failing)}" if failing else ""
        if facts.reference is not None:
            return (
                Verdict.DIVERGENT,
                Reason.REPLAY_FAILS_REFERENCE_TESTS,
                "The replay's code fails the original's tests, which the "
                f"original tree passes {counts}{named}.",
            )
        return (
            Verdict.DIVERGENT,
            Reason.REPLAY_FAILS_TESTS,
            f"The replay tree fails the test suite the original tree passes "
            f"{counts}{named}.",
        )
    if facts.missing_tests:
        return (
            Verdict.INCONCLUSIVE,
            Reason.TESTS_MISSING,
            f"The {judged_label(facts)[1]} did not report "
            f"{tests_text(len(facts.missing_tests))} the original's run reported: "
            f"{names_text(facts.missing_tests)}.",
        )
    if facts.interference and not facts.interference_allowed:
        return (
            Verdict.INCONCLUSIVE,
            Reason.TEST_INTERFERENCE,
            f"The tests pass, but {clean(facts.interference).rstrip('.')}, so the "
            "passing run is not evidence.",
        )
    return (
        Verdict.EQUIVALENT,
        Reason.TESTS_AGREE,
        f"The trees differ but both pass the test suite {counts}.",
    )
