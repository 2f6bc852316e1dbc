from __future__ import annotations

import pytest

from tests.ingest.records import make_project, project_repo


@pytest.fixture
def repo(tmp_path):
    return project_repo(tmp_path)


@pytest.fixture
def project(db, repo):
    return make_project(repo)
