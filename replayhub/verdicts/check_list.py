"""The checks behind a decision, each labelled with the evidence class it rests on."""

from __future__ import annotations

from replayhub.verdicts.facts import Check, EvidenceClass, Facts, Outcome, SuiteResult
from replayhub.verdicts.text import (
    base_reason,
    base_trusted,
    clean,
    count_text,
    exit_text,
    harness_reason,
    names_text,
    paths_reason,
)


def checks_for(facts: Facts) -> tuple[Check, ...]:
    ran = facts.harness_failure is None
    observed = EvidenceClass.INDEPENDENTLY_OBSERVED
    unavailable = EvidenceClass.UNAVAILABLE
    checks = [
        Check(
            "replay run",
            Outcome.PASS if ran else Outcome.FAIL,
            observed,
            "The replay ran and produced a result tree."
            if ran
            else harness_reason(facts),
        ),
        _recorded_base_check(facts),
        _ancestry_check(facts),
    ]
    if ran:
        checks.append(
            Check(
                "tree identity",
                Outcome.PASS if facts.trees_identical else Outcome.FAIL,
                EvidenceClass.CRYPTOGRAPHICALLY_VERIFIED,
                "The two result trees have the same tree hash."
                if facts.trees_identical
                else "The two result trees have different tree hashes.",
            )
        )
        checks.append(
            Check(
                "allowed paths",
                Outcome.FAIL if facts.disallowed_paths else Outcome.PASS,
                observed,
                paths_reason(facts.disallowed_paths)
                if facts.disallowed_paths
                else "The replay touched only paths inside the allowed globs.",
            )
        )
    else:
        no_tree = "Not checked: the replay produced no result tree."
        checks.append(Check("tree identity", Outcome.UNKNOWN, unavailable, no_tree))
        checks.append(Check("allowed paths", Outcome.UNKNOWN, unavailable, no_tree))
    checks.append(_recorded_result_check(facts))
    checks.append(_suite_check(facts, "original", facts.original))
    checks.append(_suite_check(facts, "replay", facts.replay))
    checks.append(_reference_check(facts))
    checks.append(_test_changes_check(facts))
    checks.append(_interference_check(facts))
    checks.append(_per_test_check(facts))
    checks.append(_model_check(facts))
    return tuple(checks)


def _model_check(facts: Facts) -> Check:
    name = "model called"
    if not facts.models_called and facts.model_calls_attempted:
        return Check(
            name,
            Outcome.FAIL,
            EvidenceClass.INDEPENDENTLY_OBSERVED,
            f"None of the agent's {facts.model_calls_attempted} model calls "
            "through the gateway was answered.",
        )
    if not facts.models_called:
        return Check(
            name,
            Outcome.UNKNOWN,
            EvidenceClass.UNAVAILABLE,
            "The agent made no model call through the gateway.",
        )
    called = names_text(tuple(sorted(set(facts.models_called))))
    if not facts.model_recorded:
        return Check(
            name,
            Outcome.UNKNOWN,
            EvidenceClass.INDEPENDENTLY_OBSERVED,
            f"The agent called {called}; the record names no model.",
        )
    if facts.other_models:
        return Check(
            name,
            Outcome.FAIL,
            EvidenceClass.INDEPENDENTLY_OBSERVED,
            f"The agent called {called}; the record names "
            f"{clean(facts.model_recorded)}.",
        )
    return Check(
        name,
        Outcome.PASS,
        EvidenceClass.INDEPENDENTLY_OBSERVED,
        f"The agent called only the recorded model, {clean(facts.model_recorded)}.",
    )


def _not_compared(facts: Facts) -> Check | None:
    """Why the test evidence was not gathered at all, as a check's outcome."""
    if facts.original is not None:
        return None
    outcome, detail = _why_no_suite(facts)
    return Check("", outcome, EvidenceClass.UNAVAILABLE, detail)


def _reference_check(facts: Facts) -> Check:
    name = "tests on reference"
    if facts.reference is None and facts.original is not None:
        return Check(
            name,
            Outcome.SKIPPED,
            EvidenceClass.UNAVAILABLE,
            "Not needed: the replay's test files are the original's, so the "
            "replay tree's run is the reference run.",
        )
    return _suite_check(facts, "reference", facts.reference, name=name)


def _test_changes_check(facts: Facts) -> Check:
    name = "test changes"
    if (missing := _not_compared(facts)) is not None:
        return Check(name, missing.outcome, missing.evidence_class, missing.detail)
    if facts.test_changes:
        return Check(
            name,
            Outcome.FAIL,
            EvidenceClass.INDEPENDENTLY_OBSERVED,
            _sentence(facts.test_changes),
        )
    return Check(
        name,
        Outcome.PASS,
        EvidenceClass.INDEPENDENTLY_OBSERVED,
        "No test file differs from the original's.",
    )


def _interference_check(facts: Facts) -> Check:
    name = "test interference"
    if (missing := _not_compared(facts)) is not None:
        return Check(name, missing.outcome, missing.evidence_class, missing.detail)
    observed = EvidenceClass.INDEPENDENTLY_OBSERVED
    if not facts.interference:
        return Check(
            name,
            Outcome.PASS,
            observed,
            "Nothing in the replay's change was found that could report a test "
            "run's result itself.",
        )
    if facts.interference_allowed:
        return Check(
            name,
            Outcome.UNKNOWN,
            observed,
            _sentence(facts.interference).rstrip(".") + " (the project allows it).",
        )
    return Check(name, Outcome.FAIL, observed, _sentence(facts.interference))


