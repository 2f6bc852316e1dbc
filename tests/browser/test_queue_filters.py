"""The queue's filters in a real Chromium: Enter in "Model" asks once (one
history entry), and Back shows in the filter boxes the filters the rows are
filtered by."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.factories import make_replay

pytestmark = pytest.mark.browser


@pytest.fixture
def queued(db):
    return {
        "gpt": make_replay(verdict="divergent", model="gpt-5", title="GPT task"),
        "claude": make_replay(
            verdict="inconclusive", model="claude-x", title="Claude task"
        ),
    }


def model_box(page):
    return page.get_by_role("searchbox", name="Model")


def rows(page):
    return page.locator("#queue-rows tr.row")


def test_enter_in_model_asks_once_and_back_restores_the_filter_boxes(
    login, reviewer, queued
):
    page = login(reviewer)
    page.goto("/")
    expect(rows(page)).to_have_count(2)
    asked = []
    page.on(
        "request",
        lambda request: (
            asked.append(request.url) if request.headers.get("hx-request") else None
        ),
    )
    start = page.evaluate("history.length")

    model = model_box(page)
    model.fill("gpt-5")
    model.press("Enter")

    expect(rows(page)).to_have_count(1)
    expect(rows(page)).to_contain_text("GPT task")
    # A second request would come within moments of the first.
    page.wait_for_timeout(500)
    assert len(asked) == 1, asked
    assert "model=gpt-5" in page.url
    assert page.evaluate("history.length") == start + 1

    # A second filter, then Back: the rows and the boxes agree again.
    page.locator("form.filters select[name=verdict]").select_option("inconclusive")
    expect(rows(page)).to_have_count(0)
    page.go_back()
    expect(rows(page)).to_have_count(1)
    expect(rows(page)).to_contain_text("GPT task")
    expect(model_box(page)).to_have_value("gpt-5")
    verdict = page.locator("form.filters select[name=verdict]")
    expect(verdict).not_to_have_value("inconclusive")

    # Back once more: no filter, every row, empty boxes.
    page.go_back()
    expect(rows(page)).to_have_count(2)
    expect(model_box(page)).to_have_value("")


def test_a_select_then_filter_pushes_one_history_entry(login, reviewer, queued):
    page = login(reviewer)
    page.goto("/")
    expect(rows(page)).to_have_count(2)
    start = page.evaluate("history.length")

    page.locator("form.filters select[name=verdict]").select_option("divergent")
    expect(rows(page)).to_have_count(1)
    page.get_by_role("button", name="Filter").click()
    page.wait_for_timeout(500)
    assert page.evaluate("history.length") == start + 1

    # One Back is enough to leave the filter.
    page.go_back()
    expect(rows(page)).to_have_count(2)
