"""The verdict table from DESIGN.md as one pure function.

``decide`` takes plain facts about one replay (what the harness managed, where the
base came from, whether the trees match, what the test gate saw on each tree) and
returns the verdict, a machine-readable reason code, a one-sentence reason and the
checks behind it, each labelled with the class of evidence it rests on.

The rows are evaluated top to bottom and the first match wins. Every row that
cannot be decided on evidence the sandbox produced itself ends in ``inconclusive``:
a refusal, never a judgement of the agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class Verdict(StrEnum):
    IDENTICAL = "identical"
    EQUIVALENT = "equivalent"
    DIVERGENT = "divergent"
    INCONCLUSIVE = "inconclusive"


class Reason(StrEnum):
    # Row 1: the replay could not run or produce a change.
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    FIXTURE_FAILED = "fixture_failed"
    TIMEOUT = "timeout"
    CAP_FIRED = "cap_fired"
    NO_CHANGE = "no_change"
    WORKER_LOST = "worker_lost"
    HARNESS_ERROR = "harness_error"
    # Rows 2-8: refusals.
    BASE_UNTRUSTED = "base_untrusted"
    SAME_TREE = "same_tree"
    NO_TEST_COMMAND = "no_test_command"
    TESTS_SKIPPED = "tests_skipped"
    TESTS_NOT_RUN = "tests_not_run"
    BELOW_EVIDENCE_FLOOR = "below_evidence_floor"
    FLAKY_TESTS = "flaky_tests"
    BASELINE_FAILED = "baseline_failed"
    # Rows 9-12: the test gate decided.
    DISALLOWED_PATHS = "disallowed_paths"
    TESTS_AGREE = "tests_agree"
    REPLAY_FAILS_TESTS = "replay_fails_tests"
    REPLAY_PASSES_TESTS = "replay_passes_tests"
    BOTH_FAIL = "both_fail"


class EvidenceClass(StrEnum):
    INDEPENDENTLY_EXECUTED = "independently_executed"
    CRYPTOGRAPHICALLY_VERIFIED = "cryptographically_verified"
    INDEPENDENTLY_OBSERVED = "independently_observed"
    EXECUTOR_SUPPLIED = "executor_supplied"
    AGENTICALLY_INFERRED = "agentically_inferred"
    HUMAN_ATTESTED = "human_attested"
    UNAVAILABLE = "unavailable"


class Outcome(StrEnum):
    """A check's own outcome; "fail" is not a judgement of the agent."""

    PASS = "pass"  # noqa: S105 -- a check outcome, not a credential
    FAIL = "fail"
    UNKNOWN = "unknown"
    SKIPPED = "skipped"


HARNESS_REASONS: frozenset[Reason] = frozenset(
    {
        Reason.SANDBOX_UNAVAILABLE,
        Reason.FIXTURE_FAILED,
        Reason.TIMEOUT,
        Reason.CAP_FIRED,
        Reason.NO_CHANGE,
        Reason.WORKER_LOST,
        Reason.HARNESS_ERROR,
    }
)

INCONCLUSIVE_REASONS: frozenset[Reason] = HARNESS_REASONS | {
    Reason.BASE_UNTRUSTED,
    Reason.NO_TEST_COMMAND,
    Reason.TESTS_SKIPPED,
    Reason.TESTS_NOT_RUN,
    Reason.BELOW_EVIDENCE_FLOOR,
    Reason.FLAKY_TESTS,
    Reason.BASELINE_FAILED,
}

# The only verdict each reason code can come with; lets callers (admin overrides,
# trend rollups) reject a verdict/code pair the table could never produce.
REASON_VERDICT: Mapping[Reason, Verdict] = MappingProxyType(
    {
        **dict.fromkeys(INCONCLUSIVE_REASONS, Verdict.INCONCLUSIVE),
        Reason.SAME_TREE: Verdict.IDENTICAL,
        Reason.TESTS_AGREE: Verdict.EQUIVALENT,
        Reason.DISALLOWED_PATHS: Verdict.DIVERGENT,
        Reason.REPLAY_FAILS_TESTS: Verdict.DIVERGENT,
        Reason.REPLAY_PASSES_TESTS: Verdict.DIVERGENT,
        Reason.BOTH_FAIL: Verdict.DIVERGENT,
    }
)

