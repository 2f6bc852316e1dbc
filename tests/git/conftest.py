"""A project repository and a replay's scratch directory over it, for the
tests of ``git.scratch`` and what captures through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from replayhub.git.scratch import Scratch
from tests.gitrepos import Executable, Repo, make_repo

BASE_FILES = {
    "README.md": "readme\n",
    "src/app.py": "def main():\n    return 1\n",
    "src/util.py": "def helper():\n    return 2\n",
    "docs/guide.md": "guide\n",
    "run.sh": Executable("#!/bin/sh\necho run\n"),
}


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path, BASE_FILES)


@pytest.fixture
def scratch(tmp_path: Path, repo: Repo):
    scratch = Scratch(tmp_path / "replay", repo.path)
    yield scratch
    scratch.remove()


def ls_tree(scratch: Scratch, tree: str) -> dict[str, tuple[str, str]]:
    """path -> (mode, blob text or gitlink sha) for every entry of a tree."""
    out = scratch.git("ls-tree", "-r", "-z", tree).stdout.decode()
    entries = {}
    for line in filter(None, out.split("\0")):
        meta, path = line.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob":
            sha = scratch.git("cat-file", "blob", sha).stdout.decode()
        entries[path] = (mode, sha)
    return entries
