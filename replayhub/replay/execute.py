"""One replay end to end: provenance, sandboxed agent, capture, compare, tests, verdict.

``execute`` does the work and returns a ``Report`` of plain data; it touches the
database only through the ``on_phase`` callback. Storing the report is
``services.replay_finish``'s job.
"""

from __future__ import annotations

import json
import logging
import math
import shlex
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from django.conf import settings

from replayhub.environments import build, images
from replayhub.gateway import access
from replayhub.gateway.egress import ConnectAttempt
from replayhub.gateway.server import MeteredCall
from replayhub.git.scratch import GitError, Scratch, TreeComparison, compare
from replayhub.models import Phase, Project, Run
from replayhub.nights.arithmetic import Amounts
from replayhub.replay import leftovers
from replayhub.replay.provenance import Provenance, resolve_provenance
from replayhub.sandbox import (
    Bind,
    Limits,
    Runner,
    SandboxOutcome,
    SandboxSpec,
    SandboxUnavailable,
)
from replayhub.testgate import memory
from replayhub.testgate.gate import (
    CheckoutFailed,
    GateResult,
    compare_first_attempts,
    read_small_file,
    run_gate,
)
from replayhub.testgate.paths import interference_summary
from replayhub.testgate.reference import TestPlan, plan_tests
from replayhub.verdicts import Facts, Reason, Ruling, decide

log = logging.getLogger(__name__)

IO_DIR = "/replayhub"
USAGE_MAX_BYTES = 64 * 1024
AGENT_OUTPUT_CHARS = 256 * 1024
# Usage numbers beyond these are not believed: no replay spends that much, and
# the replay's columns and the night's sums must hold what is kept.
USAGE_MAX_COUNT = 10**12
USAGE_MAX_COST_USD = Decimal(100_000)


@dataclass
class AgentResult:
    exit_code: int | None = None
    output: str = ""
    output_truncated: bool = False
    timed_out: bool = False
    limit_fired: str = ""
    duration_s: float = 0.0
    # How memory and processes were capped ("cgroup-v2", "rlimit", …), and what
    # the limit that fired measured.
    limit_backend: str = ""
    limit_detail: str = ""

    @classmethod
    def of(cls, outcome: SandboxOutcome) -> AgentResult:
        """The agent phase's outcome, its output cut to its last characters."""
        return cls(
            exit_code=outcome.exit_code,
            output=outcome.output[-AGENT_OUTPUT_CHARS:],
            output_truncated=outcome.output_truncated
            or len(outcome.output) > AGENT_OUTPUT_CHARS,
            timed_out=outcome.timed_out,
            limit_fired=outcome.limit_fired,
            duration_s=outcome.duration_s,
            limit_backend=outcome.limit_backend,
            limit_detail=outcome.limit_detail,
        )


