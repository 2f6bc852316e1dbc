"""The scripted calculator project, for whole replays in the real sandbox."""

from __future__ import annotations

import pytest

from replayhub.demo.calculator import GOOD
from tests.engine.scripted import make_project, make_project_repo, original_commit


@pytest.fixture
def calc_repo(tmp_path):
    return make_project_repo(tmp_path)


@pytest.fixture
def calc_project(calc_repo):
    return make_project(calc_repo)


@pytest.fixture
def calc_base(calc_repo):
    return calc_repo.rev("main")


@pytest.fixture
def calc_good(calc_repo):
    return original_commit(calc_repo, GOOD, branch="agent/good")
