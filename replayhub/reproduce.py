"""One replay end to end: provenance, sandboxed agent, capture, compare, tests, verdict.

``execute`` does the work and returns plain data; it touches the database only
through the ``on_phase`` callback. ``persist`` writes everything in one
transaction, and only while the caller still holds the replay's lease.
"""

from __future__ import annotations

import json
import logging
import math
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import gitops, nightly
from .budgets import Amounts
from .models import (
    Comparison,
    Phase,
    Project,
    Replay,
    ReplayStatus,
    ReviewBand,
    Run,
    TestOutcome,
)
from .provenance import resolve_provenance
from .sandbox import Bind, Limits, SandboxSpec, SandboxUnavailable, get_runner
from .testgate import GateResult, read_small_file, run_gate
from .verdicts import Decision, Facts, Reason, decide

log = logging.getLogger(__name__)

IO_DIR = "/replayhub"
USAGE_MAX_BYTES = 64 * 1024
AGENT_OUTPUT_CHARS = 256 * 1024


@dataclass
class AgentResult:
    exit_code: int | None = None
    output: str = ""
    output_truncated: bool = False
    timed_out: bool = False
    limit_fired: str = ""
    duration_s: float = 0.0


@dataclass
class Report:
    """Everything one replay found, ready to be stored."""

    decision: Decision
    provenance: dict = field(default_factory=dict)
    comparison: gitops.Comparison | None = None
    gate: GateResult | None = None
    agent: AgentResult = field(default_factory=AgentResult)
    usage: dict = field(default_factory=dict)
    sandbox_seconds: float = 0.0

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
        for tree in ("original", "replay"):
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
            "evidence": [_check_dict(c) for c in self.decision.checks],
            "agent": {k: v for k, v in asdict(self.agent).items() if k != "output"},
            "usage": self.usage,
        }


def _check_dict(check) -> dict:
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
    )


def test_limits(project: Project) -> Limits:
    return Limits(
        wall_seconds=project.test_time_limit,
        memory_bytes=project.memory_limit_mb * 1024 * 1024,
        max_processes=project.max_processes,
        output_bytes=project.max_output_bytes,
    )


def runner_for(project: Project):
    if project.runner == "docker":
        return get_runner("docker", image=project.sandbox_image)
    return get_runner(project.runner)


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


def _decided(report: Report, decision: Decision) -> Report:
    report.decision = decision
    return report


def _inconclusive(reason: Reason, detail: str, **facts) -> Decision:
    return decide(Facts(harness_failure=reason, harness_detail=detail, **facts))


