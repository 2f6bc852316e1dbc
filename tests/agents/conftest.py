"""The agents' tests' fixtures: one scripted fake model per wire, the
package index the calc project's setup installs pytest from, each agent's
calc project as its live test left it, and the recorder as a user downloads
it."""

from __future__ import annotations

import pytest

from replayhub.demo.pkgindex import PackageIndex, write_index
from tests.agents import fakemodels
from tests.environments.test_pytest_project import DISTRIBUTIONS, installed_wheel
from tests.gitrepos import Repo
from tests.recorder.conftest import recorder  # noqa: F401 -- a fixture


@pytest.fixture(scope="session")
def index(tmp_path_factory):
    """One index for the session: the setup's settings name its port, so the
    live and the recorded tests of one agent can share an environment."""
    root = tmp_path_factory.mktemp("pytest-index")
    write_index(root, dict(installed_wheel(name) for name in DISTRIBUTIONS))
    with PackageIndex(root) as served:
        yield served


@pytest.fixture(scope="session")
def calc_projects() -> dict[str, tuple[Repo, str]]:
    """By agent, the calc repository and environment share group of its live
    test, once that test passed: the recorded test of the same agent (on the
    same test worker, ``groups.by_agent``) registers its project on them, so
    its replays find the environment built and install nothing again."""
    return {}


@pytest.fixture(scope="module")
def fakes():
    with (
        fakemodels.FakeModel(fakemodels.ANTHROPIC) as anthropic,
        fakemodels.FakeModel(fakemodels.RESPONSES) as responses,
        fakemodels.FakeModel(fakemodels.CHAT) as chat,
        fakemodels.FakeModel(fakemodels.GEMINI) as gemini,
    ):
        yield {
            fakemodels.ANTHROPIC: anthropic,
            fakemodels.RESPONSES: responses,
            fakemodels.CHAT: chat,
            fakemodels.GEMINI: gemini,
        }
