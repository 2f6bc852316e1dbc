"""A newcomer's ninth day in Chromium, at 600 to 1024 px: a failing test's
output read in the replay page's Tests table, pages at a small screen's
width, decision keys pressed twice, and the replay page's small refusals."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from replayhub.models import TestOutcome
from tests.factories import make_replay

pytestmark = pytest.mark.browser

NARROW = {"width": 1024, "height": 768}


def test_a_failing_tests_output_is_read_whole_at_1024(login, reviewer):
    """A failing test's output tail opened in the Tests table: every line,
    however long, is drawn whole inside the box and the window (wrapped,
    nothing past the right edge to scroll to)."""
    replay = make_replay(verdict="divergent")
    lines = [
        f"E   AssertionError: totals differ for invoice {n}: expected "
        "Decimal('10.005') rounded half-even to Decimal('10.00'), got "
        f"Decimal('10.01') end-of-line-{n}"
        for n in range(12)
    ]
    TestOutcome.objects.filter(replay=replay, tree="replay").update(
        passed=False, tests_failed=1, exit_code=1, output_tail="\n".join(lines)
    )
    page = login(reviewer)
    page.set_viewport_size(NARROW)
    page.goto(f"/replays/{replay.pk}/")

    page.locator("td.tail summary").last.click()

    log = page.locator("td.tail pre.log").last
    expect(log).to_be_visible()
    sizes = log.evaluate(
        "pre => ({scroll: pre.scrollWidth, client: pre.clientWidth,"
        " right: pre.getBoundingClientRect().right, window: innerWidth})"
    )
    assert sizes["scroll"] <= sizes["client"], sizes
    assert sizes["right"] <= sizes["window"], sizes
    # Each line's last word is drawn inside the box, where it can be read.
    ends = log.evaluate(
        """pre => [...pre.querySelectorAll("span.ol")].map(line => {
          const text = line.firstChild;
          const range = document.createRange();
          range.setStart(text, text.data.length - 1);
          range.setEnd(text, text.data.length);
          const box = pre.getBoundingClientRect();
          const end = range.getBoundingClientRect();
          return end.right <= box.right && end.left >= box.left;
        })"""
    )
    assert ends == [True] * len(lines)
    expect(log).to_contain_text(lines[-1])
    assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]