@dataclass
class Report:
    """Everything one replay found, ready to be stored."""

    decision: Ruling
    provenance: dict = field(default_factory=dict)
    comparison: TreeComparison | None = None
    gate: GateResult | None = None
    agent: AgentResult = field(default_factory=AgentResult)
    usage: dict = field(default_factory=dict)
    sandbox_seconds: float = 0.0
    # Every call through the model gateway and every egress attempt.
    model_calls: list[MeteredCall] = field(default_factory=list)
    egress: list[ConnectAttempt] = field(default_factory=list)
    # The agent's own usage file when the gateway measured the real usage.
    usage_reported: dict = field(default_factory=dict)
    # Usage numbers out of range, as text: never spent (see ``bounded_usage``).
    usage_refused: dict = field(default_factory=dict)
    # Files (and links and submodules) in the captured tree.
    tree_files: int | None = None
    # Paths the agent left that git could not store (the first ``LISTED``,
    # and how many), and directories holding a repository of their own.
    unstorable_paths: list[str] = field(default_factory=list)
    unstorable_count: int = 0
    nested_repositories: list[str] = field(default_factory=list)
    # The test files' side of the comparison, when the test gate ran.
    plan: TestPlan | None = None
    trees: dict[str, str] = field(default_factory=dict)
    cache_key: str = ""
    # The project's environment: its key, whether it came from the cache, the
    # setup's duration (and a failed setup's output).
    environment: dict = field(default_factory=dict)

    def actual(self) -> Amounts:
        """What this replay spent, for the night's budget."""
        usage = self.usage
        ran = self.agent.duration_s > 0
        return Amounts(
            replays=1 if ran else 0,
            sandbox_seconds=math.ceil(self.sandbox_seconds),
            tokens=int(usage.get("input_tokens", 0))
            + int(usage.get("output_tokens", 0)),
            cost_usd=Decimal(usage.get("cost_usd", "0")),
        )

    def summary(self) -> dict:
        """The JSON shape printed by ``reproduce --json`` (without full diffs)."""
        comparison = None
        if self.comparison is not None:
            comparison = {
                k: v
                for k, v in self.comparison.to_dict().items()
                if k not in {"diff_of_diffs", "original_patch", "replay_patch"}
            }
        suites = {}
        for tree in ("original", "replay", "reference"):
            suite = self.gate.suite(tree) if self.gate else None
            suites[tree] = asdict(suite) if suite else None
        return {
            "verdict": str(self.decision.verdict),
            "reason_code": str(self.decision.reason_code),
            "reason": self.decision.reason,
            "provenance": self.provenance,
            "comparison": comparison,
            "original_test": suites["original"],
            "replay_test": suites["replay"],
            "reference_test": suites["reference"],
            "test_changes": self.plan.changes.to_dict() if self.plan else None,
            "evidence": [check_dict(c) for c in self.decision.checks],
            "agent": self.agent_summary(),
            "usage": self.usage,
            "usage_reported": self.usage_reported,
            "usage_refused": self.usage_refused,
            "tree_files": self.tree_files,
            "unstorable_paths": self.unstorable_paths,
            "nested_repositories": self.nested_repositories,
            "model_calls": [
                {
                    **_plain(asdict(call)),
                    "model": call.model_answered or call.model_requested,
                }
                for call in self.model_calls
            ],
            "egress": [_plain(asdict(attempt)) for attempt in self.egress],
            "environment": self.environment or None,
        }

    def extra_evidence(self) -> dict:
        """What a kind of replay adds to the stored evidence (see ``rollouts``)."""
        return {}

    def agent_summary(self) -> dict:
        """What the agent phase did, without its output."""
        return {k: v for k, v in asdict(self.agent).items() if k != "output"}


def _plain(data: dict) -> dict:
    """JSON-ready values: decimals and times as text."""
    return {
        k: str(v) if isinstance(v, Decimal) or hasattr(v, "isoformat") else v
        for k, v in data.items()
    }


def check_dict(check) -> dict:
    return {
        "name": check.name,
        "outcome": str(check.outcome),
        "evidence_class": str(check.evidence_class),
        "detail": check.detail,
    }


def agent_limits(project: Project, caps: dict) -> Limits:
    return Limits(
        wall_seconds=caps.get("wall_seconds") or project.time_limit_seconds,
        memory_bytes=project.memory_limit_mb * 1024 * 1024,
        max_processes=project.max_processes,
        output_bytes=project.max_output_bytes,
        disk_bytes=leftovers.disk_bytes(project),
        disk_files=project.max_files,
    )


def test_limits(project: Project) -> Limits:
    return Limits(
        wall_seconds=project.test_time_limit,
        memory_bytes=project.memory_limit_mb * 1024 * 1024,
        max_processes=project.max_processes,
        output_bytes=project.max_output_bytes,
        # The code under test is the agent's too.
        disk_bytes=leftovers.disk_bytes(project),
        disk_files=project.max_files,
    )


def runner_for(project: Project) -> Runner:
    """The project's runner, on its root image where one is unpacked here."""
    return images.runner_for(project)


def agent_argv(project: Project, caps: dict) -> list[str]:
    """The agent command with the per-replay caps filled into its placeholders."""
    max_tokens = caps.get("max_tokens") or project.max_tokens
    values = {
        "{max_turns}": str(project.max_turns or ""),
        "{max_tokens}": str(max_tokens or ""),
    }
    argv = []
    for arg in project.agent_command:
        for placeholder, value in values.items():
            arg = arg.replace(placeholder, value)
        argv.append(arg)
    return argv


