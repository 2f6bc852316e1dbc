"""What the tests of registering a project share: an empty git repository."""

from __future__ import annotations

import subprocess

import pytest


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path
