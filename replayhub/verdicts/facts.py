"""What a verdict is decided from and what it says: plain data, no Django."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class Verdict(StrEnum):
    """The one verdict type: the models' choices are built from it."""

    IDENTICAL = "identical"
    EQUIVALENT = "equivalent"
    DIVERGENT = "divergent"
    INCONCLUSIVE = "inconclusive"

    @property
    def label(self) -> str:
        return self.value.capitalize()


class Reason(StrEnum):
    # Row 1: the replay could not run or produce a change.
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    FIXTURE_FAILED = "fixture_failed"
    TIMEOUT = "timeout"
    CAP_FIRED = "cap_fired"
    NO_CHANGE = "no_change"
    # The agent command failed before its first model call (a usage error, a
    # CLI that is not there): the project's command, not the model, is at fault.
    AGENT_FAILED = "agent_failed"
    WORKER_LOST = "worker_lost"
    HARNESS_ERROR = "harness_error"
    PROVIDER_ERROR = "provider_error"
    TAPE_DIVERGED = "tape_diverged"
    SETUP_FAILED = "setup_failed"
    IMAGE_MISMATCH = "image_mismatch"
    REPO_UNREACHABLE = "repo_unreachable"
    # The worker's host, not the run, could not provision the replay (its disk
    # full, its mirror unreadable); the reason names the host.
    HOST_FAILED = "host_failed"
    # Rows 2-8: refusals.
    BASE_UNTRUSTED = "base_untrusted"
    SAME_TREE = "same_tree"
    NO_TEST_COMMAND = "no_test_command"
    TESTS_SKIPPED = "tests_skipped"
    TESTS_NOT_RUN = "tests_not_run"
    BELOW_EVIDENCE_FLOOR = "below_evidence_floor"
    FLAKY_TESTS = "flaky_tests"
    BASELINE_FAILED = "baseline_failed"
    TESTS_MISSING = "tests_missing"
    TEST_INTERFERENCE = "test_interference"
    MODEL_MISMATCH = "model_mismatch"
    NETWORK_REQUIRED = "network_required"
    UNSTORABLE_PATHS = "unstorable_paths"
    # Decided on observed or executed evidence.
    DISALLOWED_PATHS = "disallowed_paths"
    TESTS_AGREE = "tests_agree"
    REPLAY_FAILS_TESTS = "replay_fails_tests"
    REPLAY_FAILS_REFERENCE_TESTS = "replay_fails_reference_tests"
    REPLAY_PASSES_TESTS = "replay_passes_tests"
    BOTH_FAIL = "both_fail"
    # Rollout replays, judged by the environment's verifier (its reward).
    SAME_COMPLETION = "same_completion"
    REWARDS_PASS = "rewards_pass"  # noqa: S105 -- a reason code, not a credential
    REPLAY_REWARD_FAILS = "replay_reward_fails"
    REPLAY_REWARD_PASSES = "replay_reward_passes"
    BOTH_REWARDS_FAIL = "both_rewards_fail"
    VERIFIER_DISAGREES = "verifier_disagrees"
    HARNESS_FAILED = "harness_failed"
    RESULT_MISSING = "result_missing"
    RESULT_MALFORMED = "result_malformed"
    ORIGINAL_REWARD_MISSING = "original_reward_missing"
    VERIFIER_FAILED = "verifier_failed"
    REWARD_UNVERIFIED = "reward_unverified"


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
        Reason.AGENT_FAILED,
        Reason.WORKER_LOST,
        Reason.HARNESS_ERROR,
        Reason.PROVIDER_ERROR,
        Reason.TAPE_DIVERGED,
        Reason.SETUP_FAILED,
        Reason.IMAGE_MISMATCH,
        Reason.REPO_UNREACHABLE,
        Reason.HOST_FAILED,
    }
)

# The reasons only a rollout replay reaches (``verdicts.rollout``).
ROLLOUT_REASONS: frozenset[Reason] = frozenset(
    {
        Reason.SAME_COMPLETION,
        Reason.REWARDS_PASS,
        Reason.REPLAY_REWARD_FAILS,
        Reason.REPLAY_REWARD_PASSES,
        Reason.BOTH_REWARDS_FAIL,
        Reason.VERIFIER_DISAGREES,
        Reason.HARNESS_FAILED,
        Reason.RESULT_MISSING,
        Reason.RESULT_MALFORMED,
        Reason.ORIGINAL_REWARD_MISSING,
        Reason.VERIFIER_FAILED,
        Reason.REWARD_UNVERIFIED,
    }
)

