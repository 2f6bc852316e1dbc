"""One rollout replay: the project's harness continues a seed in the sandbox.

The harness command (the environment's own code, checked out from the
project's repository) runs in the same sandbox as a code run's agent, with
model access through the gateway when the project names providers. It reads the
seed, a JSON list of chat messages, from ``$REPLAYHUB_SEED_FILE``, lets the model
continue it and writes ``{"completion": …, "reward": …}`` to
``$REPLAYHUB_RESULT_FILE``. That file is untrusted (``result``). When the
project has a ``verifier_command``, the harness's reward is ignored and the
completion is scored by the verifier in a second sandbox (``verifier``);
otherwise the harness's reward is used, and said to be the harness's. A
project with a setup command gives both the environment its setup phase built
(``environments``), as it does a code run's agent and tests. The verdict is
``verdicts.rollout``'s.

``execute_rollout`` touches the database only through ``on_phase`` and the
project's providers; storing the report is ``services.replay_finish``'s job.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from replayhub.git.history import History
from replayhub.git.mirrors import RepoUnreachable
from replayhub.git.scratch import GitError, Scratch
from replayhub.models import Phase, Project, Replay, RunSource
from replayhub.replay.provenance import valid_record_sha
from replayhub.replay.stops import NotRun
from replayhub.replay.workspace import IO_DIR, Report, prepared, run_agent
from replayhub.rollouts import verifier
from replayhub.rollouts.completions import (
    MalformedCompletion,
    Message,
    normalise,
    same,
    similarity,
)
from replayhub.rollouts.result import ResultProblem, read_result
from replayhub.sandbox import SandboxUnavailable
from replayhub.verdicts import Reason
from replayhub.verdicts.rollout import (
    HARNESS,
    SEPARATE_VERIFIER,
    RolloutFacts,
    decide_rollout,
)

log = logging.getLogger(__name__)

SEED_FILE = "seed.json"
RESULT_FILE = "result.json"
# A stored completion keeps at most this much of each message's text.
STORED_CONTENT_CHARS = 64 * 1024


@dataclass(frozen=True)
class RolloutTask:
    """One seed to replay, as plain data.

    ``messages`` go to the harness as they are; ``original_completion`` (a
    string or a list of messages) and ``original_reward`` are what the record
    says the original went on to do and scored. ``commit`` is the commit of the
    project's repository to run the harness from; empty means the tip of the
    project's default branch.
    """

    messages: Sequence[dict]
    original_completion: object
    original_reward: float | None
    pass_threshold: float
    harness_command: Sequence[str]
    trace_id: str
    seed_number: int = 1
    seed_kind: str = ""
    anchor: str = ""
    model: str = ""
    provider: str = ""
    commit: str = ""
    # The project's separate verifier; empty: the harness's reward is used.
    verifier_command: Sequence[str] = ()
    # ReplayHub's mark for the records of this replay's output (see
    # ``replay_mark``), handed to the harness as ``$REPLAYHUB_REPLAY_MARK``.
    mark: dict = field(default_factory=dict)


def replay_mark(*, replay_id: int, seed_key: str, source: str) -> dict:
    """What marks a record as the output of a ReplayHub replay: a record whose
    ``info.replayhub`` (or top-level ``replayhub``) holds this object is skipped
    on import as ``replayed`` and never seeds again."""
    return {"replay": replay_id, "seed": seed_key, "source": source}


def task_for(replay: Replay) -> RolloutTask | None:
    """The rollout task of ``replay``: its seed, or the run's first seed when a
    replay of a rollout was queued without one (the nightly scheduler queues
    runs). None for a code run's replay."""
    run, project = replay.run, replay.project
    seed = replay.seed
    if seed is None:
        if run.source != RunSource.ROLLOUT:
            return None
        seed = run.seeds.order_by("number").first()
        if seed is None:
            return None
    # The original's messages after the anchor; a recheck seed has none (its
    # attempt is in the seed), and its final answer is the completion.
    original: object = seed.continuation or seed.original_completion
    return RolloutTask(
        messages=seed.messages,
        original_completion=original,
        original_reward=run.reward,
        pass_threshold=project.pass_threshold,
        harness_command=tuple(project.harness_command),
        verifier_command=tuple(project.verifier_command),
        trace_id=run.external_id,
        seed_number=seed.number,
        seed_kind=seed.kind,
        anchor=f"{seed.anchor}@{seed.anchor_node}",
        model=run.model,
        provider=run.provider,
        commit=run.base_sha,
        mark=replay_mark(
            replay_id=replay.pk, seed_key=seed.key, source=run.external_id
        ),
    )