def models_called(calls: list[MeteredCall]) -> tuple[str, ...]:
    """The models that answered the agent (refused calls reached none)."""
    return tuple(
        str(c.model_answered or c.model_requested)
        for c in calls
        if str(c.status).startswith("2") and (c.model_answered or c.model_requested)
    )


def measured_usage(calls: list[MeteredCall]) -> dict:
    """The usage the gateway measured, in the shape of the agent's usage file."""
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    used = [c for c in calls if c.input_tokens or c.output_tokens]
    usage: dict = {
        "input_tokens": sum(c.input_tokens or 0 for c in calls),
        "output_tokens": sum(c.output_tokens or 0 for c in calls),
        "cached_tokens": sum(c.cached_tokens or 0 for c in calls),
        "requests": sum(1 for c in calls if c.status != "refused"),
        "measured_by": "gateway",
    }
    if costs:
        usage["cost_usd"] = str(sum(costs, Decimal(0)))
    if len(costs) < len(used):
        usage["cost_unknown_for_some_calls"] = True
    return usage


def read_usage(path: Path) -> dict:
    """The agent's self-reported usage, validated; anything malformed is dropped."""
    data = read_small_file(path, USAGE_MAX_BYTES)
    if not data:
        return {}
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(raw, dict):
        return {}
    usage: dict = {}
    for key in ("input_tokens", "output_tokens", "turns"):
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            usage[key] = value
    cost = raw.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        try:
            amount = Decimal(str(cost))
        except InvalidOperation:
            amount = None
        if amount is not None and amount.is_finite() and amount >= 0:
            usage["cost_usd"] = str(amount)
    return usage


def bounded_usage(usage: dict) -> tuple[dict, dict]:
    """``usage`` less the numbers out of range, and those numbers as text.

    A count (tokens, turns, requests) above ``USAGE_MAX_COUNT`` or a cost above
    ``USAGE_MAX_COST_USD`` is refused: kept as evidence, never spent, since
    2**63 tokens or a cost of 1e15 would overflow the columns that hold them.
    """
    kept: dict = {}
    refused: dict = {}
    for key, value in usage.items():
        if key == "cost_usd":
            try:
                amount = Decimal(str(value))
            except InvalidOperation:
                amount = Decimal("NaN")
            believed = amount.is_finite() and 0 <= amount <= USAGE_MAX_COST_USD
        elif isinstance(value, int) and not isinstance(value, bool):
            believed = 0 <= value <= USAGE_MAX_COUNT
        else:
            believed = True
        if believed:
            kept[key] = value
        else:
            refused[key] = str(value)
    return kept, refused


def _decided(report: Report, decision: Ruling) -> Report:
    report.decision = decision
    return report


_inconclusive = leftovers.inconclusive


@dataclass(frozen=True)
class Context:
    """What one replay's execution works with, fixed before the sandbox starts."""

    project: Project
    run: Run
    runner: Runner
    provenance: Provenance
    scratch: Scratch
    base_facts: dict
    caps: dict = field(default_factory=dict)
    on_phase: Callable[[str], object] = lambda phase: None

    @property
    def base(self) -> str:
        sha = self.provenance.base.sha
        assert sha is not None  # a context is made only once the base is known
        return sha

    @property
    def image(self) -> str:
        return self.provenance.image or ""

    @property
    def original_commit(self) -> str:
        sha = self.provenance.original_commit
        assert sha is not None  # a reproducible provenance names the original
        return sha


