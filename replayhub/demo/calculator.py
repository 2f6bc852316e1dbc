"""The demo project: a small calculator repository and a deterministic agent.

``add`` is a stub at the base and its unittest suite fails; the recorded
original runs fixed it. The agent committed at the base (``agent.sh``) reads its
prompt and does what the prompt's first word names, so each recorded run lands
on a chosen row of the verdict table when it is replayed. The tests use the
same project.
"""

from __future__ import annotations

STUB = "def add(a, b):\n    raise NotImplementedError\n"
GOOD = "def add(a, b):\n    return a + b\n"
OTHER_GOOD = "def add(a, b):\n    return sum((a, b))\n"
BAD = "def add(a, b):\n    return a - b\n"
OTHER_BAD = "def add(a, b):\n    return a * b\n"

TESTS = """import unittest

from calc import add


class AddTests(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_add_negative(self):
        self.assertEqual(add(-2, -3), -5)


if __name__ == "__main__":
    unittest.main()
"""

AGENT = r"""#!/bin/sh
# Scripted agent: the prompt's first word says what to do.
mode=$(head -n 1 "$REPLAYHUB_PROMPT_FILE" | cut -d' ' -f1)
echo "agent task $REPLAYHUB_TASK_ID mode $mode"
good='def add(a, b):
    return a + b'
other='def add(a, b):
    return sum((a, b))'
bad='def add(a, b):
    return a - b'
case "$mode" in
  same) printf '%s\n' "$good" > calc.py ;;
  other) printf '%s\n' "$other" > calc.py ;;
  bad) printf '%s\n' "$bad" > calc.py ;;
  outside) printf '%s\n' "$other" > calc.py; echo leaked > notes.txt ;;
  notests) printf '%s\n' "$other" > calc.py; echo 'import unittest' > test_calc.py ;;
  flaky) cat > calc.py <<'EOF'
import os

# Wrong in about half of the processes that import it, like a race would be.
_WRONG = os.urandom(1)[0] % 2 == 0


def add(a, b):
    return a - b if _WRONG else a + b
EOF
         ;;
  weaken) printf '%s\n' "$bad" > calc.py
          cat > test_calc.py <<'EOF'
import unittest

from calc import add


class AddTests(unittest.TestCase):
    def test_add(self):
        self.assertIsInstance(add(2, 3), int)
EOF
          ;;
  droptests) printf '%s\n' "$bad" > calc.py; rm -f test_calc.py ;;
  deloldtest) printf '%s\n' 'def add(a, b):' '    return abs(a) + abs(b)' > calc.py
          python3 - <<'EOF'
import pathlib
p = pathlib.Path("test_calc.py")
s = p.read_text()
start = s.index("    def test_add_negative")
end = s.index("\n\n", start) + 1
p.write_text(s[:start] + s[end:].lstrip("\n"))
EOF
          ;;
  owntests) printf '%s\n' "$other" > calc.py
          cat > test_calc.py <<'EOF'
import unittest

from calc import add


class SumTests(unittest.TestCase):
    def test_sum_of_two(self):
        self.assertEqual(add(1, 1), 2)

    def test_zero(self):
        self.assertEqual(add(0, 7), 7)
EOF
          ;;
  sometimes) # Right with the probability the prompt names, drawn afresh for
             # each replay from its task and sample number: repeatable.
             p=$(head -n 1 "$REPLAYHUB_PROMPT_FILE" | cut -d' ' -f2)
             if python3 -c "import os, random, sys
seed = os.environ['REPLAYHUB_TASK_ID'] + ':' + os.environ['REPLAYHUB_SAMPLE']
sys.exit(random.Random(seed).random() >= float(sys.argv[1]))" "$p"
             then printf '%s\n' "$good" > calc.py
             else printf '%s\n' "$bad" > calc.py
             fi ;;
  exitearly) cat > calc.py <<'EOF'
import os
import sys

sys.stderr.write("Ran 2 tests in 0.001s\n\nOK\n")
os._exit(0)


def add(a, b):
    return a * b
EOF
          ;;
  model|chatty|persist) MODE=$mode python3 - <<'EOF'
import json
import os
import re
import time
import urllib.request

# A real agent would loop; these calls show the way out of the sandbox.
prompt = open(os.environ["REPLAYHUB_PROMPT_FILE"]).read()
body = {
    "model": os.environ.get("REPLAYHUB_MODEL") or "stand-in",
    "max_tokens": 512,
    "messages": [{"role": "user", "content": prompt}],
}
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=json.dumps(body).encode(),
    headers={
        "x-api-key": os.environ["ANTHROPIC_API_KEY"],
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    },
)
text = ""
# "persist" retries a refused call for a minute, as agents with backoff do.
persist = os.environ["MODE"] == "persist"
until = time.monotonic() + 60
for _ in range(3 if os.environ["MODE"] == "chatty" else 1000 if persist else 1):
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as error:
        print("model refused:", error.code, error.read().decode()[:300])
        if persist and time.monotonic() < until:
            time.sleep(0.5)
            continue
        break
    text = "".join(part.get("text", "") for part in answer["content"])
    print("model answered", answer.get("model"), answer.get("usage"))
code = re.search(r"```(?:python)?\n(.*?)```", text, re.S)
if code:
    open("calc.py", "w").write(code.group(1))
# One more host, which the egress proxy refuses unless the project allows it.
try:
    urllib.request.urlopen("https://pypi.org/simple/", timeout=10)
except Exception as error:
    print("pypi.org:", error)
EOF
         ;;
  direct) port=$(head -n 1 "$REPLAYHUB_PROMPT_FILE" | cut -d' ' -f2)
          python3 -c "import socket, sys
socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)" "$port" \
            && echo "direct connection: reached" || echo "direct connection: failed"
          printf '%s\n' "$good" > calc.py ;;
  flood) count=$(head -n 1 "$REPLAYHUB_PROMPT_FILE" | cut -d' ' -f2)
         python3 -c "import os, socket, sys
# CONNECTs the proxy refuses, in a loop, as a hostile agent would send.
port = int(os.environ['HTTPS_PROXY'].rsplit(':', 1)[1])
for n in range(int(sys.argv[1])):
    with socket.create_connection(('127.0.0.1', port), timeout=5) as s:
        s.sendall(b'CONNECT host%d.example:443 HTTP/1.1\\r\\n\\r\\n' % (n % 7))
        s.recv(256)" "$count"
         printf '%s\n' "$good" > calc.py ;;
  usage) printf '%s\n' "$other" > calc.py
         echo '{"input_tokens": 1200, "output_tokens": 300,' \
              '"cost_usd": 0.42, "turns": 3}' > "$REPLAYHUB_USAGE_FILE" ;;
  env) env; for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f"; done
       printf '%s\n' "$good" > calc.py ;;
  nul) printf 'agent says a\000b\n'; printf '%s\n' "$other" > calc.py ;;
  nultests) printf '%s\n' "$other" > calc.py
          cat > test_nul.py <<'EOF'
import sys
import unittest

sys.stdout.write("imported a\x00b\n")


class NulTests(unittest.TestCase):
    def test_nul_message(self):
        self.fail("expected a\x00b")
EOF
          ;;
  badname) printf '%s\n' "$other" > calc.py
           printf 'import unittest\n' > "$(printf 'test_\377.py')" ;;
  hugeusage) printf '%s\n' "$other" > calc.py
             echo '{"input_tokens": 9223372036854775807, "output_tokens": 300,' \
                  '"cost_usd": 1e15, "turns": 3}' > "$REPLAYHUB_USAGE_FILE" ;;
  manyfiles) count=$(head -n 1 "$REPLAYHUB_PROMPT_FILE" | cut -d' ' -f2)
             printf '%s\n' "$other" > calc.py
             python3 -c "import os, sys
os.mkdir('many')
for i in range(int(sys.argv[1])):
    open(f'many/{i}', 'w').close()" "$count" ;;
  nothing) ;;
  crash) echo "agent crashed" >&2; exit 3 ;;
  sleep) sleep 60 ;;
  hog) python3 -c 'x = bytearray(1024 * 1024 * 1024); print(len(x))' ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
"""

