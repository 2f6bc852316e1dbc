"""The queue without a mouse: what only a tooltip told (the exact time a
replay finished, what "substantive" means, when a claim lapses) is read out
on every row and shown on the row the keyboard has chosen."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from replayhub.models import Comparison
from reviews.services import claim_take
from tests.factories import earlier_today, make_replay

pytestmark = pytest.mark.browser


def shown(row) -> int:
    """How many of the row's details take room on the screen."""
    return row.evaluate(
        "r => [...r.querySelectorAll('.row-detail')]"
        ".filter(d => d.getBoundingClientRect().width > 20).length"
    )


def choose(page, row) -> None:
    """Move the queue's choice to ``row`` with j and k alone."""
    for key in ("j", "k"):
        for _ in range(5):
            if "selected" in (row.get_attribute("class") or "").split():
                return
            page.keyboard.press(key)
    raise AssertionError("j and k never chose the row")


def test_the_chosen_rows_details_show_without_hovering(login, reviewer):
    # Finished today, whose row says the time alone.
    ago = earlier_today()
    make_replay(verdict="divergent", title="Round totals", finished_ago=ago)
    second = make_replay(verdict="divergent", title="Parse dates", finished_ago=ago)
    Comparison.objects.filter(replay=second).update(substantive_files=2)
    claim = claim_take(replay=second, reviewer=reviewer)
    finished = timezone.localtime(second.finished_at)
    until = timezone.localtime(claim.expires_at)
    # The time alone when it lapses today; its day too just before midnight.
    same_day = until.date() == timezone.localtime().date()
    lapses = f"{until:%H:%M}" if same_day else f"{until:%b} {until.day} {until:%H:%M}"
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto("/")
    row = page.locator("#queue-rows tr.row", has_text="Parse dates")
    other = page.locator("#queue-rows tr.row", has_text="Round totals")
    details = row.locator(".row-detail")
    expect(details).to_have_count(3)
    expect(row.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-"))
    # Read out on every row (in the page's text), shown on the chosen one.
    # The time alone today; its date and zone in the age's title.
    expect(details.nth(0)).to_have_text(f"at {finished:%H:%M}")
    expect(row.locator("time")).to_have_attribute(
        "title", f"{finished:%Y-%m-%d %H:%M} UTC"
    )
    expect(details.nth(1)).to_contain_text("not only in whitespace")
    expect(details.nth(2)).to_have_text(f"the claim lapses at {lapses}")

    choose(page, other)
    assert not shown(row), "details shown on a row not chosen"
    choose(page, row)
    assert shown(row) == 3
    assert not shown(other)
    # The table still fits the window.
    width = page.evaluate("document.querySelector('table.queue').scrollWidth")
    assert width <= 1024 - 2 * 16, width


def test_what_substantive_means_is_written_above_the_table(login, reviewer):
    replay = make_replay(verdict="divergent", title="Parse dates")
    Comparison.objects.filter(replay=replay).update(substantive_files=2)
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto("/")
    expect(page.locator("#queue-rows tr.row")).to_contain_text("2 substantive")
    # In the page's text, on the screen with no row chosen and no hovering.
    legend = page.locator("#diff-legend")
    expect(legend).to_be_visible()
    expect(legend).to_contain_text(
        "substantive counts the files that differ in substance, not only in "
        "whitespace, order or comments"
    )
    assert legend.get_attribute("title") is None
    box = legend.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 1024
    # A filter redraws the table, the legend with it.
    page.get_by_label("Verdict").select_option("divergent")
    expect(page.locator("#diff-legend")).to_contain_text("substantive counts")
