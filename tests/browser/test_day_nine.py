"""A newcomer's ninth day in Chromium, at 600 to 1024 px: a failing test's
output read in the replay page's Tests table, pages at a small screen's
width, decision keys pressed twice, and the replay page's small refusals."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from replayhub.models import TestOutcome
from reviews.models import Comment, Label, Review
from tests.browser.test_decision_labels import with_required_cause
from tests.factories import make_replay, make_superuser

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


@pytest.mark.parametrize("width", [600, 800])
def test_no_page_scrolls_sideways_below_900(login, width):
    """Below 900 px wide tables scroll inside their own box; what is hidden
    for screen readers inside them (a column's name, a link's words) scrolls
    with them, so the project's page, its review settings and the queue are
    never wider than the window."""
    replay = make_replay(
        verdict="divergent",
        model="claude-opus-4-1-20250805-thinking-high",
        title="Round invoice totals half-even in every currency the shop sells",
    )
    make_replay(verdict="inconclusive", project=replay.project)
    Label.objects.create(
        project=replay.project,
        name="root-cause",
        kind="category",
        categories=["flaky", "model"],
        required=True,
    )
    slug = replay.project.slug
    page = login(make_superuser())
    page.set_viewport_size({"width": width, "height": 900})
    wider = {}
    for path in (f"/projects/{slug}/", f"/projects/{slug}/review/", "/"):
        page.goto(path)
        expect(page.locator("main table").first).to_be_visible()
        wider[path] = page.evaluate("document.documentElement.scrollWidth - innerWidth")
    assert wider == {path: 0 for path in wider}


def test_a_double_c_confirms_only_the_replay_seen(login, reviewer):
    """c confirms the replay shown and opens the next; a second c pressed
    straight after is not taken there (said, nothing recorded), so the next
    replay is never confirmed unseen. A moment later c confirms it."""
    first = make_replay(verdict="divergent")
    second = make_replay(verdict="divergent", finished_ago=timedelta(hours=2))
    page = login(reviewer)
    page.set_viewport_size(NARROW)
    page.goto(f"/replays/{first.pk}/")

    with page.expect_navigation(url=re.compile(rf"/replays/{second.pk}/$")):
        page.keyboard.press("c")
    page.keyboard.press("c")

    expect(page.locator("#decision-asked")).to_have_text(
        "Just opened: look at this replay first, then press c to confirm it. "
        "Nothing recorded."
    )
    page.wait_for_timeout(300)
    assert page.url.endswith(f"/replays/{second.pk}/")
    assert [r.replay_id for r in Review.objects.all()] == [first.pk]

    page.wait_for_timeout(700)
    with page.expect_navigation():
        page.keyboard.press("c")
    decided = Review.objects.order_by("pk").values_list("replay_id", "decision")
    assert list(decided) == [
        (first.pk, Review.Decision.CONFIRM),
        (second.pk, Review.Decision.CONFIRM),
    ]


def test_a_required_labels_key_steps_it_where_the_refusal_left_focus(login, reviewer):
    """c with a required label unset is refused and focuses the label's
    select; the label's own key (shown beside it) still steps it there, and
    c then confirms."""
    replay = with_required_cause(make_replay(verdict="divergent"))
    page = login(reviewer)
    page.set_viewport_size(NARROW)
    page.goto(f"/replays/{replay.pk}/")
    page.locator("main").click(position={"x": 5, "y": 5})
    page.keyboard.press("c")
    label = page.locator("#labels label", has_text="Cause")
    expect(label.locator(".error")).to_be_visible()
    select = label.locator("select")
    expect(select).to_be_focused()
    key = label.locator("kbd").inner_text()

    page.keyboard.press(key)
    expect(select).to_have_value("flaky")
    page.keyboard.press(key)
    expect(select).to_have_value("real")
    assert not Review.objects.exists()

    page.keyboard.press("Escape")
    with page.expect_navigation():
        page.keyboard.press("c")
    review = Review.objects.get()
    assert (review.replay_id, review.decision) == (replay.pk, Review.Decision.CONFIRM)


def test_a_comment_on_a_line_past_the_file_is_refused_under_lines(login, reviewer):
    """The comment form at the page's foot, line 999 of a file of a few
    lines: refused under "Lines", where the number was typed, with the text
    kept."""
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size(NARROW)
    page.goto(f"/replays/{replay.pk}/")
    page.locator("#comment-path").fill("src/app.py")
    page.locator("#comment-start").fill("999")
    page.locator("#comment-body").fill("Off the end.")
    with page.expect_navigation():
        page.locator("#comment-form").get_by_role("button", name="Comment").click()

    errors = page.locator("#comment-errors")
    expect(errors).to_contain_text("Lines: There is no such line in that diff.")
    expect(errors).not_to_contain_text("File or output")
    expect(errors.get_by_role("link", name="Lines")).to_have_attribute(
        "href", "#comment-start"
    )
    expect(page.locator("#comment-body")).to_have_value("Off the end.")
    assert not Comment.objects.exists()