@dataclass
class RolloutReport(Report):
    """A replay's ``Report`` with what the rollout side found (``rollout``)."""

    rollout: dict = field(default_factory=dict)

    def summary(self) -> dict:
        data = super().summary()
        data.update(
            {
                key: self.rollout.get(key)
                for key in (
                    "original_reward",
                    "replay_reward",
                    "similarity",
                    "pass_threshold",
                    "seed",
                    "seed_kind",
                    "reward_source",
                    "harness_reward",
                )
            }
        )
        data["kind"] = "rollout"
        return data

    def extra_evidence(self) -> dict:
        return {"rollout": self.rollout}


def execute_rollout(
    *,
    project: Project,
    task: RolloutTask,
    replay_id: int,
    caps: dict | None = None,
    on_phase: Callable[[str], object] = lambda phase: None,
) -> RolloutReport:
    """Replay one seed in a fresh workspace, which is removed whatever happens."""
    caps = caps or {}
    report = RolloutReport(decision=None)  # type: ignore[arg-type]
    verifying = bool(task.verifier_command)
    report.rollout = {
        "reward_source": SEPARATE_VERIFIER if verifying else HARNESS,
        "trace_id": task.trace_id,
        "seed": task.seed_number,
        "seed_kind": task.seed_kind,
        "anchor": task.anchor,
        "pass_threshold": task.pass_threshold,
        "original_reward": task.original_reward,
        "replay_reward": None,
        "similarity": None,
        "completion": None,
    }

    def failed(reason: Reason, detail: str, cap: str = "") -> RolloutReport:
        report.rollout["failure"] = detail
        report.decision = decide_rollout(
            RolloutFacts(
                pass_threshold=task.pass_threshold,
                original_reward=task.original_reward,
                failure=reason,
                failure_detail=detail,
                cap_detail=cap,
                reward_source=report.rollout["reward_source"],
            )
        )
        return report

    if not task.harness_command:
        return failed(
            Reason.FIXTURE_FAILED, "the project has no rollout harness command"
        )
    try:
        repo = project.repository(
            commits=[task.commit] if valid_record_sha(task.commit) else []
        )
    except RepoUnreachable as exc:
        return failed(Reason.REPO_UNREACHABLE, exc.line)
    commit = _harness_commit(project, repo, task.commit)
    if commit is None:
        return failed(
            Reason.FIXTURE_FAILED,
            f"no commit of {project.repo_path} to run the harness from (the "
            "default branch has none)",
        )
    report.rollout["harness_commit"] = commit
    try:
        with prepared(project, replay_id=replay_id, base=commit, report=report) as (
            runner,
            scratch,
        ):
            # The project's environment, as a code replay's: the harness and
            # the separate verifier both get it read-only.
            return _run_harness(
                project=project,
                task=task,
                commit=commit,
                runner=runner,
                scratch=scratch,
                caps=caps,
                on_phase=on_phase,
                report=report,
                failed=failed,
                replay_id=replay_id,
            )
    except NotRun as exc:
        return failed(exc.reason, exc.detail, exc.cap)


def _verified_reward(
    *,
    project: Project,
    task: RolloutTask,
    commit: str,
    runner: Any,
    completion: Sequence[Message],
    replay_id: int,
    report: RolloutReport,
) -> float:
    """The separate verifier's reward for ``completion``; ``VerifierFailed``
    or ``SandboxUnavailable`` when there is none."""
    record: dict = {"command": list(task.verifier_command)}
    report.rollout["verifier"] = record
    try:
        scored = verifier.score(
            project=project,
            command=task.verifier_command,
            commit=commit,
            runner=runner,
            # Inside the replay's own directory, emptied of the harness's
            # files by now, so that the reaper's clean-up of a lost worker's
            # replay takes it too.
            root=Path(settings.REPLAYHUB_WORK_DIR) / f"replay-{replay_id}" / "verifier",
            seed=task.messages,
            completion=completion,
            env={
                "REPLAYHUB_TASK_ID": task.trace_id,
                "REPLAYHUB_SEED_KIND": task.seed_kind,
                "REPLAYHUB_REPLAY_ID": str(replay_id),
            },
            record=record,
        )
    except verifier.VerifierFailed as exc:
        report.sandbox_seconds += exc.seconds
        raise
    report.sandbox_seconds += scored.seconds
    return scored.reward


