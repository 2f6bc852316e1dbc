"""What every kind of replay shares: its report, the sandbox checked, a
workspace of its own in the project's environment, and the agent phase run
with its one way out and its spending read back (why it stopped short is
``replay.stops``'s).

A code replay (``replay.execute``) and a rollout replay
(``rollouts.replay``) differ in what the agent is given and in how the
result is judged, not in these steps.
"""

from __future__ import annotations

import math
import shutil
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from django.conf import settings

from replayhub.environments import build, images
from replayhub.gateway import access
from replayhub.gateway.egress import AttemptCounts, ConnectAttempt
from replayhub.gateway.playback import TapePlayer
from replayhub.gateway.server import MeteredCall
from replayhub.gateway.tape import Exchange
from replayhub.git.mirrors import RepoUnreachable
from replayhub.git.scratch import GitError, Scratch, TreeComparison
from replayhub.lib import boundedjson
from replayhub.models import Phase, Project
from replayhub.nights.arithmetic import Amounts
from replayhub.replay import leftovers, retries
from replayhub.replay.stops import (
    NotRun,
    stop_if_gateway_ended,
    stop_if_sandbox_ended,
)
from replayhub.replay.surroundings import Placement
from replayhub.sandbox import (
    Bind,
    Limits,
    Runner,
    SandboxOutcome,
    SandboxSpec,
    SandboxUnavailable,
)
from replayhub.testgate.gate import (
    GateResult,
    read_small_file,
)
from replayhub.testgate.reference import TestPlan
from replayhub.verdicts import Reason, Ruling

IO_DIR = "/replayhub"

USAGE_MAX_BYTES = 64 * 1024

AGENT_OUTPUT_CHARS = 256 * 1024
# The end of the agent's output that ``reproduce --json`` prints.
AGENT_OUTPUT_TAIL_CHARS = 4096

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
    # Which runner isolated the agent, and how ("bwrap", "oci", "gvisor").
    runner: str = ""
    isolation: str = ""

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
            runner=outcome.runner,
            isolation=outcome.isolation,
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
    # The agent's model exchanges (its tape), whether any was cut to fit, and
    # for a tape replay how the tape it played went (``tape_evidence``).
    tape: list[Exchange] = field(default_factory=list)
    tape_truncated: bool = False
    tape_play: dict = field(default_factory=dict)
    egress: list[ConnectAttempt] = field(default_factory=list)
    # Every egress attempt counted, kept or not; refused model calls by
    # provider and status (only the first of each are in ``model_calls``).
    egress_counts: AttemptCounts = field(default_factory=AttemptCounts)
    refused_counts: dict[str, int] = field(default_factory=dict)
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
    # The agents' own files left out of each tree (``leftovers.ignored_evidence``).
    ignored_paths: dict = field(default_factory=dict)
    # The caps the agent ran under (``caps_in_force``), and what its writable
    # directories held when it ended.
    caps: dict = field(default_factory=dict)
    disk_bytes: int | None = None
    # The test files' side of the comparison, when the test gate ran.
    plan: TestPlan | None = None
    trees: dict[str, str] = field(default_factory=dict)
    cache_key: str = ""
    # The project's environment: its key, whether it came from the cache, the
    # setup's duration (and a failed setup's output).
    environment: dict = field(default_factory=dict)
    # What of the original's surroundings the agent phase had, and what not
    # (``Placement.evidence``).
    surroundings: dict = field(default_factory=dict)

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
            "agent": {
                **self.agent_summary(),
                "output_tail": self.agent.output[-AGENT_OUTPUT_TAIL_CHARS:],
            },
            "caps": self.cap_figures(),
            "ignored_paths": self.ignored_paths,
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
            "egress_total": self.egress_counts.total,
            "egress_counts": self.egress_counts.rows(),
            "refused_calls": self.refused_counts,
            "environment": self.environment or None,
            "surroundings": self.surroundings or None,
            "tape": {"exchanges": len(self.tape), **self.tape_play},
        }

    def cap_figures(self) -> dict:
        """Each cap the agent ran under beside what it used: ``limit`` None
        is no cap, ``used`` None not measured (the phase never got there)."""
        if not self.caps:
            return {}
        usage = self.usage
        tokens = None
        if "input_tokens" in usage or "output_tokens" in usage:
            tokens = int(usage.get("input_tokens", 0)) + int(
                usage.get("output_tokens", 0)
            )
        ran = self.agent.duration_s > 0 or self.agent.exit_code is not None
        used = {
            "time_seconds": round(self.agent.duration_s, 3) if ran else None,
            "tokens": tokens,
            "requests": usage.get("requests"),
            "cost_usd": usage.get("cost_usd"),
            "disk_mb": round(self.disk_bytes / 1024**2, 3)
            if self.disk_bytes is not None
            else None,
            "files": self.tree_files,
        }
        return {
            name: {"limit": limit, "used": used[name]}
            for name, limit in self.caps.items()
        }

    def extra_evidence(self) -> dict:
        """What a kind of replay adds to the stored evidence (see ``rollouts``)."""
        return {"surroundings": self.surroundings} if self.surroundings else {}

    def add_egress(
        self, attempts: list[ConnectAttempt], counts: AttemptCounts | None = None
    ) -> None:
        """A phase's egress attempts: all counted, the first few kept whole."""
        if counts is None:
            counts = AttemptCounts()
            for attempt in attempts:
                counts.add(attempt)
        self.egress_counts.merge(counts)
        room = max(settings.REPLAYHUB_EVIDENCE_KEPT - len(self.egress), 0)
        self.egress += attempts[:room]

    def add_network(self, network: Any) -> None:
        """What a phase's way out recorded: its calls, attempts and counts."""
        self.model_calls = [*self.model_calls, *network.calls]
        self.add_egress(network.attempts, network.attempt_counts)
        for key, n in network.refused_counts.items():
            self.refused_counts[key] = self.refused_counts.get(key, 0) + n

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


