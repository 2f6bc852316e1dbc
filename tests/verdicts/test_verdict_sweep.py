"""An exhaustive sweep over a grid of facts, asserting the table's invariants."""

from __future__ import annotations

import functools
import itertools

import pytest

from replayhub.verdicts import (
    HARNESS_REASONS,
    INCONCLUSIVE_REASONS,
    REASON_VERDICT,
    ROLLOUT_REASONS,
    EvidenceClass,
    Facts,
    Outcome,
    Reason,
    Ruling,
    Verdict,
    decide,
)
from tests.verdicts.test_verdicts import NOT_RUN, check, facts, failing, passing

# One worker computes the sweeps (some 160,000 decisions) once for every test
# here; spread over workers, each computed them again.
pytestmark = pytest.mark.xdist_group("verdict-sweep")

SUITE_SHAPES = (
    None,
    NOT_RUN,
    passing(0),
    passing(None),
    passing(1),
    passing(5),
    failing(5),
    passing(5, flaky=True),
    failing(5, flaky=True),
)
BASES = (
    ("recorded", True),
    ("recorded", False),
    ("fork-point", True),
    ("first-parent", True),
    ("none", False),
)
TEST_SETTINGS = ((True, False), (False, False), (True, True))


@functools.cache
def sweep() -> tuple[tuple[Facts, Ruling], ...]:
    grid = itertools.product(
        (None, Reason.TIMEOUT, Reason.HOST_FAILED),
        BASES,
        (False, True),
        TEST_SETTINGS,
        SUITE_SHAPES,
        SUITE_SHAPES,
        (0, 1, 5),
        (None, True, False),
        ((), ("deploy/prod.yml",)),
    )
    results = []
    for (
        harness,
        (source, confirmed),
        identical,
        (has_command, skipped),
        original,
        replay,
        floor,
        recorded,
        disallowed,
    ) in grid:
        case = Facts(
            harness_failure=harness,
            base_source=source,
            base_confirmed=confirmed,
            trees_identical=identical,
            has_test_command=has_command,
            tests_skipped=skipped,
            original=original,
            replay=replay,
            evidence_floor=floor,
            original_recorded_passed=recorded,
            disallowed_paths=disallowed,
        )
        results.append((case, decide(case)))
    return tuple(results)


JUDGING = (
    {},
    {"test_changes": "the replay deleted 1 test file the original has"},
    {"interference": "calc.py line 3 exits the process at import"},
    {"interference": "calc.py line 3 exits", "interference_allowed": True},
    {"newly_failing": ("t::a",), "known_flaky": ("t::a",)},
    {"newly_failing": ("t::a", "t::b"), "known_flaky": ("t::a",)},
    {"missing_tests": ("t::b",), "per_test": True},
    {"denied_hosts": ("pypi.org:443",)},
    {"model_recorded": "m", "models_called": ("n",), "require_recorded_model": True},
    {"model_recorded": "m", "models_called": ("n",)},
    {"unstorable_paths": ".GIT/config"},
)


@functools.cache
def judging_sweep() -> tuple[tuple[Facts, Ruling], ...]:
    """Every pair of suites and reference runs under each kind of test evidence."""
    results = []
    for original, replay, reference, extra, recorded, disallowed in itertools.product(
        SUITE_SHAPES,
        SUITE_SHAPES[:2] + SUITE_SHAPES[4:7],
        SUITE_SHAPES,
        JUDGING,
        (None, True, False),
        ((), ("deploy/prod.yml",)),
    ):
        case = facts(
            original=original,
            replay=replay,
            reference=reference,
            original_recorded_passed=recorded,
            disallowed_paths=disallowed,
            **extra,
        )
        results.append((case, decide(case)))
    return tuple(results)


def test_the_sweep_reaches_every_reason_code():
    reached = {decision.reason_code for _, decision in sweep() + judging_sweep()}
    # Rollout reasons come from their own rule (test_rollout.py).
    assert reached >= set(Reason) - ROLLOUT_REASONS - (
        HARNESS_REASONS - {Reason.TIMEOUT, Reason.HOST_FAILED}
    )


def test_a_reason_is_never_empty_and_is_one_sentence():
    for _, decision in sweep() + judging_sweep():
        assert decision.reason.strip()
        assert decision.reason.endswith(".")
        assert decision.reason[0].isupper()
        assert "\n" not in decision.reason


def test_a_verdict_always_matches_its_reason_code():
    for _, decision in sweep() + judging_sweep():
        assert decision.verdict == REASON_VERDICT[decision.reason_code]


def test_inconclusive_codes_come_only_with_an_inconclusive_verdict():
    for _, decision in sweep() + judging_sweep():
        inconclusive_code = decision.reason_code in INCONCLUSIVE_REASONS
        assert inconclusive_code == (decision.verdict == Verdict.INCONCLUSIVE)


def test_two_failing_suites_are_never_equivalent():
    for case, decision in sweep():
        both_ran = case.original is not None and case.replay is not None
        if both_ran and case.original.passed is False and case.replay.passed is False:
            assert decision.verdict != Verdict.EQUIVALENT


def test_equivalence_needs_two_steady_green_suites_above_the_floor():
    for case, decision in sweep():
        if decision.verdict != Verdict.EQUIVALENT:
            continue
        assert not case.trees_identical
        for suite in (case.original, case.replay):
            assert suite.ran and suite.passed and not suite.flaky
            assert suite.tests_executed != 0
            assert suite.tests_executed is not None or case.evidence_floor == 0


def test_nothing_but_inconclusive_on_a_failed_harness_or_untrusted_base():
    for case, decision in sweep():
        untrusted = case.base_source in {"first-parent", "none"} or (
            not case.base_confirmed
        )
        if case.harness_failure is not None or untrusted:
            assert decision.verdict == Verdict.INCONCLUSIVE


def test_a_verdict_never_rests_only_on_supplied_or_inferred_evidence():
    own_evidence = {
        EvidenceClass.INDEPENDENTLY_EXECUTED,
        EvidenceClass.CRYPTOGRAPHICALLY_VERIFIED,
    }
    for _, decision in sweep() + judging_sweep():
        if decision.verdict == Verdict.INCONCLUSIVE:
            continue
        assert any(
            c.evidence_class in own_evidence
            and c.outcome in {Outcome.PASS, Outcome.FAIL}
            for c in decision.checks
        ), decision


def test_a_decided_divergence_or_equivalence_rests_on_executed_or_observed_evidence():
    for case, decision in sweep() + judging_sweep():
        if decision.verdict not in {Verdict.EQUIVALENT, Verdict.DIVERGENT}:
            continue
        if decision.reason_code == Reason.DISALLOWED_PATHS:
            paths = check(decision, "allowed paths")
            assert paths.evidence_class == EvidenceClass.INDEPENDENTLY_OBSERVED
            assert paths.outcome == Outcome.FAIL
            continue
        judged = "tests on reference" if case.reference else "tests on replay"
        for name in ("tests on original", judged):
            suite = check(decision, name)
            assert suite.evidence_class == EvidenceClass.INDEPENDENTLY_EXECUTED
            assert suite.outcome in {Outcome.PASS, Outcome.FAIL}


def test_checks_use_only_known_outcomes_and_evidence_classes():
    outcomes, classes = set(Outcome), set(EvidenceClass)
    for _, decision in sweep() + judging_sweep():
        for c in decision.checks:
            assert c.outcome in outcomes
            assert c.evidence_class in classes
            assert c.detail.endswith(".")


def test_decide_is_deterministic():
    for case, decision in sweep():
        assert decide(case) == decision