INCONCLUSIVE_REASONS: frozenset[Reason] = HARNESS_REASONS | {
    Reason.VERIFIER_DISAGREES,
    Reason.HARNESS_FAILED,
    Reason.RESULT_MISSING,
    Reason.RESULT_MALFORMED,
    Reason.ORIGINAL_REWARD_MISSING,
    Reason.VERIFIER_FAILED,
    Reason.REWARD_UNVERIFIED,
    Reason.BASE_UNTRUSTED,
    Reason.NO_TEST_COMMAND,
    Reason.TESTS_SKIPPED,
    Reason.TESTS_NOT_RUN,
    Reason.BELOW_EVIDENCE_FLOOR,
    Reason.FLAKY_TESTS,
    Reason.BASELINE_FAILED,
    Reason.TESTS_MISSING,
    Reason.TEST_INTERFERENCE,
    Reason.MODEL_MISMATCH,
    Reason.NETWORK_REQUIRED,
    Reason.UNSTORABLE_PATHS,
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
        Reason.REPLAY_FAILS_REFERENCE_TESTS: Verdict.DIVERGENT,
        Reason.REPLAY_PASSES_TESTS: Verdict.DIVERGENT,
        Reason.BOTH_FAIL: Verdict.DIVERGENT,
        Reason.SAME_COMPLETION: Verdict.IDENTICAL,
        Reason.REWARDS_PASS: Verdict.EQUIVALENT,
        Reason.REPLAY_REWARD_FAILS: Verdict.DIVERGENT,
        Reason.REPLAY_REWARD_PASSES: Verdict.DIVERGENT,
        Reason.BOTH_REWARDS_FAIL: Verdict.DIVERGENT,
    }
)

# Short labels for badges, filters and the trends dashboard. Keyed by str: the
# pages look codes up as the database holds them (a Reason is one).
REASON_TEXT: Mapping[str, str] = MappingProxyType(
    {
        Reason.SANDBOX_UNAVAILABLE: "Sandbox unavailable",
        Reason.FIXTURE_FAILED: "Workspace provisioning failed",
        Reason.TIMEOUT: "Time limit reached",
        Reason.CAP_FIRED: "Replay cap fired",
        Reason.NO_CHANGE: "Agent produced no change",
        Reason.AGENT_FAILED: "Agent command failed",
        Reason.WORKER_LOST: "Worker lost",
        Reason.HARNESS_ERROR: "Harness error",
        Reason.PROVIDER_ERROR: "Model provider failed",
        Reason.TAPE_DIVERGED: "Agent left the recorded tape",
        Reason.SETUP_FAILED: "Project setup failed",
        Reason.IMAGE_MISMATCH: "Recorded image differs from the root",
        Reason.REPO_UNREACHABLE: "Project repository unreachable",
        Reason.HOST_FAILED: "Worker host failed",
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
        Reason.REPLAY_FAILS_REFERENCE_TESTS: "Replay fails the original's tests",
        Reason.TESTS_MISSING: "Tests missing from the run",
        Reason.TEST_INTERFERENCE: "Change can subvert the test run",
        Reason.MODEL_MISMATCH: "Agent called another model",
        Reason.NETWORK_REQUIRED: "Tests needed a denied host",
        Reason.UNSTORABLE_PATHS: "Left paths git cannot store",
        Reason.REPLAY_PASSES_TESTS: "Replay passes, original failed",
        Reason.BOTH_FAIL: "Both trees fail",
        Reason.SAME_COMPLETION: "Same completion",
        Reason.REWARDS_PASS: "Both rewards pass",
        Reason.REPLAY_REWARD_FAILS: "Replay reward below threshold",
        Reason.REPLAY_REWARD_PASSES: "Replay passes, original reward failed",
        Reason.BOTH_REWARDS_FAIL: "Both rewards below threshold",
        Reason.VERIFIER_DISAGREES: "Verifier judged the same completion differently",
        Reason.HARNESS_FAILED: "Rollout harness failed",
        Reason.RESULT_MISSING: "No rollout result",
        Reason.RESULT_MALFORMED: "Malformed rollout result",
        Reason.ORIGINAL_REWARD_MISSING: "Original reward unknown",
        Reason.VERIFIER_FAILED: "Rollout verifier failed",
        Reason.REWARD_UNVERIFIED: "Passing reward from the harness's own sandbox",
    }
)

