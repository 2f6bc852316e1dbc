"""The text tier's fixtures: the local stand-in for both provider APIs, the two
providers registered in front of it, and a recorded run to replay."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from replayhub.demo.model_api import StandInProvider
from replayhub.models import Project, Provider, Run

# The demo's key variable: tests/conftest.py sets it before any worker starts,
# so a worker process holds it the way it holds a real provider's key.
KEY_ENV = "REPLAYHUB_DEMO_MODEL_KEY"
PRICES = {
    "claude-test": {"input": "3", "output": "15"},
    "gpt-test": {"input": "2", "output": "8"},
}


@pytest.fixture
def text_settings(settings):
    settings.REPLAYHUB_TEXT_TIMEOUT_SECONDS = 1
    settings.REPLAYHUB_TEXT_RETRIES = 2
    settings.REPLAYHUB_TEXT_BACKOFF_MS = 10
    return settings


@pytest.fixture
def standin() -> Iterator[StandInProvider]:
    with StandInProvider(key=os.environ[KEY_ENV]) as server:
        yield server


@pytest.fixture
def providers(db, standin) -> dict[str, Provider]:
    """``claude`` (anthropic) and ``gpt`` (openai) in front of the stand-in."""
    return {
        "claude": Provider.objects.create(
            name="claude",
            kind="anthropic",
            base_url=standin.base_url,
            key_env=KEY_ENV,
            prices=PRICES,
        ),
        "gpt": Provider.objects.create(
            name="gpt",
            kind="openai",
            base_url=standin.base_url + "/v1",
            key_env=KEY_ENV,
            prices=PRICES,
        ),
    }


def make_run(
    project: Project | None = None,
    *,
    external_id: str = "run-1",
    prompt: str = "add a retry to the webhook sender",
    output: str = "add a retry to the webhook sender",
    **fields,
) -> Run:
    project = (
        project
        or Project.objects.get_or_create(
            slug="shop", defaults={"repo_path": "/srv/shop.git"}
        )[0]
    )
    values = {
        "title": f"Run {external_id}",
        "model": "claude-sonnet",
        "preflight": "ready",
        **fields,
    }
    return Run.objects.create(
        project=project, external_id=external_id, prompt=prompt, output=output, **values
    )


@pytest.fixture
def run(db) -> Run:
    return make_run()
