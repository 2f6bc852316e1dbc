"""One replay end to end: provenance, sandboxed agent, capture, compare, tests, verdict.

``execute`` does the work and returns a ``Report`` of plain data; it touches the
database only through the ``on_phase`` callback. Storing the report is
``services.replay_finish``'s job.
"""

from __future__ import annotations

import logging
import re
import shlex
import socket
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from replayhub.agents.profile import HOME_FILES
from replayhub.environments import images
from replayhub.gateway import access
from replayhub.gateway.playback import TapePlayer
from replayhub.git import agentfiles
from replayhub.git.mirrors import RepoUnreachable
from replayhub.git.patches import PatchRefused, patched_tree
from replayhub.git.scratch import GitError, Scratch, TreeComparison, compare
from replayhub.models import Phase, Project, Replay, Run, RunPatch
from replayhub.replay import leftovers, retries, surroundings
from replayhub.replay.capture import Captured
from replayhub.replay.provenance import (
    Provenance,
    resolve_provenance,
    valid_record_sha,
)
from replayhub.replay.stops import NotRun
from replayhub.replay.workspace import (
    IO_DIR,
    Report,
    models_called,
    prepared,
    run_agent,
)
from replayhub.sandbox import (
    Limits,
    Runner,
    SandboxOutcome,
    SandboxUnavailable,
)
from replayhub.testgate import memory
from replayhub.testgate.gate import (
    Attempt,
    CheckoutFailed,
    GateResult,
    compare_first_attempts,
    run_gate,
)
from replayhub.testgate.paths import interference_summary
from replayhub.testgate.reference import TestPlan, plan_tests
from replayhub.verdicts import Facts, Reason, Ruling, decide
from replayhub.verdicts.tape import on_tape

log = logging.getLogger(__name__)


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


def agent_argv(project: Project, caps: dict, model: str = "") -> list[str]:
    """The agent command with the per-replay caps filled into its placeholders;
    for an agent profile, its argv for the project's version and ``model``."""
    max_tokens = caps.get("max_tokens") or project.max_tokens
    profile = project.agent_profile
    if profile is not None:
        limits = {"max_turns": project.max_turns, "max_tokens": max_tokens}
        return list(profile.argv(project.agent_version, model, limits))
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


def profile_env(project: Project) -> dict[str, str]:
    """What an agent profile adds to the agent phase's variables."""
    profile = project.agent_profile
    return profile.environment() if profile is not None else {}


