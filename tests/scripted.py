"""A small real project and a deterministic scripted agent, for end-to-end replays.

The project is ``calc.py`` with a unittest suite. At the base, ``add`` is a stub
and its test fails; the original agent run fixed it. The agent committed at the
base (``agent.sh``) reads its prompt and does what the prompt names, so each test
can make a replay land on a chosen row of the verdict table.
"""

from __future__ import annotations

from pathlib import Path

from replayhub.demo.calculator import AGENT, STUB, TESTS
from replayhub.models import Project, Run
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