def _harness_commit(project: Project, repo_path: Path, commit: str) -> str | None:
    try:
        with History(repo_path) as repo:
            if commit:
                return repo.commit(commit)
            branch = project.default_branch or repo.head_branch()
            return repo.branch_tip(branch) if branch else None
    except GitError:
        return None


def _run_harness(
    *,
    project: Project,
    task: RolloutTask,
    commit: str,
    runner: Any,
    scratch: Scratch,
    caps: dict,
    on_phase: Callable[[str], object],
    report: RolloutReport,
    failed: Callable[..., RolloutReport],
    replay_id: int,
) -> RolloutReport:
    try:
        _, io_dir, outcome = run_agent(
            runner,
            scratch,
            project=project,
            commit=commit,
            argv=tuple(task.harness_command),
            env={
                "REPLAYHUB_SEED_FILE": f"{IO_DIR}/{SEED_FILE}",
                "REPLAYHUB_RESULT_FILE": f"{IO_DIR}/{RESULT_FILE}",
                "REPLAYHUB_USAGE_FILE": f"{IO_DIR}/usage.json",
                "REPLAYHUB_TASK_ID": task.trace_id,
                "REPLAYHUB_SEED_KIND": task.seed_kind,
                "REPLAYHUB_REPLAY_ID": str(replay_id),
                "REPLAYHUB_MODEL": task.model,
                "REPLAYHUB_REPLAY_MARK": json.dumps(task.mark, sort_keys=True),
            },
            files={SEED_FILE: json.dumps(list(task.messages), ensure_ascii=False)},
            provider=task.provider,
            caps=caps,
            report=report,
            on_phase=on_phase,
            who="the harness",
        )
    except NotRun as exc:
        return failed(exc.reason, exc.detail, exc.cap)
    on_phase(Phase.VERDICT)
    if outcome.exit_code != 0:
        return failed(
            Reason.HARNESS_FAILED, f"it exited with status {outcome.exit_code}"
        )
    verifying = bool(task.verifier_command)
    try:
        result = read_result(io_dir / RESULT_FILE, reward_required=not verifying)
    except ResultProblem as problem:
        return failed(problem.reason, problem.detail)
    report.rollout["completion"] = stored_messages(result.completion)
    reward = result.reward
    if verifying:
        # The harness's reward is kept for the record and never judged: the
        # model's tool calls could have written it.
        report.rollout["harness_reward"] = result.reward
        report.rollout["harness_reward_ignored"] = True
        # Nothing the harness phase wrote may reach the verifier.
        scratch.remove()
        # The verifier judges the replay's output as the test gate does a
        # code run's: the phase a watcher of the replay sees.
        on_phase(Phase.TESTS_REPLAY)
        try:
            reward = _verified_reward(
                project=project,
                task=task,
                commit=commit,
                runner=runner,
                completion=result.completion,
                replay_id=replay_id,
                report=report,
            )
        except verifier.VerifierFailed as exc:
            return failed(Reason.VERIFIER_FAILED, exc.detail)
        except SandboxUnavailable as exc:
            return failed(Reason.SANDBOX_UNAVAILABLE, str(exc))
        on_phase(Phase.VERDICT)
    assert reward is not None
    report.rollout["replay_reward"] = reward
    try:
        original = normalise(task.original_completion)
    except MalformedCompletion as exc:
        # The record's own continuation, accepted at import: ReplayHub's fault
        # if it cannot be read back now.
        return failed(Reason.HARNESS_ERROR, f"the original completion: {exc}")
    identical = same(original, result.completion)
    report.rollout["similarity"] = similarity(original, result.completion)
    report.rollout["same_completion"] = identical
    report.decision = decide_rollout(
        RolloutFacts(
            pass_threshold=task.pass_threshold,
            original_reward=task.original_reward,
            replay_reward=reward,
            same_completion=identical,
            similarity=report.rollout["similarity"],
            reward_source=report.rollout["reward_source"],
        )
    )
    return report


def stored_messages(messages: Sequence[Message]) -> list[dict]:
    """Messages as stored on the replay: each text capped, the cut marked."""
    stored = []
    for message in messages:
        data = message.to_dict()
        content = data["content"]
        if len(content) > STORED_CONTENT_CHARS:
            data["content"] = content[:STORED_CONTENT_CHARS]
            data["truncated"] = len(content)
        stored.append(data)
    return stored