def execute(
    *,
    project: Project,
    run: Run,
    replay_id: int,
    caps: dict | None = None,
    on_phase: Callable[[str], object] = lambda phase: None,
) -> Report:
    """Run one replay in a fresh workspace, which is removed whatever happens."""
    prov = resolve_provenance(
        repo_path=project.repo_path,
        original_commit=run.original_commit or None,
        recorded_base=run.base_sha or None,
        default_branch=project.default_branch or None,
        image=run.sandbox_image or project.sandbox_image or None,
        recorded_config_sha256=run.sandbox_config_sha256 or None,
        project_config_sha256=project.sandbox_config_sha256 or None,
        test_command=shlex.join(project.test_command) or None,
    )
    report = Report(decision=None, provenance=prov.to_dict())  # type: ignore[arg-type]
    base_facts: dict[str, Any] = {
        "base_source": prov.base.source,
        "base_confirmed": prov.base.confirmed,
        "original_recorded_passed": run.original_tests_passed,
        "evidence_floor": project.evidence_floor,
    }
    if not prov.reproducible:
        report.decision = _inconclusive(
            Reason.FIXTURE_FAILED, prov.not_reproducible_reason, **base_facts
        )
        return report

    if prov.base.sha is None:
        return _decided(report, decide(Facts(**base_facts)))
    report.provenance.setdefault("warnings", []).extend(
        images.warnings_for(project, run.sandbox_image or None)
    )
    mismatch = images.mismatch(project.root_image, run.sandbox_image)
    if mismatch and project.require_image_match:
        return _decided(
            report, _inconclusive(Reason.IMAGE_MISMATCH, mismatch, **base_facts)
        )

    runner = runner_for(project)
    try:
        runner.check()
    except SandboxUnavailable as exc:
        report.decision = _inconclusive(
            Reason.SANDBOX_UNAVAILABLE, str(exc), **base_facts
        )
        return report

    scratch = Scratch(
        Path(settings.REPLAYHUB_WORK_DIR) / f"replay-{replay_id}", project.repo_path
    )
    scratch.remove()  # a previous delivery of this replay may have left it behind
    context = Context(
        project=project,
        run=run,
        runner=runner,
        provenance=prov,
        scratch=scratch,
        base_facts=base_facts,
        caps=caps or {},
        on_phase=on_phase,
    )
    try:
        report.decision = _with_environment(context, report)
    finally:
        scratch.remove()
    return report


def _with_environment(ctx: Context, report: Report) -> Ruling:
    """The replay in the project's environment, built by its setup phase or
    taken from the cache; a failed setup ends it ``setup_failed``."""
    try:
        environment = build.for_replay(
            ctx.project, scratch=ctx.scratch, base=ctx.base, runner=ctx.runner
        )
    except build.Unprepared as exc:
        exc.account(report)
        return _inconclusive(exc.reason, exc.detail, **ctx.base_facts)
    if environment is None:
        return _execute_in(ctx, report)
    with environment:
        environment.account(report)
        return _execute_in(replace(ctx, runner=environment.wrap(ctx.runner)), report)