BASE_SOURCES: frozenset[str] = frozenset(
    {"recorded", "fork-point", "first-parent", "inferred", "none"}
)
# A first-parent base is right only for one-commit write-backs, and nothing in the
# record says which kind this was, so it never counts as trusted.
TRUSTED_BASE_SOURCES: frozenset[str] = frozenset({"recorded", "fork-point"})


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
    # What the sandbox lacked ("the Python module pytest") when the suite
    # could not start, or when every test it ran failed for it; "" otherwise.
    missing: str = ""

    def __post_init__(self) -> None:
        if self.ran and self.passed is None:
            raise ValueError("a suite that ran must have passed or failed")
        if not self.ran and self.passed is not None:
            raise ValueError("a suite that did not run has no pass/fail result")
        if self.tests_executed is not None and self.tests_executed < 0:
            raise ValueError("tests_executed cannot be negative")


_SEQUENCES = (
    "disallowed_paths",
    "newly_failing",
    "missing_tests",
    "known_flaky",
    "models_called",
    "denied_hosts",
)


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
    # The original's test files run on the replay's code: the suite that judges
    # the replay when the two trees differ in a test path. None when no test
    # path differs, and the replay's own suite is then that same run.
    reference: SuiteResult | None = None
    # One line on the test files the replay added, changed or deleted relative
    # to the original ("" when none differ).
    test_changes: str = ""
    # Code in the replay's change that can report a test run's success itself,
    # one sentence naming files and lines ("" when none was found).
    interference: str = ""
    interference_allowed: bool = False
    # Test ids, compared between the original's run and the judging run.
    newly_failing: tuple[str, ...] = ()
    missing_tests: tuple[str, ...] = ()
    # Those of ``newly_failing`` seen both passing and failing on one tree before.
    known_flaky: tuple[str, ...] = ()
    # Whether both runs reported test ids, so the runs were compared test by test.
    per_test: bool = False
    # The model the record names, and those the agent called through the gateway
    # (empty when the replay had no model access).
    model_recorded: str = ""
    models_called: tuple[str, ...] = ()
    # Calls the agent tried through the gateway, answered or not.
    model_calls_attempted: int = 0
    require_recorded_model: bool = False
    # host:port the test runs tried to reach and the egress proxy refused.
    denied_hosts: tuple[str, ...] = ()
    # One line naming what the agent left that git could not store ("" when
    # it stored everything): the stored tree is not what the agent left.
    unstorable_paths: str = ""

    def __post_init__(self) -> None:
        if self.harness_failure is not None and (
            self.harness_failure not in HARNESS_REASONS
        ):
            raise ValueError(f"{self.harness_failure!r} is not a harness failure code")
        if self.base_source not in BASE_SOURCES:
            raise ValueError(f"unknown base source {self.base_source!r}")
        if self.evidence_floor < 0:
            raise ValueError("evidence_floor cannot be negative")
        for name in (
            "disallowed_paths",
            "newly_failing",
            "missing_tests",
            "known_flaky",
        ):
            value = getattr(self, name)
            if isinstance(value, str):
                # A bare string would otherwise be read as one item per character.
                raise TypeError(f"{name} must be a sequence, not a string")
            object.__setattr__(self, name, tuple(value))

    @property
    def other_models(self) -> tuple[str, ...]:
        """Models the agent called that are not the one the record names."""
        if not self.model_recorded:
            return ()
        return tuple(m for m in self.models_called if m != self.model_recorded)

    @property
    def judged(self) -> SuiteResult | None:
        """The suite that judges the replay's code: the reference run if any."""
        return self.reference if self.reference is not None else self.replay


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
class Ruling:
    verdict: Verdict
    reason_code: Reason
    reason: str
    checks: tuple[Check, ...]