# Short labels for badges, filters and the trends dashboard.
REASON_TEXT: Mapping[Reason, str] = MappingProxyType(
    {
        Reason.SANDBOX_UNAVAILABLE: "Sandbox unavailable",
        Reason.FIXTURE_FAILED: "Workspace provisioning failed",
        Reason.TIMEOUT: "Time limit reached",
        Reason.CAP_FIRED: "Replay cap fired",
        Reason.NO_CHANGE: "Agent produced no change",
        Reason.WORKER_LOST: "Worker lost",
        Reason.HARNESS_ERROR: "Harness error",
        Reason.BASE_UNTRUSTED: "Base commit not trusted",
        Reason.SAME_TREE: "Identical trees",
        Reason.NO_TEST_COMMAND: "No test command",
        Reason.TESTS_SKIPPED: "Tests skipped",
        Reason.TESTS_NOT_RUN: "Tests could not run",
        Reason.BELOW_EVIDENCE_FLOOR: "Too few tests executed",
        Reason.FLAKY_TESTS: "Flaky tests",
        Reason.BASELINE_FAILED: "Original fails in sandbox",
        Reason.DISALLOWED_PATHS: "Touched disallowed paths",
        Reason.TESTS_AGREE: "Both trees pass",
        Reason.REPLAY_FAILS_TESTS: "Replay fails tests",
        Reason.REPLAY_PASSES_TESTS: "Replay passes, original failed",
        Reason.BOTH_FAIL: "Both trees fail",
    }
)

BASE_SOURCES: frozenset[str] = frozenset(
    {"recorded", "fork-point", "first-parent", "none"}
)
# A first-parent base is right only for one-commit write-backs, and nothing in the
# record says which kind this was, so it never counts as trusted.
TRUSTED_BASE_SOURCES: frozenset[str] = frozenset({"recorded", "fork-point"})

# How many disallowed paths a reason sentence names before summarising the rest.
_PATHS_NAMED = 5
_DETAIL_LIMIT = 200


@dataclass(frozen=True)
class SuiteResult:
    """One tree's test-gate result after any reruns.

    ``ran`` means the command started and produced a pass/fail result, so
    ``passed`` is a bool exactly when ``ran`` is true. ``tests_executed`` is None
    when neither the runner's summary nor a JUnit report gave a count.
    """

    ran: bool
    passed: bool | None
    tests_executed: int | None
    flaky: bool = False
    exit_code: int | None = None

    def __post_init__(self) -> None:
        if self.ran and self.passed is None:
            raise ValueError("a suite that ran must have passed or failed")
        if not self.ran and self.passed is not None:
            raise ValueError("a suite that did not run has no pass/fail result")
        if self.tests_executed is not None and self.tests_executed < 0:
            raise ValueError("tests_executed cannot be negative")


@dataclass(frozen=True)
class Facts:
    """Everything ``decide`` looks at, as observed for one replay.

    ``harness_failure`` takes only row-1 codes (see ``HARNESS_REASONS``).
    ``base_confirmed`` is true when the original strictly descends from the base;
    a ``first-parent`` or ``none`` source is untrusted whatever it says.
    ``original_recorded_passed`` is the record's own claim about the original,
    None when the record has none. ``evidence_floor`` 0 means the project accepts
    a suite whose test count could not be read (see ``decide``).
    """

    harness_failure: Reason | None = None
    harness_detail: str = ""
    base_source: str = "recorded"
    base_confirmed: bool = True
    trees_identical: bool = False
    has_test_command: bool = True
    tests_skipped: bool = False
    original: SuiteResult | None = None
    replay: SuiteResult | None = None
    evidence_floor: int = 1
    original_recorded_passed: bool | None = None
    disallowed_paths: tuple[str, ...] = ()
    cap_detail: str = ""

    def __post_init__(self) -> None:
        if self.harness_failure is not None and (
            self.harness_failure not in HARNESS_REASONS
        ):
            raise ValueError(f"{self.harness_failure!r} is not a harness failure code")
        if self.base_source not in BASE_SOURCES:
            raise ValueError(f"unknown base source {self.base_source!r}")
        if self.evidence_floor < 0:
            raise ValueError("evidence_floor cannot be negative")
        if isinstance(self.disallowed_paths, str):
            # A bare string would otherwise be read as one path per character.
            raise TypeError("disallowed_paths must be a sequence of paths")
        object.__setattr__(self, "disallowed_paths", tuple(self.disallowed_paths))


@dataclass(frozen=True)
class Check:
    """One piece of evidence shown on the replay page.

    ``outcome`` is the check's own result ("pass", "fail", "unknown" or
    "skipped"): for "tree identity" a pass means the trees are identical, for
    "allowed paths" that nothing outside the globs was touched.
    """

    name: str
    outcome: str
    evidence_class: EvidenceClass
    detail: str


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason_code: Reason
    reason: str
    checks: tuple[Check, ...]


