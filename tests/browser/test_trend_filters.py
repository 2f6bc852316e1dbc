"""The trends filters in a real Chromium: the boxes always show the filters
the charts are drawn for (Back and Forward too), a change asks once and pushes
one history entry, and dates apply on Enter or Show, never per keystroke."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from playwright.sync_api import expect

from tests.factories import make_project
from tests.reviews.trends import data

pytestmark = pytest.mark.browser

LAST = date(2026, 2, 20)
WINDOW = "/trends/?since=2026-02-01&until=2026-02-20"


@pytest.fixture
def nights(db):
    demo, other = make_project("demo"), make_project("other")
    for i in range(20):
        for item in (demo, other):
            data.rollup(item, LAST - timedelta(days=i), attempted=10, by_reason={})


def select(page, name):
    return page.locator(f"form.filters select[name={name}]")


def scope(page):
    return page.locator(".trends-scope")


def watch_requests(page):
    asked: list[str] = []
    page.on(
        "request",
        lambda request: (
            asked.append(request.url) if request.headers.get("hx-request") else None
        ),
    )
    return asked


def test_back_and_forward_show_in_the_selects_the_filters_of_the_charts(
    login, lead, nights
):
    page = login(lead)
    page.goto(WINDOW)
    select(page, "project").select_option("demo")
    expect(scope(page)).to_contain_text("project demo")
    select(page, "tier").select_option("agentic")
    expect(scope(page)).to_contain_text("live agentic replays only")

    page.go_back()
    expect(scope(page)).to_contain_text("every tier")
    expect(scope(page)).to_contain_text("project demo")
    assert "project=demo" in page.url and "tier=agentic" not in page.url
    expect(select(page, "project")).to_have_value("demo")
    expect(select(page, "tier")).to_have_value("")

    page.go_forward()
    expect(scope(page)).to_contain_text("live agentic replays only")
    expect(select(page, "project")).to_have_value("demo")
    expect(select(page, "tier")).to_have_value("agentic")

    # Show then keeps the filters shown rather than widening them.
    page.go_back()
    expect(select(page, "project")).to_have_value("demo")
    page.get_by_role("button", name="Show").click()
    page.wait_for_timeout(300)
    expect(scope(page)).to_contain_text("project demo")


def test_a_select_then_show_asks_once_and_pushes_one_history_entry(login, lead, nights):
    page = login(lead)
    page.goto(WINDOW)
    page.wait_for_load_state("networkidle")
    asked = watch_requests(page)
    start = page.evaluate("history.length")

    select(page, "project").select_option("demo")
    expect(scope(page)).to_contain_text("project demo")
    page.get_by_role("button", name="Show").click()
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(500)

    pages = [url for url in asked if "/trends/?" in url]
    assert len(pages) == 1, asked
    # The page, its reproducibility and its labels: one of each.
    assert len(asked) == 3, asked
    assert page.evaluate("history.length") == start + 1
    page.go_back()
    expect(scope(page)).to_contain_text("all projects")


def test_a_date_applies_on_enter_not_per_keystroke(login, lead, nights):
    page = login(lead)
    page.goto(WINDOW)
    page.wait_for_load_state("networkidle")
    asked = watch_requests(page)

    since = page.locator("form.filters input[name=since]")
    since.focus()
    # Month, day, then the year typed digit by digit.
    since.press_sequentially("02102026", delay=60)
    page.wait_for_timeout(500)
    assert asked == []
    expect(page.locator("#trends-results .error")).to_have_count(0)

    since.press("Enter")
    expect(scope(page)).to_contain_text("Tue 10 Feb 2026")
    assert "since=2026-02-10" in page.url
    page.wait_for_load_state("networkidle")
    assert len([url for url in asked if "/trends/?" in url]) == 1, asked
