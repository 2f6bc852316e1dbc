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
- ``exit``: the exit status; ``sleep``: seconds to wait first;
- ``leave``: paths the model's "tool calls" write files at (the workspace and
  the result file's directory);
- ``forge``: after the harness wrote its result, a "tool call" (a shell the
  model ran) overwrites the result file with this reward.

The separate verifier (``verifier.py``) reads the order's ``verify`` object:

- ``reward``: the reward to write; else 1.0 when the completion's text
  contains ``expect`` (its own or the order's) and 0.0 when it does not; else
  the order's ``reward``, the score an honest harness gives;
- ``probe``: a host:port to open a connection to; ``look``: paths whose
  existence it reports; it also reports the proxy and model variables it has
  and whether it can write its inputs (all on its output);
- ``raw``, ``no_result``, ``exit``, ``sleep`` as the harness's.
"""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command

from tests.factories import make_rollout
from tests.gitrepos import Repo, make_repo

HARNESS = r"""
import json, os, subprocess, sys, time, urllib.request

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
    result = {"completion": answer}
    if not order.get("no_reward"):
        result["reward"] = reward
    json.dump(result, open(result_file, "w"))
for path in order.get("leave", []):
    open(path, "w").write("left by the harness phase")
if "forge" in order:
    # What a model whose tools run commands could do: its reward, written
    # over the harness's.
    forged = json.dumps({"completion": answer, "reward": order["forge"]})
    subprocess.run(
        ["sh", "-c", 'printf "%s" "$1" > "$REPLAYHUB_RESULT_FILE"', "sh", forged],
        check=True,
    )
print("harness done", file=sys.stderr)
sys.exit(order.get("exit", 0))
"""

VERIFIER = r"""
import json, os, socket, sys, time

seed = json.load(open(os.environ["REPLAYHUB_SEED_FILE"]))
completion = json.load(open(os.environ["REPLAYHUB_COMPLETION_FILE"]))
top = json.loads(seed[-1]["content"])
order = top.get("verify", {})
time.sleep(order.get("sleep", 0))
text = " ".join(m.get("content") or "" for m in completion)
if "probe" in order:
    host, port = order["probe"].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        print("probe: reached")
    except OSError as error:
        print(f"probe: unreachable ({error})")
for name in ("HTTP_PROXY", "HTTPS_PROXY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
    print(f"env {name}: {'set' if os.environ.get(name) else 'unset'}")
for path in order.get("look", []):
    print(f"look {path}: {'present' if os.path.exists(path) else 'absent'}")
try:
    open(os.environ["REPLAYHUB_COMPLETION_FILE"], "a").close()
    print("inputs: writable")
except OSError:
    print("inputs: read-only")
if "reward" in order:
    reward = order["reward"]
elif "expect" in order or "expect" in top:
    reward = 1.0 if order.get("expect", top.get("expect")) in text else 0.0
else:
    reward = top.get("reward")  # the score the harness means to give
result_file = os.environ["REPLAYHUB_RESULT_FILE"]
if "raw" in order:
    open(result_file, "w").write(order["raw"])
elif not order.get("no_result"):
    json.dump({"reward": reward}, open(result_file, "w"))
sys.exit(order.get("exit", 0))
"""


def make_environment_repo(tmp_path) -> Repo:
    return make_repo(tmp_path, {"harness.py": HARNESS, "verifier.py": VERIFIER})


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


# --- a rollout replayed whose seed and answer hold markup, for its page ----------

SCRIPT = "<script>window.__pwned=1</script>"
ONERROR = '<img src=x onerror="window.__pwned=1">'
LONG_LOG = "\n".join(f"line {n} of a long pytest log" for n in range(40))


def hostile_seed(**order):
    seed = seed_with(**order)
    seed[1]["content"] = f"Fix it {SCRIPT}"
    seed[2]["tool_calls"][0]["arguments"] = json.dumps({"command": f"echo {ONERROR}"})
    seed[3]["content"] = LONG_LOG
    return seed


def replayed(project, *, answer, reward=1.0, continuation=None, **order) -> int:
    make_rollout(
        project,
        external_id="5c1f0e9a",
        reward=1.0,
        seeds=[
            (
                hostile_seed(answer=answer, reward=reward, **order),
                continuation
                or [{"role": "assistant", "content": f"Used Decimal {ONERROR}"}],
                "",
            )
        ],
    )
    out = StringIO()
    call_command(
        "reproduce",
        "--project",
        "invoicer",
        "--external-id",
        "5c1f0e9a",
        "--sync",
        "--json",
        stdout=out,
    )
    return json.loads(out.getvalue())["replay"]