def decide(facts: Facts) -> Decision:
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
    return Decision(
        verdict=verdict, reason_code=code, reason=reason, checks=_checks(facts)
    )


def _row(facts: Facts) -> tuple[Verdict, Reason, str]:
    inconclusive = Verdict.INCONCLUSIVE
    if facts.harness_failure is not None:
        return inconclusive, facts.harness_failure, _harness_reason(facts)
    if not _base_trusted(facts):
        return inconclusive, Reason.BASE_UNTRUSTED, _base_reason(facts)
    if facts.trees_identical:
        return (
            Verdict.IDENTICAL,
            Reason.SAME_TREE,
            "The replay's result tree has the same tree hash as the original's.",
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
    original, replay = facts.original, facts.replay
    if original is None or replay is None or not original.ran or not replay.ran:
        return inconclusive, Reason.TESTS_NOT_RUN, _not_run_reason(original, replay)
    short = _floor_shortfalls(facts.evidence_floor, original, replay)
    if short:
        return (
            inconclusive,
            Reason.BELOW_EVIDENCE_FLOOR,
            f"Not enough test evidence (evidence floor: "
            f"{_tests(facts.evidence_floor)}): {' and '.join(short)}.",
        )
    if original.flaky or replay.flaky:
        where = _which_trees(original.flaky, replay.flaky)
        return (
            inconclusive,
            Reason.FLAKY_TESTS,
            f"The test outcome flipped across reruns on {where}.",
        )
    if not original.passed and facts.original_recorded_passed is not False:
        return inconclusive, Reason.BASELINE_FAILED, _baseline_reason(facts)
    counts = f"(original: {_count(original)}, replay: {_count(replay)})"
    if facts.disallowed_paths:
        return (
            Verdict.DIVERGENT,
            Reason.DISALLOWED_PATHS,
            _paths_reason(facts.disallowed_paths),
        )
    if original.passed and replay.passed:
        return (
            Verdict.EQUIVALENT,
            Reason.TESTS_AGREE,
            f"The trees differ but both pass the test suite {counts}.",
        )
    if original.passed:
        return (
            Verdict.DIVERGENT,
            Reason.REPLAY_FAILS_TESTS,
            f"The replay tree fails the test suite the original tree passes {counts}.",
        )
    # From here the original fails in the sandbox as its record says it did.
    if replay.passed:
        return (
            Verdict.DIVERGENT,
            Reason.REPLAY_PASSES_TESTS,
            f"The replay tree passes the test suite the original tree fails, as "
            f"recorded {counts}.",
        )
    return (
        Verdict.DIVERGENT,
        Reason.BOTH_FAIL,
        f"Both trees fail the test suite, the original as recorded {counts}.",
    )


def _base_trusted(facts: Facts) -> bool:
    return facts.base_source in TRUSTED_BASE_SOURCES and facts.base_confirmed


_HARNESS_SENTENCE: Mapping[Reason, str] = MappingProxyType(
    {
        Reason.SANDBOX_UNAVAILABLE: "No isolating sandbox runner was available, "
        "so the replay was refused",
        Reason.FIXTURE_FAILED: "The sandbox workspace could not be provisioned "
        "at the base commit",
        Reason.TIMEOUT: "The replay hit its time limit before producing a change",
        Reason.CAP_FIRED: "A per-replay cap fired before the replay produced a change",
        Reason.NO_CHANGE: "The agent finished without producing a change",
        Reason.WORKER_LOST: "The worker running the replay was lost before it finished",
        Reason.HARNESS_ERROR: "The replay harness failed before producing a change",
    }
)


def _harness_reason(facts: Facts) -> str:
    assert facts.harness_failure is not None
    sentence = _HARNESS_SENTENCE[facts.harness_failure]
    cap = _clean(facts.cap_detail)
    if cap and facts.harness_failure in {Reason.TIMEOUT, Reason.CAP_FIRED}:
        sentence += f" ({cap})"
    # The sentence supplies its own full stop.
    detail = _clean(facts.harness_detail).rstrip(".")
    if detail:
        sentence += f": {detail}"
    return sentence + "."


def _base_reason(facts: Facts) -> str:
    if facts.base_source == "first-parent":
        why = (
            "The base commit is only a first-parent guess (the original's parent), "
            "which is never trusted"
        )
    elif facts.base_source == "none":
        why = "No base commit could be resolved for the original"
    else:
        why = (
            f"The original commit does not descend from the {facts.base_source} "
            f"base commit"
        )
    if facts.trees_identical:
        why += ", so even identical trees prove nothing"
    return why + "."


def _not_run_reason(original: SuiteResult | None, replay: SuiteResult | None) -> str:
    original_missing = original is None or not original.ran
    replay_missing = replay is None or not replay.ran
    where = (
        "either tree"
        if original_missing and replay_missing
        else _which_trees(original_missing, replay_missing)
    )
    exits = [
        f"{tree} exit code {suite.exit_code}"
        for tree, suite, missing in (
            ("original", original, original_missing),
            ("replay", replay, replay_missing),
        )
        if missing and suite is not None and suite.exit_code is not None
    ]
    suffix = f" ({', '.join(exits)})" if exits else ""
    return f"The test suite could not execute on {where}{suffix}."


def _floor_shortfalls(
    floor: int, original: SuiteResult, replay: SuiteResult
) -> list[str]:
    shortfalls = []
    for tree, suite in (("original", original), ("replay", replay)):
        count = suite.tests_executed
        if count is None:
            if floor > 0:
                shortfalls.append(f"the {tree} tree's suite reported no test count")
        elif count == 0:
            shortfalls.append(f"the {tree} tree's suite executed no tests")
        elif count < floor:
            shortfalls.append(f"the {tree} tree's suite executed {_tests(count)}")
    return shortfalls


def _baseline_reason(facts: Facts) -> str:
    if facts.original_recorded_passed:
        return (
            "The original tree fails its tests in the sandbox although its "
            "recorded result passed, so the sandbox does not reproduce the baseline."
        )
    return (
        "The original tree fails its tests in the sandbox and the record has no "
        "result for it, so the sandbox cannot be shown to reproduce the baseline."
    )


def _paths_reason(paths: tuple[str, ...]) -> str:
    named = ", ".join(_clean(path) for path in paths[:_PATHS_NAMED])
    rest = len(paths) - _PATHS_NAMED
    if rest > 0:
        named += f" and {rest} more"
    noun = "path" if len(paths) == 1 else "paths"
    return f"The replay touched {len(paths)} {noun} outside the allowed globs: {named}."


def _checks(facts: Facts) -> tuple[Check, ...]:
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
            else _harness_reason(facts),
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
                _paths_reason(facts.disallowed_paths)
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
    return tuple(checks)


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
    if _base_trusted(facts):
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
        _base_reason(facts),
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


def _suite_check(facts: Facts, tree: str, suite: SuiteResult | None) -> Check:
    name = f"tests on {tree}"
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
            f"{_exit(suite, ' (exit code {})')}.",
        )
    if suite.flaky:
        return Check(
            name,
            Outcome.UNKNOWN,
            EvidenceClass.INDEPENDENTLY_EXECUTED,
            f"The outcome flipped across reruns ({_count(suite)}).",
        )
    return Check(
        name,
        Outcome.PASS if suite.passed else Outcome.FAIL,
        EvidenceClass.INDEPENDENTLY_EXECUTED,
        f"{'Passed' if suite.passed else 'Failed'} in the sandbox ({_count(suite)}"
        f"{_exit(suite, ', exit code {}')}).",
    )