def home_files(project: Project, model: str) -> dict[str, str]:
    """An agent profile's HOME files, by their place in the IO folder (its
    launcher copies them into ``$HOME``)."""
    profile = project.agent_profile
    if profile is None:
        return {}
    folder = HOME_FILES.removeprefix(IO_DIR + "/")
    return {
        f"{folder}/{path}": text for path, text in profile.home_files(model).items()
    }


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
    player: TapePlayer | None = None
    # The replay's number among its run's replays (1 for the first): an
    # agent that takes a seed may use it, so each replicate is another,
    # repeatable sample.
    sample: int = 1
    # The original as a patch at the base, made in the scratch repository
    # only once the agent is done (so nothing of it is there while it runs).
    patch: RunPatch | None = None

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
    player: TapePlayer | None = None,
) -> Report:
    """Run one replay in a fresh workspace, which is removed whatever happens.

    With a ``player`` (a tape replay) the agent's model calls are answered
    from its tape, and the verdict says which drift that rules out.
    """
    patch = RunPatch.objects.filter(run=run).first()
    # A patched original is made by the replay, in no repository to fetch.
    named = (run.base_sha,) if patch else (run.original_commit, run.base_sha)
    try:
        # A mirrored repository is fetched first when it lacks a commit the
        # record names.
        repo = project.repository(commits=[c for c in named if valid_record_sha(c)])
    except (RepoUnreachable, OSError) as exc:
        if not isinstance(exc, RepoUnreachable) and not retries.host_fault(exc):
            raise
        return Report(decision=repo_unreachable(exc, run=run, project=project))
    prov = resolve_provenance(
        repo_path=repo,
        original_commit=run.original_commit or None,
        recorded_base=run.base_sha or None,
        default_branch=project.default_branch or None,
        image=run.sandbox_image or project.sandbox_image or None,
        recorded_config_sha256=run.sandbox_config_sha256 or None,
        project_config_sha256=project.sandbox_config_sha256 or None,
        test_command=shlex.join(project.test_command) or None,
        patched=patch is not None,
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

    try:
        with prepared(
            project, replay_id=replay_id, base=prov.base.sha, report=report
        ) as (runner, scratch):
            context = Context(
                project=project,
                run=run,
                runner=runner,
                provenance=prov,
                scratch=scratch,
                base_facts=base_facts,
                caps=caps or {},
                on_phase=on_phase,
                player=player,
                sample=Replay.objects.filter(run=run, pk__lt=replay_id).count() + 1,
                patch=patch,
            )
            report.decision = _execute_in(context, report)
    except NotRun as exc:
        report.decision = _not_run(exc, base_facts)
    if player is not None:
        # Only a replay that went on live asked the model from a call; one
        # that a cap stopped after it left the tape asked nothing more.
        report.decision = on_tape(report.decision, left_at=player.live_from)
    return report


def repo_unreachable(
    exc: RepoUnreachable | OSError, *, run: Run, project: Project
) -> Ruling:
    """The replay ends before its provenance: the remote could not be read,
    in git's own words; or this host could not keep the project's mirror (a
    full disk), which is the host's failure, not the remote's."""
    line = exc.line if isinstance(exc, RepoUnreachable) else str(exc)
    host = retries.host_fault(exc)
    return _inconclusive(
        Reason.HOST_FAILED if host else Reason.REPO_UNREACHABLE,
        f"{socket.gethostname()} could not update the project's mirror: {line}"
        if host
        else line,
        base_source="none",
        base_confirmed=False,
        original_recorded_passed=run.original_tests_passed,
        evidence_floor=project.evidence_floor,
    )


def _not_run(exc: NotRun, base_facts: dict) -> Ruling:
    return _inconclusive(exc.reason, exc.detail, cap_detail=exc.cap, **base_facts)


def _execute_in(ctx: Context, report: Report) -> Ruling:
    """The agent phase, its capture and comparison with the original; then the
    verdict, by the test gate when the trees differ in ways tests can judge."""
    try:
        workspace, io_dir, outcome = _run_agent(ctx, report)
    except NotRun as exc:
        attempted = {"model_calls_attempted": len(report.model_calls)}
        return _not_run(exc, {**ctx.base_facts, **attempted})
    captured = _capture(ctx, report, workspace=workspace, io_dir=io_dir)
    if isinstance(captured, Ruling):
        return captured
    comparison = _compare(ctx, report, captured)
    if isinstance(comparison, Ruling):
        return comparison
    report.comparison = comparison
    if comparison.replay_tree == comparison.base_tree and not captured.unstorable_count:
        return _no_change(outcome, report, ctx.base_facts)

    unstorable = leftovers.unstorable_summary(captured)
    facts = _replay_facts(ctx, report, comparison, captured, unstorable)
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


def _run_agent(ctx: Context, report: Report) -> tuple[Path, Path, SandboxOutcome]:
    """The agent phase on the base, given the run's prompt, model and
    surroundings (``workspace.run_agent``)."""
    project, run, caps = ctx.project, ctx.run, ctx.caps
    return run_agent(
        ctx.runner,
        ctx.scratch,
        project=project,
        commit=ctx.base,
        argv=tuple(agent_argv(project, caps, run.model)),
        env={
            **profile_env(project),
            "REPLAYHUB_PROMPT_FILE": f"{IO_DIR}/prompt.txt",
            "REPLAYHUB_USAGE_FILE": f"{IO_DIR}/usage.json",
            "REPLAYHUB_TASK_ID": run.external_id,
            "REPLAYHUB_SAMPLE": str(ctx.sample),
            "REPLAYHUB_MODEL": run.model,
        },
        files={"prompt.txt": run.prompt, **home_files(project, run.model)},
        provider=run.provider,
        caps=caps,
        report=report,
        on_phase=ctx.on_phase,
        player=ctx.player,
        placement=surroundings.plan(
            run.raw.get("surroundings") if isinstance(run.raw, dict) else None,
            installed_agent=surroundings.installed_agent(project),
        ),
    )


def _capture(
    ctx: Context, report: Report, *, workspace: Path, io_dir: Path
) -> Captured | Ruling:
    """The agent's checkout as a tree, what it left that no tree holds and its
    files counted on ``report``; or the cap's (or the harness's) decision."""
    ctx.on_phase(Phase.CAPTURE)
    captured = leftovers.capture(
        scratch=ctx.scratch,
        workspace=workspace,
        written=[workspace, io_dir],
        project=ctx.project,
        owner=ctx.runner.owner(),
        base_facts=ctx.base_facts,
    )
    if isinstance(captured, Ruling):
        return captured
    report.unstorable_paths = captured.unstorable
    report.unstorable_count = captured.unstorable_count
    report.nested_repositories = captured.nested_repositories
    report.disk_bytes = captured.disk_bytes
    files = leftovers.counted(ctx.scratch, captured.tree, ctx.project, ctx.base_facts)
    if isinstance(files, Ruling):
        return files
    report.tree_files = files
    return captured


def _compare(
    ctx: Context, report: Report, captured: Captured
) -> TreeComparison | Ruling:
    """The replay's tree beside the original's, both less the agents' own
    files (which go on ``report``); or the file cap's decision when git could
    not compare what the agent wrote."""
    project = ctx.project
    original = _original(ctx)
    if isinstance(original, Ruling):
        return original
    try:
        # The agents' own files, as the base has them on both sides.
        sides = {
            name: agentfiles.at_base(
                ctx.scratch,
                tree=tree,
                base=ctx.base,
                ignored=project.ignored_in_force,
                kept=project.test_paths,
            )
            for name, tree in (
                ("original", original),
                ("replay", captured.tree),
            )
        }
        report.ignored_paths = leftovers.ignored_evidence(
            original=sides["original"].paths,
            replay=[*captured.left_out, *sides["replay"].paths],
            replay_count=captured.left_out_count + len(sides["replay"].paths),
        )
        return compare(
            ctx.scratch,
            base=ctx.base,
            original_commit=sides["original"].tree,
            replay_tree=sides["replay"].tree,
            allowed_globs=project.allowed_paths,
        )
    except GitError as exc:
        if leftovers.grew_too_large(exc):
            return leftovers.file_cap_fired(
                f"comparing the agent's {report.tree_files:,} files with the "
                f"original failed ({exc}); the cap is {project.max_files:,}",
                ctx.base_facts,
            )
        raise


def _original(ctx: Context) -> str | Ruling:
    """The original's commit, or the tree its stored patch makes at the base
    in the replay's scratch repository; the verdict when that patch no
    longer makes the tree it made at import."""
    if ctx.patch is None:
        return ctx.original_commit
    try:
        tree = patched_tree(ctx.scratch.create(), ctx.base, ctx.patch.patch)
    except PatchRefused as exc:
        why = f"the original could not be made from the run's stored patch: {exc}"
        return _inconclusive(Reason.FIXTURE_FAILED, why, **ctx.base_facts)
    if tree != ctx.patch.tree:
        why = (
            "the original could not be made from the run's stored patch: at the "
            f"base {ctx.base[:12]} it makes the tree {tree[:12]}, not "
            f"{ctx.patch.tree[:12]} as at import"
        )
        return _inconclusive(Reason.FIXTURE_FAILED, why, **ctx.base_facts)
    return tree


def _no_change(outcome: SandboxOutcome, report: Report, base_facts: dict) -> Ruling:
    """The agent left the base as it was: a failed agent, or no change."""
    if outcome.exit_code not in (0, None) and not report.model_calls:
        # A usage error or a CLI that is not there: the line that says why.
        why = f"exit status {outcome.exit_code}: {failure_line(outcome.output)}"
        return _inconclusive(Reason.AGENT_FAILED, why, **base_facts)
    return _inconclusive(Reason.NO_CHANGE, unchanged(outcome, report), **base_facts)


def _replay_facts(
    ctx: Context,
    report: Report,
    comparison: TreeComparison,
    captured: Captured,
    unstorable: str,
) -> Facts:
    """What the verdict is decided on before any test runs."""
    project, run = ctx.project, ctx.run
    return Facts(
        trees_identical=comparison.identical and not unstorable,
        has_test_command=bool(project.test_command),
        disallowed_paths=leftovers.disallowed(
            comparison.disallowed_paths, captured.unstorable, project.allowed_paths
        ),
        unstorable_paths=unstorable,
        model_recorded=run.model,
        models_called=models_called(report.model_calls),
        model_calls_attempted=len(report.model_calls),
        require_recorded_model=project.require_recorded_model,
        **ctx.base_facts,
    )


def unchanged(outcome: SandboxOutcome, report: Report) -> str:
    """Why the checkout is unchanged, in one sentence."""
    if outcome.exit_code in (0, None):
        return "the agent left the checkout unchanged"
    return (
        f"the agent exited with status {outcome.exit_code} left the checkout unchanged"
    )


# An error line as CLIs print one: "error: …", "aider: error: …",
# "npm error code …", "ERROR: …"; then what argument parsers say instead.
_ERROR_LINE = re.compile(r"^(?:[\w.-]+:\s*)?(?:npm\s+)?error\b[:\s]+\S", re.I)
_USAGE_LINE = re.compile(
    r"^(?:no such option|unknown option|unrecognized|unexpected argument|"
    r"invalid|missing|.*: not found|.*: no such file)",
    re.I,
)
FAILURE_LINE_CHARS = 300


def failure_line(output: str) -> str:
    """The line of a failed command's output that says why (pure): the first
    error line, else the first line naming a bad or missing argument, else
    the first line; box-drawing frames (a rich CLI's error panel) are taken
    off. Cut to :data:`FAILURE_LINE_CHARS`."""
    lines = [
        line.strip().strip("\u2502\u256d\u256e\u2570\u256f\u2500 ").strip()
        for line in output.splitlines()
    ]
    lines = [line for line in lines if line]
    if not lines:
        return "it printed nothing"
    for pattern in (_ERROR_LINE, _USAGE_LINE):
        found = next((line for line in lines if pattern.search(line)), None)
        if found is not None:
            return found[:FAILURE_LINE_CHARS]
    return lines[0][:FAILURE_LINE_CHARS]


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
    plan = _plan(ctx, comparison)
    if isinstance(plan, Ruling):
        return plan
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
    tested = _run_tests(ctx, report, trees, cached)
    if isinstance(tested, Ruling):
        return tested
    gate = tested.gate
    report.gate = gate
    report.sandbox_seconds += gate.sandbox_seconds
    if tested.failed is not None:
        return _checkout_failed(ctx, report, tested.failed)
    ctx.on_phase(Phase.VERDICT)
    judged = "reference" if "reference" in trees else "replay"
    return decide(_tested_facts(project, facts, plan, tested, judged))


def _plan(ctx: Context, comparison: TreeComparison) -> TestPlan | Ruling:
    """Which trees the tests run on (``plan_tests``), or the file cap's
    decision when git could not read the agent's test files."""
    try:
        return plan_tests(
            ctx.scratch,
            original_tree=comparison.original_tree,
            replay_tree=comparison.replay_tree,
            replay_paths=comparison.replay_paths,
            patterns=list(ctx.project.test_paths),
        )
    except GitError as exc:
        if not leftovers.grew_too_large(exc):
            raise
        return leftovers.file_cap_fired(
            f"reading the test files of the agent's tree failed ({exc}); the cap "
            f"is {ctx.project.max_files:,}",
            ctx.base_facts,
        )


@dataclass(frozen=True)
class _Tested:
    """What the test gate's run left: its result, the tree that could not be
    checked out (if one could not), and the hosts the tests were refused."""

    gate: GateResult
    failed: CheckoutFailed | None
    denied: tuple[str, ...]


def _run_tests(
    ctx: Context, report: Report, trees: dict[str, str], cached: Attempt | None
) -> _Tested | Ruling:
    """The test gate on ``trees`` with the tests' way out, when they need one
    (its egress goes on ``report``); ``cached`` is the original's remembered
    suite. A missing sandbox decides the replay."""
    project = ctx.project
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
        report.add_egress(network.attempts, network.attempt_counts)
        denied = tuple(
            sorted(
                {
                    f"{row['host']}:{row['port']}"
                    for row in network.attempt_counts.rows()
                    if not row["allowed"]
                }
            )
        )
    return _Tested(gate=gate, failed=failed, denied=denied)


def _tested_facts(
    project: Project, facts: Facts, plan: TestPlan, tested: _Tested, judged: str
) -> Facts:
    """``facts`` with what the tests found, the ``judged`` tree's first
    attempts compared with the original's."""
    gate = tested.gate
    per_test = compare_first_attempts(gate, judged)
    flipping = gate.flipping() | memory.known_flaky(project, per_test.newly_failing)
    return replace(
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
        denied_hosts=tested.denied,
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