def _execute_in(ctx: Context, report: Report) -> Ruling:
    project, run, runner, scratch = ctx.project, ctx.run, ctx.runner, ctx.scratch
    caps, on_phase, base_facts = ctx.caps, ctx.on_phase, ctx.base_facts
    on_phase(Phase.PROVISIONING)
    try:
        workspace = scratch.provision(ctx.base)
    except (GitError, OSError) as exc:
        return _inconclusive(
            Reason.FIXTURE_FAILED,
            f"the workspace could not be provisioned at {ctx.base[:12]}: {exc}",
            **base_facts,
        )
    io_dir = scratch.root / "io"
    io_dir.mkdir()
    (io_dir / "prompt.txt").write_text(run.prompt)

    on_phase(Phase.AGENT)
    env = {
        "REPLAYHUB_PROMPT_FILE": f"{IO_DIR}/prompt.txt",
        "REPLAYHUB_USAGE_FILE": f"{IO_DIR}/usage.json",
        "REPLAYHUB_TASK_ID": run.external_id,
        "REPLAYHUB_MODEL": run.model,
    }
    argv = tuple(agent_argv(project, caps))
    binds = [Bind(io_dir, IO_DIR, writable=True)]
    try:
        outcome, network = access.run_phase(
            runner,
            SandboxSpec(
                argv=argv,
                workspace=workspace,
                env=env,
                limits=agent_limits(project, caps),
                binds=tuple(binds),
            ),
            needs=access.agent_needs(project, run.provider),
            directory=scratch.root / "net-agent",
            phase="agent",
            caps=access.caps_for(project, caps),
        )
    except access.MissingKey as exc:
        return _inconclusive(Reason.HARNESS_ERROR, str(exc), **base_facts)
    except SandboxUnavailable as exc:
        return _inconclusive(Reason.SANDBOX_UNAVAILABLE, str(exc), **base_facts)
    report.agent = AgentResult.of(outcome)
    report.sandbox_seconds += outcome.duration_s
    reported, refused = bounded_usage(read_usage(io_dir / "usage.json"))
    report.usage_refused = refused
    if network is not None:
        report.model_calls = network.calls
        report.egress += network.attempts
    if network is not None and network.gateway is not None:
        # What the gateway measured is what the replay spent; the agent's own
        # account stays beside it as what the executor supplied.
        report.usage, refused = bounded_usage(measured_usage(report.model_calls))
        report.usage_refused |= {f"measured_{k}": v for k, v in refused.items()}
        report.usage_reported = reported
    else:
        report.usage = reported
    if network is not None and network.cap_fired:
        return _inconclusive(
            Reason.CAP_FIRED,
            f"the model gateway's {network.cap_fired} cap was reached",
            cap_detail=f"model {network.cap_fired}",
            **base_facts,
        )
    if outcome.timed_out or outcome.limit_fired == "wall_time":
        return _inconclusive(
            Reason.TIMEOUT,
            f"the agent ran past its {agent_limits(project, caps).wall_seconds:g} s "
            "time limit",
            cap_detail="wall_time",
            **base_facts,
        )
    if outcome.limit_fired:
        measured = f" ({outcome.limit_detail})" if outcome.limit_detail else ""
        return _inconclusive(
            Reason.CAP_FIRED,
            f"the agent hit the {outcome.limit_fired.replace('_', ' ')} cap{measured}",
            cap_detail=outcome.limit_fired,
            **base_facts,
        )

    on_phase(Phase.CAPTURE)
    captured = leftovers.capture(
        scratch=scratch,
        workspace=workspace,
        written=[workspace, io_dir],
        project=project,
        owner=runner.owner(),
        base_facts=base_facts,
    )
    if isinstance(captured, Ruling):
        return captured
    replay_tree = captured.tree
    report.unstorable_paths = captured.unstorable
    report.unstorable_count = captured.unstorable_count
    report.nested_repositories = captured.nested_repositories
    files = leftovers.counted(scratch, replay_tree, project, base_facts)
    if isinstance(files, Ruling):
        return files
    report.tree_files = files
    try:
        comparison = compare(
            scratch,
            base=ctx.base,
            original_commit=ctx.original_commit,
            replay_tree=replay_tree,
            allowed_globs=project.allowed_paths,
        )
    except GitError as exc:
        if leftovers.grew_too_large(exc):
            return leftovers.file_cap_fired(
                f"comparing the agent's {report.tree_files:,} files with the "
                f"original failed ({exc}); the cap is {project.max_files:,}",
                base_facts,
            )
        raise
    report.comparison = comparison
    if replay_tree == comparison.base_tree and not captured.unstorable_count:
        crashed = outcome.exit_code not in (0, None)
        return _inconclusive(
            Reason.NO_CHANGE,
            "the agent "
            + (f"exited with status {outcome.exit_code} " if crashed else "")
            + "left the checkout unchanged",
            **base_facts,
        )

    unstorable = leftovers.unstorable_summary(captured)
    facts = Facts(
        trees_identical=comparison.identical and not unstorable,
        has_test_command=bool(project.test_command),
        disallowed_paths=leftovers.disallowed(
            comparison.disallowed_paths, captured.unstorable, project.allowed_paths
        ),
        unstorable_paths=unstorable,
        model_recorded=run.model,
        models_called=models_called(report.model_calls),
        require_recorded_model=project.require_recorded_model,
        **base_facts,
    )
    needs_tests = (
        facts.has_test_command
        and ctx.provenance.base.confirmed
        and not comparison.identical
        # Decided on what was observed; no test run can change it.
        and not facts.disallowed_paths
        # The tree tested would not be what the agent left.
        and not unstorable
    )
    if not needs_tests:
        return decide(facts)
    return _judge_by_tests(ctx, report, comparison, facts)


_TREE_PHASES = {
    "original": Phase.TESTS_ORIGINAL,
    "replay": Phase.TESTS_REPLAY,
    "reference": Phase.TESTS_REFERENCE,
}