def _count(suite: SuiteResult) -> str:
    if suite.tests_executed is None:
        return "test count unknown"
    return _tests(suite.tests_executed)


def _why_no_suite(facts: Facts) -> tuple[Outcome, str]:
    if facts.harness_failure is not None:
        return Outcome.UNKNOWN, "Not run: the replay produced no result tree."
    if not _base_trusted(facts):
        return Outcome.SKIPPED, "Not run: the base commit is not trusted."
    if facts.trees_identical:
        return Outcome.SKIPPED, "Not needed: the trees are identical."
    if not facts.has_test_command:
        return Outcome.SKIPPED, "Not run: the project has no test command."
    if facts.tests_skipped:
        return Outcome.SKIPPED, "Not run: skipped by request."
    return Outcome.UNKNOWN, "The test gate gave no result for this tree."


def _exit(suite: SuiteResult, template: str) -> str:
    return "" if suite.exit_code is None else template.format(suite.exit_code)


def _tests(count: int) -> str:
    return f"{count} test" if count == 1 else f"{count} tests"


def _which_trees(original: bool, replay: bool) -> str:
    if original and replay:
        return "both trees"
    return "the original tree" if original else "the replay tree"


def _clean(text: str) -> str:
    """Fold untrusted text (paths, harness messages) into part of one sentence."""
    text = "".join(ch if ch.isprintable() else " " for ch in text[: _DETAIL_LIMIT * 2])
    text = " ".join(text.split())
    if len(text) > _DETAIL_LIMIT:
        text = text[: _DETAIL_LIMIT - 1] + "…"
    return text
