"""The rollout environment's project with no commands of its own: each test's
task names the harness and the verifier it runs."""

from __future__ import annotations

import pytest

from tests.factories import make_rollout_project
from tests.harness import make_environment_repo


@pytest.fixture
def bare_rollout_project(tmp_path):
    return make_rollout_project(make_environment_repo(tmp_path))
