"""The trends dashboard in a real Chromium: it renders, it is legible, filters work."""

from __future__ import annotations

import random
from datetime import date, timedelta

import pytest
from django.db import transaction
from playwright.sync_api import expect

from reviews.trends.rollups import refresh_totals
from tests.factories import make_project
from tests.reviews.trends import data

pytestmark = pytest.mark.browser

LAST = date(2026, 2, 20)
ONERROR = '<img src=x onerror="window.__pwned=1">'


# One transaction for the few thousand rows: on PostgreSQL a commit each made
# seeding twice as slow.
@transaction.atomic
def seed_nights():
    """Twelve weeks of three projects, the last night of "shop" going bad."""
    noise = random.Random(7)
    shop, billing, search = (
        make_project("shop"),
        make_project("billing"),
        make_project("search"),
    )
    streams = [
        (shop, "gpt-5", 120, {"timeout": 0.04, "flaky_tests": 0.03, "no_change": 0.01}),
        (shop, "claude-opus-4", 80, {"timeout": 0.03, "flaky_tests": 0.04}),
        (billing, "gpt-5", 60, {"tests_not_run": 0.03, "worker_lost": 0.01}),
        (search, ONERROR, 40, {"below_evidence_floor": 0.05, "timeout": 0.02}),
    ]
    for i in range(84, -1, -1):
        day = LAST - timedelta(days=i)
        for item, model, volume, rates in streams:
            attempted = volume + noise.randint(-12, 12)
            # Binomial draws: a steady harness, as a p-chart expects one.
            by_reason = {
                reason: sum(noise.random() < rate for _ in range(attempted))
                for reason, rate in rates.items()
            }
            if i == 0 and item is shop:
                by_reason["baseline_failed"] = 31 if model == "gpt-5" else 9
            decided = noise.randint(2, 6)
            data.rollup(
                item,
                day,
                attempted=attempted,
                by_reason={k: v for k, v in by_reason.items() if v},
                model=model,
                confirmed={"equivalent": decided, "divergent": decided // 2},
                overturned={"equivalent": noise.randint(0, 1), "divergent": 1},
                totals=False,
            )
        for item in (shop, billing):
            deferred = noise.choice([0, 0, 0, 2, 5]) + (14 if i in (9, 10) else 0)
            data.rollup(
                item,
                day,
                attempted=0,
                by_reason={},
                model="",
                deferred=deferred,
                totals=False,
            )
    # The nights' all-projects totals, summed once for the twelve weeks.
    refresh_totals(LAST - timedelta(days=84), LAST)


def test_a_lead_reads_the_trends_in_chromium_and_sees_what_drove_last_night(
    login, lead, screenshot
):
    seed_nights()
    page = login(lead)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto("/trends/?since=2025-12-27&until=2026-02-20")

    banner = page.locator(".trend-alarm")
    assert banner.is_visible()
    assert "Out of control" in banner.inner_text()
    assert "Fri 20 Feb 2026" in banner.inner_text()
    assert "Original fails in sandbox" in banner.inner_text()
    assert "baseline_failed" in banner.inner_text()
    charts = page.locator("svg.chart")
    assert charts.count() == 6
    for i in range(charts.count()):
        box = charts.nth(i).bounding_box()
        assert box["width"] > 400 and box["height"] > 60
    # The out-of-control night is ringed on the p-chart, and its row is marked.
    assert page.locator("#c-control circle.ooc").count() >= 1
    assert (
        page.locator("#table-control tr.ooc")
        .first.inner_text()
        .startswith("2026-02-20")
    )
    # At this width the tables sit beside their charts, except the wide table
    # of reasons, which goes below its chart; nothing overflows the page.
    chart_box = page.locator("#c-reasons").bounding_box()
    table_box = page.locator("#table-reasons").bounding_box()
    assert table_box["y"] > chart_box["y"] + chart_box["height"] - 1
    chart_box = page.locator("#c-control").bounding_box()
    table_box = page.locator("#table-control").bounding_box()
    assert table_box["x"] > chart_box["x"] + chart_box["width"] - 1
    assert page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )
    # A model name from a record is shown as text, never run.
    assert page.evaluate("window.__pwned") is None
    assert errors == []
    screenshot(page, "trends")

    # At 1024 px the p-chart takes the card's width, its table below it,
    # rather than shrink beside the table: its axis text stays readable.
    page.set_viewport_size({"width": 1024, "height": 800})
    assert page.locator("#c-control").bounding_box()["width"] >= 700
    heights = page.locator("#c-control text").evaluate_all(
        "texts => texts.map(t => t.getBoundingClientRect().height)"
    )
    assert heights and min(heights) >= 10, heights
    page.set_viewport_size({"width": 1440, "height": 900})

    # Filtering swaps the results in place and keeps the filter in the URL.
    page.select_option("select[name=project]", "billing")
    expect(page.locator(".trends-scope")).to_contain_text("project billing")
    page.wait_for_url("**project=billing**")
    # Billing's harness was fine that night: no banner names baseline_failed.
    assert "baseline_failed" not in page.locator("#trends-results").inner_text()
    assert page.locator("#table-control tr.ooc", has_text="2026-02-20").count() == 0
    csv_link = page.locator(".exports a", has_text="CSV")
    assert "project=billing" in csv_link.get_attribute("href")
    assert errors == []


def test_a_reviewer_is_refused_the_trends_page(login, reviewer):
    page = login(reviewer)
    response = page.goto("/trends/")
    assert response.status == 403


def test_the_empty_dashboard_tells_a_newcomer_what_to_run(login, lead, screenshot):
    page = login(lead)
    page.goto("/trends/")
    empty = page.locator(".trends-empty")
    assert empty.is_visible()
    assert "manage.py rollup --since" in empty.inner_text()
    screenshot(page, "trends-empty")


WORDS_SPLIT = """table => [...table.querySelectorAll("thead th")].flatMap(th => {
  const split = [];
  const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
      if (lines.size > 1) split.push(match[0]);
    }
  }
  return split;
})"""


def test_at_1024_the_reasons_table_breaks_its_headings_between_words(login, lead):
    # That module imports this one's seed_nights.
    from tests.browser.test_wide_screens import CLIPPED_TABLES

    seed_nights()
    page = login(lead)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto("/trends/?since=2025-12-27&until=2026-02-20")
    table = page.locator("#table-reasons")
    assert table.locator("thead th").count() >= 10
    assert table.evaluate(WORDS_SPLIT) == []
    assert page.evaluate(f"({CLIPPED_TABLES})()") == []


def test_at_1024_an_overturn_rate_of_100_percent_is_read_whole(login, lead):
    data.rollup(
        make_project("shop"),
        LAST,
        attempted=4,
        by_reason={},
        confirmed={"equivalent": 1},
        overturned={"identical": 1},
    )
    page = login(lead)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/trends/?since={LAST}&until={LAST}")
    card = page.locator("section.trend-card", has=page.locator("#t-overturns"))
    note = card.locator("svg.chart text.value", has_text="100.0% · 1 of 1 decided")
    expect(note).to_have_count(1)
    # Inside the chart's drawing and inside its card, not cut at either edge.
    cut = note.evaluate(
        """t => { const r = t.getBoundingClientRect();
          return [t.closest('svg'), t.closest('section')].filter(box => {
            const b = box.getBoundingClientRect();
            return r.right > b.right + 0.5 || r.left < b.left - 0.5;
          }).map(box => box.tagName) }"""
    )
    assert cut == []