def caps_in_force(project: Project, caps: dict) -> dict:
    """The limits one agent phase runs under, by name (None: no cap): its
    time, the gateway's caps, and the disk and file caps on what it leaves."""
    gateway = access.caps_for(project, caps)
    return {
        "time_seconds": agent_limits(project, caps).wall_seconds,
        "tokens": gateway.max_tokens,
        "requests": gateway.max_requests,
        "cost_usd": str(gateway.max_cost_usd)
        if gateway.max_cost_usd is not None
        else None,
        "disk_mb": project.max_disk_mb,
        "files": project.max_files,
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


def runner_for(project: Project) -> Runner:
    """The project's runner, on its root image where one is unpacked here."""
    return images.runner_for(project)


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
        raw = boundedjson.loads(data, max_bytes=USAGE_MAX_BYTES)
    except boundedjson.Refused:
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


class Unforeseen(Exception):
    """A failure no step foresaw, raised out of :func:`prepared` with the
    report as it stood: once the agent has run, its model calls were made and
    paid for, so whatever fails after (the tape, the capture, the comparison,
    the tests, ReplayHub's own code) must not take them, or the usage the
    gateway measured, out of the report the night is settled on.
    ``error`` is the failure itself."""

    def __init__(self, report: Report, error: Exception) -> None:
        super().__init__(str(error))
        self.report = report
        self.error = error

    @staticmethod
    def unwrap(error: Exception) -> tuple[Report, Exception]:
        """The report ``error`` left (an empty one when it left none), and the
        failure itself."""
        if isinstance(error, Unforeseen):
            return error.report, error.error
        return Report(decision=None), error  # type: ignore[arg-type]


@contextmanager
def prepared(
    project: Project, *, replay_id: int, base: str, report: Report
) -> Iterator[tuple[Runner, Scratch]]:
    """The runner (in the project's environment, when it has one) and a
    scratch directory of the replay's own, removed whatever happens.

    Raises :class:`NotRun` when there is no sandbox, or the environment could
    not be built (the setup's account is on ``report`` then); anything else
    raised inside comes out as :class:`Unforeseen`, carrying ``report``.
    """
    runner = runner_for(project)
    try:
        runner.check()
    except SandboxUnavailable as exc:
        raise NotRun(Reason.SANDBOX_UNAVAILABLE, str(exc)) from exc
    try:
        # Fetched already, as the replay resolved its base.
        repo = project.repository()
    except RepoUnreachable as exc:
        raise NotRun(Reason.REPO_UNREACHABLE, exc.line) from exc
    scratch = Scratch(Path(settings.REPLAYHUB_WORK_DIR) / f"replay-{replay_id}", repo)
    scratch.remove()  # a previous delivery of this replay may have left it behind
    try:
        try:
            environment = build.for_replay(
                project, scratch=scratch, base=base, runner=runner
            )
        except build.Unprepared as exc:
            exc.account(report)
            raise NotRun(exc.reason, exc.detail) from exc
        with environment or nullcontext():
            if environment is not None:
                environment.account(report)
                runner = environment.wrap(runner)
            try:
                yield runner, scratch
            except NotRun:
                raise
            except Exception as error:
                raise Unforeseen(report, error) from error
    finally:
        scratch.remove()


def run_agent(
    runner: Runner,
    scratch: Scratch,
    *,
    project: Project,
    commit: str,
    argv: tuple[str, ...],
    env: dict[str, str],
    files: dict[str, str],
    provider: str,
    caps: dict,
    report: Report,
    on_phase: Callable[[str], object],
    who: str = "the agent",
    player: TapePlayer | None = None,
    placement: Placement | None = None,
) -> tuple[Path, Path, SandboxOutcome]:
    """Check ``commit`` out, write ``files`` into the agent's ``IO_DIR`` and run
    ``argv`` there with the project's way out (gateway, egress proxy) and the
    agent phase's limits; what it spent goes on ``report``.

    Returns the workspace, the IO directory and the outcome. Raises
    :class:`NotRun` when the phase could not run, or was stopped by a cap or
    its time limit (``who`` names the command in the reason). With a
    ``player`` the model's answers come from its tape; an agent that leaves it
    ends the phase ``tape_diverged`` unless the player goes on live. A
    ``placement`` puts the workspace, HOME, branch, TZ and LANG where the
    original had them; what it could not goes on the report.
    """
    on_phase(Phase.PROVISIONING)
    placement = placement or Placement()
    workspace, io_dir = _provision(scratch, commit, placement, files, report)

    on_phase(Phase.AGENT)
    limits = agent_limits(project, caps)
    report.caps = caps_in_force(project, caps)
    outcome, network = _run_phase(
        runner,
        SandboxSpec(
            argv=argv,
            workspace=workspace,
            env={**placement.env, **env},
            limits=limits,
            binds=(Bind(io_dir, IO_DIR, writable=True),),
            workspace_at=placement.workspace_at,
            home=placement.home,
            zone=placement.zone,
            login_shell=placement.login_shell,
        ),
        project=project,
        provider=provider,
        caps=caps,
        directory=scratch.root / "net-agent",
        player=player,
    )
    _account(report, outcome, network, io_dir)
    anthropic = (c for c in report.model_calls if c.kind == "anthropic")
    placement.asked(next((c.model_requested for c in anthropic), None))
    placement.ran_under(outcome.runner)
    report.surroundings = placement.evidence() or {}
    if network is not None and network.recorder is not None:
        report.tape, report.tape_truncated = network.recorder.exchanges()
    divergence = player.finish() if player is not None else None
    if player is not None:
        report.tape_play = tape_evidence(player)
    stop_if_gateway_ended(
        who, project, outcome, network, player=player, divergence=divergence
    )
    stop_if_sandbox_ended(who, outcome, limits, report.egress_counts)
    return workspace, io_dir, outcome


def _provision(
    scratch: Scratch,
    commit: str,
    placement: Placement,
    files: dict[str, str],
    report: Report,
) -> tuple[Path, Path]:
    """``commit`` checked out where ``placement`` puts it, and ``files`` written
    into the IO directory; the workspace and the IO directory."""
    try:
        workspace = scratch.provision(commit, branch=placement.branch)
    except (GitError, OSError) as exc:
        if retries.host_fault(
            exc,
            free_bytes=_free_bytes(scratch.root),
            minimum_bytes=settings.REPLAYHUB_MIN_FREE_DISK_MB * 1024 * 1024,
        ):
            # A full disk is the host's, never the run's: the replay goes to
            # another host (``replay.retries``), and this one stops in time.
            raise NotRun(
                Reason.HOST_FAILED,
                f"{socket.gethostname()} could not provision the workspace at "
                f"{commit[:12]}: {exc}",
            ) from exc
        raise NotRun(
            Reason.FIXTURE_FAILED,
            f"the workspace could not be provisioned at {commit[:12]}: {exc}",
        ) from exc
    placement.checked_out(scratch.branch)
    report.surroundings = placement.evidence() or {}
    io_dir = scratch.root / "io"
    io_dir.mkdir()
    for name, text in files.items():
        # An agent profile's HOME files go in folders (``agents.profile``).
        (io_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (io_dir / name).write_text(text)
    return workspace, io_dir


def _free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _run_phase(
    runner: Runner,
    spec: SandboxSpec,
    *,
    project: Project,
    provider: str,
    caps: dict,
    directory: Path,
    player: TapePlayer | None,
) -> tuple[SandboxOutcome, access.PhaseNetwork | None]:
    """``spec`` run with the agent phase's way out (``access.run_phase``);
    :class:`NotRun` when a key is missing or there is no sandbox."""
    try:
        return access.run_phase(
            runner,
            spec,
            needs=access.agent_needs(project, provider),
            directory=directory,
            phase="agent",
            caps=access.caps_for(project, caps),
            cap_grace=project.cap_grace_seconds,
            player=player,
        )
    except access.MissingKey as exc:
        raise NotRun(Reason.HARNESS_ERROR, str(exc)) from exc
    except SandboxUnavailable as exc:
        raise NotRun(Reason.SANDBOX_UNAVAILABLE, str(exc)) from exc


def _account(
    report: Report,
    outcome: SandboxOutcome,
    network: access.PhaseNetwork | None,
    io_dir: Path,
) -> None:
    """The agent phase's outcome, its calls and what it spent, on ``report``."""
    report.agent = AgentResult.of(outcome)
    report.sandbox_seconds += outcome.duration_s
    reported, refused = bounded_usage(read_usage(io_dir / "usage.json"))
    report.usage_refused = refused
    # The calls and what they spent go on the report first: whatever fails
    # after this leaves them there (``Unforeseen``).
    if network is not None:
        report.add_network(network)
    if network is not None and network.gateway is not None:
        # What the gateway measured is what the replay spent; the agent's own
        # account stays beside it as what the executor supplied.
        report.usage, refused = bounded_usage(measured_usage(report.model_calls))
        report.usage_refused |= {f"measured_{k}": v for k, v in refused.items()}
        report.usage_reported = reported
    else:
        report.usage = reported


def tape_evidence(player: TapePlayer) -> dict:
    """How a tape replay's tape went: its calls, those it served, and where
    the agent left it (the call, why, the requests' diff)."""
    divergence = player.divergence
    return {
        "played": len(player.tape),
        "calls": player.calls,
        "served": player.served,
        "then_live": player.then_live,
        "divergence": divergence.to_dict() if divergence is not None else None,
    }
