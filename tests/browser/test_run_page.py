"""A freshly recorded run replayed from its own page in a real Chromium:
Replay now and Replay from tape beside Replay as text, each queuing its
replay and opening it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub.models import Replay, Run
from tests.factories import make_project

pytestmark = pytest.mark.browser


@pytest.fixture
def recorded(db) -> Run:
    return Run.objects.create(
        project=make_project("shop"),
        external_id="20261202T093000Z-0a1b2c3d",
        title="Add a note",
        preflight="ready",
        original_commit="a" * 40,
        raw={"tape": [{"provider_kind": "openai", "path": "/v1/models"}]},
    )


def test_an_admin_replays_a_run_now_and_from_tape_from_its_page(
    login, admin_user, recorded
):
    page = login(admin_user)
    page.goto(f"/runs/{recorded.pk}/")
    actions = page.locator("#replay-actions")
    expect(actions.get_by_role("button")).to_have_text(
        ["Replay now", "Replay from tape"]
    )
    expect(actions.get_by_role("link", name="Replay as text")).to_be_visible()
    # Side by side: one row.
    tops = actions.locator("button, a").evaluate_all(
        "els => els.map(e => Math.round(e.getBoundingClientRect().top))"
    )
    assert max(tops) - min(tops) < 10, tops

    with page.expect_navigation(url=re.compile(r".*/replays/\d+/$")):
        actions.get_by_role("button", name="Replay now").click()
    expect(page.locator(".messages")).to_contain_text(
        f"of {recorded.external_id} queued"
    )
    page.goto(f"/runs/{recorded.pk}/")
    with page.expect_navigation(url=re.compile(r".*/replays/\d+/$")):
        page.get_by_role("button", name="Replay from tape").click()
    expect(page.locator(".messages")).to_contain_text("Tape replay")
    assert sorted(
        Replay.objects.filter(run=recorded).values_list("tier", flat=True)
    ) == [
        "agentic",
        "tape",
    ]
