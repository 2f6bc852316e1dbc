"""The demo's second project: a calculator whose tests need a package that is
not on the host.

Its setup phase makes a virtualenv in ``$REPLAYHUB_ENV_DIR`` and installs
``greetlib`` from the demo's package index (served on the worker's loopback by
``manage.py demo_model``, reached through the egress proxy), so a newcomer
sees the environment built by the first replay and reused by the others.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from replayhub.demo.calculator import AGENT, BAD, GOOD, STUB
from replayhub.demo.pkgindex import pure_wheel, write_index
from replayhub.git.scratch import GitOptions, git

SLUG = "demo-env"
PACKAGE = "greetlib"
VERSION = "1.0"
WHEEL = f"{PACKAGE}-{VERSION}-py3-none-any.whl"
GREETLIB = 'def greet(name):\n    return "hello " + name\n'

SETUP = """#!/bin/sh
# The project's setup phase: a virtualenv with its dependencies.
set -e
python3 -m venv "$REPLAYHUB_ENV_DIR"
"$REPLAYHUB_ENV_DIR/bin/pip" install --no-cache-dir --disable-pip-version-check \\
    -r requirements.txt
"""

TESTS = """import unittest

import greetlib

from calc import add


class AddTests(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_add_negative(self):
        self.assertEqual(add(-2, -3), -5)

    def test_greeting(self):
        self.assertEqual(greetlib.greet(str(add(1, 1))), "hello 2")


if __name__ == "__main__":
    unittest.main()
"""

# (external id, title, agent mode, recorded original)
RUNS = [
    ("env-001", "Implement add() (tests need greetlib)", "other", "good"),
    ("env-002", "Implement add() again (tests need greetlib)", "same", "good"),
    ("env-003", "Implement add() with a bug (tests need greetlib)", "bad", "good"),
]


COMMITS = {"base": "main", "good": "agent/good", "broken": "agent/broken"}


def index_port(index_url: str) -> int:
    url = urlsplit(index_url)
    if url.hostname != "127.0.0.1" or not url.port:
        raise ValueError("the demo's index URL must be http://127.0.0.1:PORT/simple/")
    return url.port


def write_demo_index(root: Path) -> None:
    """The demo's package index: one wheel, ``greetlib``."""
    wheel = pure_wheel(PACKAGE, VERSION, {f"{PACKAGE}/__init__.py": GREETLIB})
    write_index(root, {WHEEL: wheel})


def build_repository(path: Path, index_url: str) -> dict[str, str]:
    """Create (or reopen) the repository; returns the named commits."""
    git_dir = path / ".git"
    options: GitOptions = {"git_dir": git_dir, "work_tree": path}

    def rev(ref: str) -> str:
        return git("rev-parse", "--verify", ref, **options).stdout.decode().strip()

    def commit(message: str) -> None:
        git("add", "--all", **options)
        git("commit", "--quiet", "-m", message, **options)

    if not git_dir.exists():
        path.mkdir(parents=True, exist_ok=True)
        git("init", "--quiet", "--template=", "--initial-branch=main", str(path))
        files = {
            "README.md": "A tiny calculator whose tests need greetlib.\n",
            "calc.py": STUB,
            "test_calc.py": TESTS,
            "agent.sh": AGENT,
            "setup.sh": SETUP,
            "requirements.txt": f"--index-url {index_url}\n{PACKAGE}=={VERSION}\n",
        }
        for name, content in files.items():
            (path / name).write_text(content)
        for name in ("agent.sh", "setup.sh"):
            (path / name).chmod(0o755)
        commit("Calculator skeleton, with greetlib for its tests")
        for branch, content in (("agent/good", GOOD), ("agent/broken", BAD)):
            git("checkout", "--quiet", "-b", branch, "main", **options)
            (path / "calc.py").write_text(content)
            commit("Implement add")
        git("checkout", "--quiet", "main", **options)
    return {
        "base": rev("main"),
        "good": rev("agent/good"),
        "broken": rev("agent/broken"),
    }


def project_fields(repo: Path, index_url: str) -> dict:
    return {
        "name": "Demo calculator with an environment",
        "repo_path": str(repo),
        "test_command": ["python3", "-m", "unittest", "-v"],
        "agent_command": ["sh", "agent.sh"],
        "allowed_paths": ["calc.py", "test_*.py"],
        "setup_command": ["sh", "setup.sh"],
        "egress_setup": [f"127.0.0.1:{index_port(index_url)}"],
        # The setup phase (a virtualenv and one install) runs under it too.
        "time_limit_seconds": 120,
        "test_time_limit_seconds": 30,
        "memory_limit_mb": 512,
        "max_attempts": 1,
    }


def records(commits: dict[str, str]) -> list[dict]:
    return [
        {
            "project": SLUG,
            "external_id": external_id,
            "title": title,
            "prompt": f"{mode}\n\n{title}. Make the tests in test_calc.py pass.",
            "provider": "acme",
            "model": "coder-large",
            "original_commit": commits[original],
            "original_branch": f"agent/{original}",
            "original_tests_passed": True,
            "base_sha": commits["base"],
            "sandbox": {"image": "python:3.11-slim", "config_sha256": "0" * 64},
            "started_at": f"2026-11-{20 + i:02d}T02:00:00+00:00",
            "output": f"Agent finished task {external_id}.",
            "usage": {"input_tokens": 2000, "output_tokens": 400, "turns": 3},
        }
        for i, (external_id, title, mode, original) in enumerate(RUNS)
    ]