# (external id, title, prompt, model, original, base recorded?, recorded tests)
# "original" names the recorded write-back: good / broken on their own branches,
# "on-main" committed straight onto main (so no fork point can be found).
RUNS = [
    ("calc-001", "Implement add()", "same", "coder-large", "good", True, True),
    (
        "calc-002",
        "Implement add() another way",
        "other",
        "coder-large",
        "good",
        True,
        True,
    ),
    (
        "calc-003",
        "Implement add(), second try",
        "other",
        "coder-small",
        "good",
        True,
        True,
    ),
    (
        "calc-004",
        "Implement add() with a bug",
        "bad",
        "coder-small",
        "good",
        True,
        True,
    ),
    (
        "calc-005",
        "Implement add() and leave notes",
        "outside",
        "coder-large",
        "good",
        True,
        True,
    ),
    (
        "calc-006",
        "Implement add() after a direct push",
        "same",
        "coder-small",
        "on-main",
        False,
        True,
    ),
    ("calc-007", "Implement add() slowly", "sleep", "coder-large", "good", True, True),
    (
        "calc-008",
        "Implement add() and drop the tests",
        "notests",
        "coder-small",
        "good",
        True,
        True,
    ),
    ("calc-009", "Repair a broken add()", "other", "coder-large", "broken", True, True),
    (
        "calc-010",
        "Implement add() with a flaky suite",
        "flaky",
        "coder-small",
        "good",
        True,
        True,
    ),
    (
        "calc-011",
        "Fix add() where the original failed",
        "other",
        "coder-large",
        "broken",
        True,
        False,
    ),
    ("calc-012", "Implement add() again", "same", "coder-small", "good", True, True),
    (
        "calc-013",
        "Implement add() and weaken its tests",
        "weaken",
        "coder-small",
        "good",
        True,
        True,
    ),
    (
        "calc-014",
        "Implement add() with tests of its own",
        "owntests",
        "coder-large",
        "good",
        True,
        True,
    ),
    (
        "calc-015",
        "Implement add() with a model's help",
        "model",
        "coder-large",
        "good",
        True,
        True,
    ),
]