def _judge_by_tests(
    ctx: Context, report: Report, comparison: TreeComparison, facts: Facts
) -> Ruling:
    """The test gate on the original, the replay and, when the replay's test files
    differ from the original's, the reference tree; then the verdict."""
    project = ctx.project
    patterns = list(project.test_paths)
    try:
        plan = plan_tests(
            ctx.scratch,
            original_tree=comparison.original_tree,
            replay_tree=comparison.replay_tree,
            replay_paths=comparison.replay_paths,
            patterns=patterns,
        )
    except GitError as exc:
        if not leftovers.grew_too_large(exc):
            raise
        return leftovers.file_cap_fired(
            f"reading the test files of the agent's tree failed ({exc}); the cap "
            f"is {project.max_files:,}",
            ctx.base_facts,
        )
    report.plan = plan
    trees = {"original": comparison.original_tree, "replay": comparison.replay_tree}
    if plan.reference_tree is not None:
        trees["reference"] = plan.reference_tree
    report.trees = trees
    if oversize := leftovers.too_large_to_check_out(
        ctx.scratch, trees, project, ctx.base_facts
    ):
        return oversize
    report.cache_key = memory.cache_key(
        project,
        tree=comparison.original_tree,
        image=ctx.image,
        environment=report.environment.get("key", ""),
    )
    cached = memory.cached_original(project, report.cache_key)
    needs = access.test_needs(project)
    failed: CheckoutFailed | None = None
    with ExitStack() as stack:
        network = None
        if needs:
            network = stack.enter_context(
                access.PhaseNetwork(
                    directory=ctx.scratch.root / "net-tests", needs=needs, phase="tests"
                )
            )
        try:
            gate = run_gate(
                scratch=ctx.scratch,
                trees=trees,
                runner=ctx.runner,
                argv=project.test_command,
                limits=test_limits(project),
                reruns=project.flake_reruns,
                on_tree=lambda tree: ctx.on_phase(_TREE_PHASES[tree]),
                known={"original": cached} if cached is not None else None,
                network=network,
            )
        except CheckoutFailed as exc:
            failed, gate = exc, exc.gate
        except SandboxUnavailable as exc:
            return _inconclusive(Reason.SANDBOX_UNAVAILABLE, str(exc), **ctx.base_facts)
    denied: tuple[str, ...] = ()
    if network is not None:
        report.egress += network.attempts
        denied = tuple(
            sorted({f"{a.host}:{a.port}" for a in network.attempts if not a.allowed})
        )
    report.gate = gate
    report.sandbox_seconds += gate.sandbox_seconds
    if failed is not None:
        return _checkout_failed(ctx, report, failed)
    ctx.on_phase(Phase.VERDICT)
    judged = "reference" if "reference" in trees else "replay"
    per_test = compare_first_attempts(gate, judged)
    flipping = gate.flipping() | memory.known_flaky(project, per_test.newly_failing)
    return decide(
        replace(
            facts,
            original=gate.suite("original"),
            replay=gate.suite("replay"),
            reference=gate.suite("reference"),
            test_changes=plan.changes.summary() if plan.changes.any else "",
            interference=interference_summary(plan.interference)
            if plan.interference
            else "",
            interference_allowed=project.allow_test_interference,
            newly_failing=per_test.newly_failing,
            missing_tests=per_test.missing,
            known_flaky=tuple(sorted(set(per_test.newly_failing) & flipping)),
            per_test=per_test.compared,
            denied_hosts=denied,
        )
    )


def _checkout_failed(ctx: Context, report: Report, failed: CheckoutFailed) -> Ruling:
    """A tree could not be checked out for its tests. Git running out of time
    on a tree the agent wrote is the size of what it wrote, the file cap's
    business; any other failure, or one on the original's tree, is ReplayHub's.
    """
    if failed.tree in ("replay", "reference") and leftovers.grew_too_large(
        failed.error
    ):
        files = f"{report.tree_files:,}" if report.tree_files is not None else "its"
        return leftovers.file_cap_fired(
            f"checking out the {failed.tree} tree ({files} files) for its tests "
            f"failed ({failed.error}); the cap is {ctx.project.max_files:,}",
            ctx.base_facts,
        )
    return _inconclusive(
        Reason.HARNESS_ERROR,
        f"the {failed.tree} tree could not be checked out for its tests: "
        f"{failed.error}",
        **ctx.base_facts,
    )
