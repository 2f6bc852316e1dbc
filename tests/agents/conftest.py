"""The agents' tests' fixtures: one scripted fake model per wire, the
package index the calc project's setup installs pytest from, and the
recorder as a user downloads it."""

from __future__ import annotations

import pytest

from tests.agents import fakemodels
from tests.environments.test_pytest_project import index  # noqa: F401 -- a fixture
from tests.recorder.conftest import recorder  # noqa: F401 -- a fixture


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