# The stand-in model API repeats the prompt, so a prompt for it carries the
# answer a real model would give.
STAND_IN_NOTE = (
    "\n\n(The demo's model is a stand-in that answers by repeating this prompt, "
    "so the answer is written here:)\n```python\n" + GOOD + "```\n"
)


def build_repository(path) -> dict[str, str]:
    """Create (or reopen) the demo repository; returns the named commits."""
    from pathlib import Path

    from replayhub.git.scratch import git

    path = Path(path)
    git_dir = path / ".git"
    options = {"git_dir": git_dir, "work_tree": path}

    def rev(ref: str) -> str:
        return git("rev-parse", "--verify", ref, **options).stdout.decode().strip()

    if not git_dir.exists():
        path.mkdir(parents=True, exist_ok=True)
        git("init", "--quiet", "--template=", "--initial-branch=main", str(path))
        files = {
            "README.md": "A tiny calculator, changed by agents.\n",
            "calc.py": STUB,
            "test_calc.py": TESTS,
            "agent.sh": AGENT,
        }
        for name, content in files.items():
            (path / name).write_text(content)
        (path / "agent.sh").chmod(0o755)

        def commit(message: str) -> None:
            git("add", "--all", **options)
            git("commit", "--quiet", "-m", message, **options)

        commit("Calculator skeleton")
        for branch, content in (("agent/good", GOOD), ("agent/broken", BAD)):
            git("checkout", "--quiet", "-b", branch, "main", **options)
            (path / "calc.py").write_text(content)
            commit("Implement add")
        git("checkout", "--quiet", "main", **options)
        (path / "calc.py").write_text(GOOD)
        commit("Implement add (pushed straight to main)")
    return {
        "base": rev("main~1"),
        "good": rev("agent/good"),
        "broken": rev("agent/broken"),
        "on-main": rev("main"),
    }


def records(commits: dict[str, str]) -> list[dict]:
    """The recorded original runs, as native run records."""
    out = []
    for i, (
        external_id,
        title,
        prompt,
        model,
        original,
        with_base,
        passed,
    ) in enumerate(RUNS):
        record = {
            "project": "demo",
            "external_id": external_id,
            "title": title,
            "prompt": f"{prompt}\n\n{title}. Make the tests in test_calc.py pass."
            + (STAND_IN_NOTE if prompt == "model" else ""),
            "provider": "acme",
            "model": model,
            "effort": "medium",
            "original_commit": commits[original],
            "original_branch": "main" if original == "on-main" else f"agent/{original}",
            "original_tests_passed": passed,
            "sandbox": {"image": "python:3.11-slim", "config_sha256": "0" * 64},
            "started_at": f"2026-11-{1 + i:02d}T02:00:00+00:00",
            "output": f"Agent finished task {external_id}.",
            "usage": {
                "input_tokens": 1800 + 10 * i,
                "output_tokens": 400,
                "cost_usd": 0.02,
                "turns": 3,
            },
        }
        if with_base:
            record["base_sha"] = commits["base"]
        out.append(record)
    return out
