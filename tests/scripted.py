"""A small real project and a deterministic scripted agent, for end-to-end replays.

The project is ``calc.py`` with a unittest suite. At the base, ``add`` is a stub
and its test fails; the original agent run fixed it. The agent committed at the
base (``agent.sh``) reads its prompt and does what the prompt names, so each test
can make a replay land on a chosen row of the verdict table.
"""

from __future__ import annotations

from pathlib import Path

from replayhub.demo.calculator import AGENT, STUB, TESTS
from tests.gitrepos import Executable, Repo, make_repo


def make_project_repo(tmp_path: Path) -> Repo:
    repo = make_repo(
        tmp_path,
        {
            "calc.py": STUB,
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