def _per_test_check(facts: Facts) -> Check:
    name = "test ids"
    if (missing := _not_compared(facts)) is not None:
        return Check(name, missing.outcome, missing.evidence_class, missing.detail)
    executed = EvidenceClass.INDEPENDENTLY_EXECUTED
    if facts.newly_failing:
        flaky = set(facts.known_flaky)
        failing = names_text(facts.newly_failing)
        detail = f"Passed on the original, failed on the judging run: {failing}"
        if flaky:
            detail += f" (known to flip: {names_text(tuple(sorted(flaky)))})"
        return Check(name, Outcome.FAIL, executed, detail + ".")
    if facts.missing_tests:
        return Check(
            name,
            Outcome.FAIL,
            executed,
            f"Reported by the original's run, missing from the judging run: "
            f"{names_text(facts.missing_tests)}.",
        )
    if not facts.per_test:
        return Check(
            name,
            Outcome.UNKNOWN,
            EvidenceClass.UNAVAILABLE,
            "The runs reported no test ids, so they were compared by their "
            "totals only.",
        )
    return Check(
        name,
        Outcome.PASS,
        executed,
        "Every test that passed on the original passed on the judging run.",
    )


def _sentence(text: str) -> str:
    text = clean(text)
    return text if text.endswith(".") else text + "."


def _recorded_base_check(facts: Facts) -> Check:
    if facts.base_source == "recorded":
        return Check(
            "recorded base",
            Outcome.PASS,
            EvidenceClass.EXECUTOR_SUPPLIED,
            "The record names the base commit.",
        )
    found = {
        "fork-point": "the base is the fork point found in git history",
        "first-parent": "the base is a first-parent guess",
        "inferred": "the base or the original was inferred by a transcript import",
        "none": "no base could be resolved",
    }[facts.base_source]
    return Check(
        "recorded base",
        Outcome.UNKNOWN,
        EvidenceClass.UNAVAILABLE,
        f"The record names no base commit; {found}.",
    )


def _ancestry_check(facts: Facts) -> Check:
    if facts.base_source == "none":
        return Check(
            "base ancestry",
            Outcome.UNKNOWN,
            EvidenceClass.UNAVAILABLE,
            "No base commit to check the original against.",
        )
    if base_trusted(facts):
        return Check(
            "base ancestry",
            Outcome.PASS,
            EvidenceClass.INDEPENDENTLY_OBSERVED,
            f"The original commit descends from the {facts.base_source} base.",
        )
    return Check(
        "base ancestry",
        Outcome.FAIL,
        EvidenceClass.INDEPENDENTLY_OBSERVED,
        base_reason(facts),
    )


def _recorded_result_check(facts: Facts) -> Check:
    recorded = facts.original_recorded_passed
    if recorded is None:
        return Check(
            "recorded test result",
            Outcome.UNKNOWN,
            EvidenceClass.UNAVAILABLE,
            "The record has no test result for the original.",
        )
    return Check(
        "recorded test result",
        Outcome.PASS if recorded else Outcome.FAIL,
        EvidenceClass.EXECUTOR_SUPPLIED,
        f"The record says the original's tests {'passed' if recorded else 'failed'}.",
    )


def _suite_check(
    facts: Facts, tree: str, suite: SuiteResult | None, *, name: str = ""
) -> Check:
    name = name or f"tests on {tree}"
    unavailable = EvidenceClass.UNAVAILABLE
    if suite is None:
        outcome, detail = _why_no_suite(facts)
        return Check(name, outcome, unavailable, detail)
    if not suite.ran:
        return Check(
            name,
            Outcome.UNKNOWN,
            unavailable,
            f"The test suite could not execute on this tree"
            f"{exit_text(suite, ' (exit code {})')}.",
        )
    if suite.flaky:
        return Check(
            name,
            Outcome.UNKNOWN,
            EvidenceClass.INDEPENDENTLY_EXECUTED,
            f"The outcome flipped across reruns ({count_text(suite)}).",
        )
    return Check(
        name,
        Outcome.PASS if suite.passed else Outcome.FAIL,
        EvidenceClass.INDEPENDENTLY_EXECUTED,
        f"{'Passed' if suite.passed else 'Failed'} in the sandbox ({count_text(suite)}"
        f"{exit_text(suite, ', exit code {}')}).",
    )


def _why_no_suite(facts: Facts) -> tuple[Outcome, str]:
    if facts.harness_failure is not None:
        return Outcome.UNKNOWN, "Not run: the replay produced no result tree."
    if not base_trusted(facts):
        return Outcome.SKIPPED, "Not run: the base commit is not trusted."
    if facts.trees_identical:
        return Outcome.SKIPPED, "Not needed: the trees are identical."
    if facts.disallowed_paths:
        return Outcome.SKIPPED, "Not needed: the replay touched disallowed paths."
    if not facts.has_test_command:
        return Outcome.SKIPPED, "Not run: the project has no test command."
    if facts.tests_skipped:
        return Outcome.SKIPPED, "Not run: skipped by request."
    return Outcome.UNKNOWN, "The test gate gave no result for this tree."
