"""The newcomer's path: the demo, replayed by a real worker, walked in a browser.

The demo imports its recorded runs through the ingest command and replays them
through the real worker and sandbox; one reproduction of each verdict is then
opened from the queue (or its verdict filter) in Chromium.
"""

from __future__ import annotations

import os
import re

import pytest
from django.core.management import call_command

from replayhub.demo import packaged
from replayhub.demo.model_api import StandInProvider
from replayhub.demo.pkgindex import PackageIndex
from replayhub.models import EgressAttempt, Replay

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def standin(settings):
    """The demo's stand-in model API, as ``./dev run`` serves it."""
    with StandInProvider(key=os.environ["REPLAYHUB_DEMO_MODEL_KEY"]) as server:
        settings.REPLAYHUB_DEMO_MODEL_URL = server.base_url
        yield server


@pytest.fixture
def package_index(settings, tmp_path):
    """The demo's package index, as ``./dev run`` serves it."""
    packaged.write_demo_index(tmp_path)
    with PackageIndex(tmp_path) as index:
        settings.REPLAYHUB_DEMO_INDEX_URL = index.url
        yield index


def test_one_reproduction_of_each_verdict_opens_from_the_queue(
    celery_worker, admin_user, login, screenshot, capsys, standin, package_index
):
    call_command("demo", "--wait", "300")
    out = capsys.readouterr().out
    assert "replays finished: 18/18" in out
    assert "demo login: reviewer /" in out and "demo login: lead /" in out
    # The admin's login too, in the closing lines, not only 30 lines above.
    assert "admin login: " in out.rsplit("replays finished", 1)[1]
    assert "trends: " in out

    page = login(admin_user)
    page.goto("/")
    screenshot(page, "demo-queue")
    for verdict in ["identical", "equivalent", "divergent", "inconclusive"]:
        replay = Replay.objects.filter(verdict=verdict).order_by("id").first()
        assert replay is not None, f"the demo produced no {verdict} replay"
        page.goto(f"/?verdict={verdict}")
        # The row's link keeps the queue's filter (its next item comes from it).
        page.locator(f'a[href="/replays/{replay.pk}/?verdict={verdict}"]').click()
        page.wait_for_url(re.compile(rf"/replays/{replay.pk}/\?verdict={verdict}$"))
        heading = page.locator("h1").inner_text()
        assert verdict in heading.lower()
        assert replay.reason_code in page.content()
        screenshot(page, f"demo-{verdict}")

    # The replay whose agent asked the stand-in model shows what the gateway
    # measured and the host it was refused.
    with_model = Replay.objects.get(run__external_id="calc-015")
    assert with_model.verdict == "identical"
    page.goto(f"/replays/{with_model.pk}/")
    assert page.locator("#model-calls").is_visible()
    assert "pypi.org:443" in page.locator("#network").inner_text()
    screenshot(page, "demo-model-calls")

    # The second project's tests import a package the host lacks: its setup
    # phase built the environment once, and the other replays reused it.
    env_replays = Replay.objects.filter(project__slug=packaged.SLUG).order_by("id")
    assert {r.run.external_id: r.verdict for r in env_replays} == {
        "env-001": "equivalent",
        "env-002": "identical",
        "env-003": "divergent",
    }
    cached = sorted(r.evidence["environment"]["cached"] for r in env_replays)
    assert cached == [False, True, True]
    built = next(r for r in env_replays if not r.evidence["environment"]["cached"])
    assert EgressAttempt.objects.filter(
        replay=built, phase="setup", allowed=True, port=package_index.port
    ).exists()
    page.goto(f"/replays/{built.pk}/")
    assert "built for this replay" in page.locator("#environment").inner_text()
    screenshot(page, "demo-environment")

    page.goto("/trends/")
    assert "No rollups" not in page.content()
    screenshot(page, "demo-trends")

    # Running the demo again duplicates nothing.
    call_command("demo", "--wait", "0")
    assert Replay.objects.count() == 18