def execute(
    *,
    project: Project,
    run: Run,
    replay_id: int,
    caps: dict | None = None,
    on_phase: Callable[[str], None] = lambda phase: None,
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
    base_facts = {
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

    runner = runner_for(project)
    try:
        runner.check()
    except SandboxUnavailable as exc:
        report.decision = _inconclusive(
            Reason.SANDBOX_UNAVAILABLE, str(exc), **base_facts
        )
        return report

    scratch = gitops.Scratch(
        Path(settings.REPLAYHUB_WORK_DIR) / f"replay-{replay_id}", project.repo_path
    )
    scratch.remove()  # a previous delivery of this replay may have left it behind
    try:
        report.decision = _execute_in(
            scratch,
            project,
            run,
            runner,
            prov,
            report,
            base_facts,
            caps or {},
            on_phase,
        )
    finally:
        scratch.remove()
    return report


def _execute_in(
    scratch, project, run, runner, prov, report, base_facts, caps, on_phase
):
    on_phase(Phase.PROVISIONING)
    try:
        workspace = scratch.provision(prov.base.sha)
    except (gitops.GitError, OSError) as exc:
        return _inconclusive(
            Reason.FIXTURE_FAILED,
            f"the workspace could not be provisioned at {prov.base.sha[:12]}: {exc}",
            **base_facts,
        )
    io_dir = scratch.root / "io"
    io_dir.mkdir()
    (io_dir / "prompt.txt").write_text(run.prompt)

    on_phase(Phase.AGENT)
    try:
        outcome = runner.run(
            SandboxSpec(
                argv=tuple(agent_argv(project, caps)),
                workspace=workspace,
                env={
                    "REPLAYHUB_PROMPT_FILE": f"{IO_DIR}/prompt.txt",
                    "REPLAYHUB_USAGE_FILE": f"{IO_DIR}/usage.json",
                    "REPLAYHUB_TASK_ID": run.external_id,
                },
                limits=agent_limits(project, caps),
                binds=(Bind(io_dir, IO_DIR, writable=True),),
            )
        )
    except SandboxUnavailable as exc:
        return _inconclusive(Reason.SANDBOX_UNAVAILABLE, str(exc), **base_facts)
    report.agent = AgentResult(
        exit_code=outcome.exit_code,
        output=outcome.output[-AGENT_OUTPUT_CHARS:],
        output_truncated=outcome.output_truncated
        or len(outcome.output) > AGENT_OUTPUT_CHARS,
        timed_out=outcome.timed_out,
        limit_fired=outcome.limit_fired,
        duration_s=outcome.duration_s,
    )
    report.sandbox_seconds += outcome.duration_s
    report.usage = read_usage(io_dir / "usage.json")
    if outcome.timed_out or outcome.limit_fired == "wall_time":
        return _inconclusive(
            Reason.TIMEOUT,
            f"the agent ran past its {agent_limits(project, caps).wall_seconds:g} s "
            "time limit",
            cap_detail="wall_time",
            **base_facts,
        )
    if outcome.limit_fired:
        return _inconclusive(
            Reason.CAP_FIRED,
            f"the agent hit the {outcome.limit_fired.replace('_', ' ')} cap",
            cap_detail=outcome.limit_fired,
            **base_facts,
        )

    on_phase(Phase.CAPTURE)
    try:
        replay_tree = scratch.capture(workspace)
    except gitops.GitError as exc:
        return _inconclusive(
            Reason.HARNESS_ERROR,
            f"the change could not be captured: {exc}",
            **base_facts,
        )
    comparison = gitops.compare(
        scratch,
        base=prov.base.sha,
        original_commit=prov.original_commit,
        replay_tree=replay_tree,
        allowed_globs=project.allowed_paths,
    )
    report.comparison = comparison
    if replay_tree == comparison.base_tree:
        crashed = outcome.exit_code not in (0, None)
        return _inconclusive(
            Reason.NO_CHANGE,
            "the agent "
            + (f"exited with status {outcome.exit_code} " if crashed else "")
            + "left the checkout unchanged",
            **base_facts,
        )

    facts = Facts(
        trees_identical=comparison.identical,
        has_test_command=bool(project.test_command),
        disallowed_paths=tuple(comparison.disallowed_paths),
        **base_facts,
    )
    needs_tests = (
        facts.has_test_command and prov.base.confirmed and not comparison.identical
    )
    if not needs_tests:
        return decide(facts)

    gate = run_gate(
        scratch=scratch,
        trees={"original": comparison.original_tree, "replay": comparison.replay_tree},
        runner=runner,
        argv=project.test_command,
        limits=test_limits(project),
        reruns=project.flake_reruns,
        on_tree=lambda tree: on_phase(
            Phase.TESTS_ORIGINAL if tree == "original" else Phase.TESTS_REPLAY
        ),
    )
    report.gate = gate
    report.sandbox_seconds += gate.sandbox_seconds
    on_phase(Phase.VERDICT)
    return decide(
        Facts(
            **{
                **asdict(facts),
                "original": gate.suite("original"),
                "replay": gate.suite("replay"),
            }
        )
    )


def persist(replay: Replay, report: Report, *, owner: str, expired_before=None) -> bool:
    """Store the outcome in one transaction; False if the lease was lost meanwhile.

    Only a running replay still leased to ``owner`` is written. The lease reaper
    passes ``expired_before`` so a heartbeat that renewed the lease in the
    meantime wins over it.
    """
    decision = report.decision
    run = replay.run
    retries_exhausted = replay.attempt >= replay.project.max_attempts
    usage = report.usage
    actual = report.actual()
    evidence = {
        "checks": [_check_dict(c) for c in decision.checks],
        "agent": {k: v for k, v in asdict(report.agent).items() if k != "output"},
        "warnings": report.provenance.get("warnings", []),
    }
    with transaction.atomic():
        rows = Replay.objects.filter(
            pk=replay.pk, status=ReplayStatus.RUNNING, lease_owner=owner
        )
        if expired_before is not None:
            rows = rows.filter(lease_expires_at__lt=expired_before)
        updated = rows.update(
            status=ReplayStatus.FINISHED,
            phase=Phase.DONE,
            verdict=decision.verdict,
            reason_code=decision.reason_code,
            reason=decision.reason,
            evidence=evidence,
            provenance=report.provenance,
            agent_exit_code=report.agent.exit_code,
            agent_output=report.agent.output,
            agent_output_truncated=report.agent.output_truncated,
            usage=usage,
            tokens=actual.tokens,
            cost_usd=actual.cost_usd,
            sandbox_seconds=report.sandbox_seconds,
            lease_owner="",
            lease_expires_at=None,
            review_band=ReviewBand.for_verdict(decision.verdict, retries_exhausted),
            finished_at=timezone.now(),
        )
        if not updated:
            return False
        if report.comparison is not None:
            c = report.comparison
            Comparison.objects.create(
                replay=replay,
                identical=c.identical,
                original_tree=c.original_tree,
                replay_tree=c.replay_tree,
                diff_of_diffs=c.diff_of_diffs,
                diffstat=c.diffstat,
                files_changed=c.files_changed,
                insertions=c.insertions,
                deletions=c.deletions,
                differing_paths=c.differing_paths,
                original_patch=c.original_patch,
                replay_patch=c.replay_patch,
                replay_paths=c.replay_paths,
                disallowed_paths=c.disallowed_paths,
                truncated=c.truncated,
            )
        if report.gate is not None:
            TestOutcome.objects.bulk_create(
                TestOutcome(
                    replay=replay,
                    tree=a.tree,
                    attempt=a.attempt,
                    ran=a.ran,
                    passed=a.passed,
                    exit_code=a.exit_code,
                    tests_executed=a.tests_executed,
                    tests_failed=a.tests_failed,
                    timed_out=a.timed_out,
                    output_tail=a.output_tail,
                    output_truncated=a.output_truncated,
                    duration_s=a.duration_s,
                )
                for a in report.gate.attempts
            )
        if report.provenance and not run.provenance:
            Run.objects.filter(pk=run.pk).update(provenance=report.provenance)
        nightly.settle(replay=replay, actual=actual, now=timezone.now())
    log.info(
        "replay %s finished: %s / %s", replay.pk, decision.verdict, decision.reason_code
    )
    return True
