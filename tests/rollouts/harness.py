"""A small rollout environment for tests: its harness and its repository.

The harness (``harness.py`` in the repository) reads the seed, continues it and
scores the continuation, as an environment's harness would. What it does is
named by the seed's last message, a JSON object:

- ``answer``: the completion (a string or a message list); ``reward``: its score;
- ``model``: ask the model (through ``$ANTHROPIC_BASE_URL``) instead, and score
  1.0 when its answer contains ``expect``;
- ``raw``: write these characters as the result file instead; ``no_result``:
  write none; ``link``: make the result file a link to this path;
- ``echo``: answer with this environment variable's value;
- ``exit``: the exit status; ``sleep``: seconds to wait first.
"""

from __future__ import annotations

import json

from replayhub.models import Project, Run, RunSource, Seed
from tests.engine.gitrepos import Repo, make_repo

HARNESS = r"""
import json, os, sys, time, urllib.request

seed = json.load(open(os.environ["REPLAYHUB_SEED_FILE"]))
order = json.loads(seed[-1]["content"])
time.sleep(order.get("sleep", 0))
result_file = os.environ["REPLAYHUB_RESULT_FILE"]
if order.get("model"):
    body = json.dumps({
        "model": os.environ.get("REPLAYHUB_MODEL") or "coder-large",
        "max_tokens": 64,
        "messages": [m for m in seed if m["role"] in ("user", "assistant")],
    }).encode()
    request = urllib.request.Request(
        os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
        data=body,
        headers={
            "x-api-key": os.environ["ANTHROPIC_API_KEY"],
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        },
    )
    reply = json.load(urllib.request.urlopen(request, timeout=20))
    text = "".join(block.get("text", "") for block in reply["content"])
    answer = [{"role": "assistant", "content": text}]
    reward = 1.0 if order["expect"] in text else 0.0
elif "echo" in order:
    answer, reward = os.environ.get(order["echo"], ""), order.get("reward")
else:
    answer, reward = order.get("answer"), order.get("reward")
if "raw" in order:
    open(result_file, "w").write(order["raw"])
elif "link" in order:
    os.symlink(order["link"], result_file)
elif not order.get("no_result"):
    json.dump({"completion": answer, "reward": reward}, open(result_file, "w"))
print("harness done", file=sys.stderr)
sys.exit(order.get("exit", 0))
"""


def make_environment_repo(tmp_path) -> Repo:
    return make_repo(tmp_path, {"harness.py": HARNESS})


def make_rollout_project(repo: Repo, **overrides) -> Project:
    fields = {
        "slug": "invoicer",
        "repo_path": str(repo.path),
        "time_limit_seconds": 30,
        "memory_limit_mb": 512,
        **overrides,
    }
    return Project.objects.create(**fields)


def seed_with(**order) -> list[dict]:
    """A seed whose last message tells the harness what to do."""
    return [
        {"role": "system", "content": "You fix invoices."},
        {"role": "user", "content": "Fix the rounding bug."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_a1", "name": "bash", "arguments": '{"command": "pytest"}'}
            ],
        },
        {"role": "tool", "tool_call_id": "call_a1", "content": "1 failed"},
        {"role": "user", "content": json.dumps(order)},
    ]


def make_rollout(project: Project, *, external_id: str, reward: float | None, seeds):
    """A rollout run with its seeds: (messages, continuation, completion) each."""
    run = Run.objects.create(
        project=project,
        external_id=external_id,
        source=RunSource.ROLLOUT,
        reward=reward,
        title="invoicer-rounding",
        model="coder-large",
        preflight="ready",
    )
    for number, (messages, continuation, completion) in enumerate(seeds, 1):
        Seed.objects.create(
            run=run,
            number=number,
            key=f"{external_id}:continue:tool-call@{number * 3}",
            kind="continue",
            anchor="tool-call",
            anchor_node=number * 3,
            messages=messages,
            continuation=continuation,
            original_completion=completion,
        )
    return run
