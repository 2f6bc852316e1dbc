"""A small real project and a deterministic scripted agent, for end-to-end replays.

The project is ``calc.py`` with a unittest suite. At the base, ``add`` is a stub
and its test fails; the original agent run fixed it. The agent committed at the
base (``agent.sh``) reads its prompt and does what the prompt names, so each test
can make a replay land on a chosen row of the verdict table.
"""

from __future__ import annotations

from pathlib import Path

from replayhub.models import Project, Run
from tests.engine.gitrepos import Executable, Repo, make_repo

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
  flaky) printf '%s\n' "$other" > calc.py;
         python3 - <<'EOF'
import pathlib
p = pathlib.Path("test_calc.py")
s = p.read_text().replace(
    "    def test_add(self):\n",
    "    def test_add(self):\n        import os\n"
    "        if os.environ.get('REPLAYHUB_TEST_ATTEMPT') == '1':\n"
    "            self.fail('flaked')\n", 1)
p.write_text(s)
EOF
         ;;
  usage) printf '%s\n' "$other" > calc.py
         echo '{"input_tokens": 1200, "output_tokens": 300,' \
              '"cost_usd": 0.42, "turns": 3}' > "$REPLAYHUB_USAGE_FILE" ;;
  env) env; for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f"; done
       printf '%s\n' "$good" > calc.py ;;
  nothing) ;;
  crash) echo "agent crashed" >&2; exit 3 ;;
  sleep) sleep 60 ;;
  hog) python3 -c 'x = bytearray(1024 * 1024 * 1024); print(len(x))' ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
"""


def make_project_repo(tmp_path: Path) -> Repo:
    repo = make_repo(
        tmp_path,
        {
            "calc.py": "def add(a, b):\n    raise NotImplementedError\n",
            "test_calc.py": TESTS,
            "agent.sh": Executable(AGENT),
        },
    )
    return repo


def original_commit(repo: Repo, calc: str, *, branch: str, tests: str = TESTS) -> str:
    """The original agent's write-back: one commit on its own branch off main."""
    repo.checkout("main")
    sha = repo.commit(
        {"calc.py": calc, "test_calc.py": tests}, "agent fix", branch=branch
    )
    repo.checkout("main")
    return sha


def make_project(repo: Repo, **overrides) -> Project:
    fields = {
        "slug": "calc",
        "repo_path": str(repo.path),
        "test_command": ["python3", "-m", "unittest", "-v"],
        "agent_command": ["sh", "agent.sh"],
        "allowed_paths": ["calc.py", "test_*.py"],
        "time_limit_seconds": 30,
        "memory_limit_mb": 512,
        **overrides,
    }
    return Project.objects.create(**fields)


def make_run(project: Project, *, prompt: str, original: str, base: str = "", **kw):
    return Run.objects.create(
        project=project,
        external_id=kw.pop("external_id", prompt.split()[0]),
        title=kw.pop("title", f"replay {prompt}"),
        prompt=prompt,
        original_commit=original,
        base_sha=base,
        **kw,
    )
