"""A rollout replay's second phase: the project's verifier scores the completion.

The harness phase runs the model, and the model's tool calls run in the same
sandbox as the harness: whatever the harness writes, the model could have
written. So when the project names a ``verifier_command``, the replay's reward
is not the harness's but the verifier's, run here in a sandbox of its own:

- a fresh checkout of the same commit, in a scratch directory of its own (the
  harness's workspace and files are gone before it starts: nothing the harness
  phase wrote survives);
- no network at all: no gateway, no egress proxy, no model access;
- the seed and the completion as read-only files (``$REPLAYHUB_SEED_FILE``,
  ``$REPLAYHUB_COMPLETION_FILE``); the completion is the one ReplayHub read
  from the harness's result and normalised, written anew here;
- ``{"reward": …}`` written to its own ``$REPLAYHUB_RESULT_FILE``, read with
  the harness result's strict reader.

Every way it can fail (no result, a malformed one, a non-zero exit, its time
limit, a cap) is a ``VerifierFailed``, which the replay ends as
``inconclusive / verifier_failed``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replayhub.git.scratch import GitError, Scratch
from replayhub.models import Project
from replayhub.replay.workspace import agent_limits
from replayhub.rollouts.completions import Message
from replayhub.rollouts.result import ResultProblem, read_reward
from replayhub.sandbox import Bind, SandboxSpec

# Inside the verifier's sandbox: its inputs, read-only, and its own output.
INPUT_DIR = "/replayhub-input"
OUTPUT_DIR = "/replayhub"
SEED_FILE = "seed.json"
COMPLETION_FILE = "completion.json"
RESULT_FILE = "result.json"
# The verifier's output kept on the replay, from its end.
OUTPUT_CHARS = 16 * 1024

UNVERIFIED_WARNING = (
    "has a rollout harness but no separate verifier: its replays' rewards are "
    "written in the sandbox the model's tool calls run in, so none can be "
    "equivalent."
)


def rewards_unverified(project: Project) -> bool:
    """Whether ``project`` replays rollouts on its harness's own reward."""
    return bool(project.harness_command) and not project.verifier_command


class VerifierFailed(Exception):
    """The verifier produced no usable reward: ``detail`` says why, in one
    line; ``seconds`` is how long it ran in the sandbox."""

    def __init__(self, detail: str, seconds: float = 0.0) -> None:
        super().__init__(detail)
        self.detail = detail
        self.seconds = seconds


@dataclass(frozen=True)
class Scored:
    reward: float
    seconds: float


def score(
    *,
    project: Project,
    command: Sequence[str],
    commit: str,
    runner: Any,
    root: Path,
    seed: Sequence[dict],
    completion: Sequence[Message],
    env: dict[str, str],
    record: dict,
) -> Scored:
    """Run ``command`` on the completion in a fresh sandbox under ``root``
    (removed whatever happens). What it did goes into ``record``; its reward is
    returned, or ``VerifierFailed`` raised. ``SandboxUnavailable`` passes
    through."""
    # The harness's replay made sure of the mirror (and the commit) already.
    scratch = Scratch(root, project.repository())
    scratch.remove()  # a previous delivery of this replay may have left it behind
    try:
        return _score(
            project=project,
            command=command,
            commit=commit,
            runner=runner,
            scratch=scratch,
            seed=seed,
            completion=completion,
            env=env,
            record=record,
        )
    finally:
        scratch.remove()


def _score(
    *,
    project: Project,
    command: Sequence[str],
    commit: str,
    runner: Any,
    scratch: Scratch,
    seed: Sequence[dict],
    completion: Sequence[Message],
    env: dict[str, str],
    record: dict,
) -> Scored:
    try:
        workspace = scratch.provision(commit)
    except (GitError, OSError) as exc:
        raise VerifierFailed(
            f"its workspace could not be provisioned at {commit[:12]}: {exc}"
        ) from None
    inputs = scratch.root / "input"
    outputs = scratch.root / "output"
    inputs.mkdir()
    outputs.mkdir()
    (inputs / SEED_FILE).write_text(json.dumps(list(seed), ensure_ascii=False))
    (inputs / COMPLETION_FILE).write_text(
        json.dumps([message.to_dict() for message in completion], ensure_ascii=False)
    )
    limits = agent_limits(project, {"wall_seconds": project.test_time_limit})
    outcome = runner.run(
        SandboxSpec(
            argv=tuple(command),
            workspace=workspace,
            env={
                **env,
                "REPLAYHUB_SEED_FILE": f"{INPUT_DIR}/{SEED_FILE}",
                "REPLAYHUB_COMPLETION_FILE": f"{INPUT_DIR}/{COMPLETION_FILE}",
                "REPLAYHUB_RESULT_FILE": f"{OUTPUT_DIR}/{RESULT_FILE}",
            },
            limits=limits,
            # No network bind and no proxy: the sandbox's network is "none".
            binds=(
                Bind(inputs, INPUT_DIR, writable=False),
                Bind(outputs, OUTPUT_DIR, writable=True),
            ),
        )
    )
    output = outcome.output
    record.update(
        {
            "exit_code": outcome.exit_code,
            "timed_out": outcome.timed_out,
            "limit_fired": outcome.limit_fired or "",
            "duration_s": round(outcome.duration_s, 3),
            "output": output[-OUTPUT_CHARS:],
            "output_truncated": bool(outcome.output_truncated)
            or len(output) > OUTPUT_CHARS,
        }
    )
    seconds = outcome.duration_s
    if outcome.timed_out or outcome.limit_fired == "wall_time":
        raise VerifierFailed(
            f"it ran past its {limits.wall_seconds:g} s time limit", seconds
        )
    if outcome.limit_fired:
        raise VerifierFailed(
            f"it hit the {outcome.limit_fired.replace('_', ' ')} cap", seconds
        )
    if outcome.exit_code != 0:
        raise VerifierFailed(f"it exited with status {outcome.exit_code}", seconds)
    try:
        reward = read_reward(outputs / RESULT_FILE)
    except ResultProblem as problem:
        raise VerifierFailed(problem.detail, seconds) from None
    return Scored(reward=reward, seconds=seconds)
