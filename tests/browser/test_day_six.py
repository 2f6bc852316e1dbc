"""A newcomer's sixth day in Chromium: a line range commented from the
keyboard on a line that already has a thread, the help's keys followed, the
other thread left alone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub.models import Project
from reviews.models import Comment
from tests.browser.test_line_keys import FOCUSED, tab_to_the_line_numbers
from tests.factories import make_git_project, make_replay, make_superuser, make_user
from tests.gitrepos import project_repo

pytestmark = pytest.mark.browser


def test_a_range_from_the_keys_on_a_line_with_a_thread_leaves_the_thread_alone(
    login, reviewer
):
    """Shift+Tab from the new box goes back to its line number past the
    thread drawn under that line: Down and Shift+Enter widen the box, and
    the other reviewer's thread stays unresolved."""
    replay = make_replay(verdict="divergent")
    theirs = Comment.objects.create(
        replay=replay,
        author=make_user("vera", None),
        target="dod",
        path="src/app.py",
        side="new",
        line_start=1,
        line_end=1,
        body="is this rounding intended?",
    )
    page = login(reviewer)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"/replays/{replay.pk}/")
    table = page.locator('#dod table[data-target="dod"]')
    expect(table.locator("tr.thread-row")).to_contain_text("is this rounding")

    tab_to_the_line_numbers(page, "dod")
    page.keyboard.press("ArrowRight")
    assert page.evaluate(FOCUSED) == "Comment on line 1 (new)"
    page.keyboard.press("Enter")
    box = table.locator("tr.comment-row")
    expect(box.locator("textarea")).to_be_focused()
    page.keyboard.type("both lines round twice")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate(FOCUSED) == "Comment on line 1 (new)"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Shift+Enter")

    expect(box.locator(".anchor")).to_have_text("src/app.py (new), lines 1-2")
    expect(box.locator("textarea")).to_have_value("both lines round twice")
    page.keyboard.press("Control+Enter")
    expect(table.locator("article.thread")).to_have_count(2)
    expect(table).to_contain_text("both lines round twice")
    mine = Comment.objects.exclude(pk=theirs.pk).get()
    assert (mine.line_start, mine.line_end, mine.author) == (1, 2, reviewer)
    theirs.refresh_from_db()
    assert theirs.resolved_at is None


def test_the_keys_help_opens_at_its_top_on_a_small_screen(login, reviewer):
    """At 1024x768 the help is taller than the screen: it opens on its
    heading and the first keys, not scrolled down to its Close button."""
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/replays/{replay.pk}/")
    help_ = page.locator("#keys-help")

    for _ in range(2):  # opened again after a scroll down, the same
        page.keyboard.press("?")
        expect(help_).to_be_visible()
        assert help_.evaluate("d => d.scrollHeight > d.clientHeight")
        assert help_.evaluate("d => d.scrollTop") == 0
        expect(help_.get_by_role("heading", name="Keyboard")).to_be_in_viewport()
        expect(help_.get_by_text("Move down / up")).to_be_in_viewport()
        assert help_.evaluate(
            "d => document.activeElement === d"
            " || document.activeElement === d.querySelector('h2')"
        )
        help_.evaluate("d => { d.scrollTop = d.scrollHeight }")
        page.keyboard.press("Escape")
        expect(help_).to_be_hidden()


def test_back_after_a_refused_then_corrected_project_save_is_a_real_page(
    login, tmp_path
):
    """A save refused for a mistake, the mistake fixed, saved: Back shows
    the edit page, not the browser's "Confirm form resubmission"
    (ERR_CACHE_MISS); Back again, the project's page it was opened from."""
    make_git_project(project_repo(tmp_path))
    page = login(make_superuser())
    page.goto("/projects/shop/")
    page.goto("/projects/shop/edit/")
    limit = page.get_by_label("Agent time limit (s)")

    entries = page.evaluate("history.length")
    limit.fill("0")
    page.get_by_role("button", name="Save shop").click()
    expect(page.locator("#form-problems")).to_contain_text("At least 1 s.")
    expect(page.locator("#form-problems")).to_be_focused()
    # Refused in place: no history entry Back would have to post again.
    assert page.evaluate("history.length") == entries
    page.get_by_label("Agent time limit (s)").fill("900")
    page.get_by_role("button", name="Save shop").click()
    expect(page.locator(".messages")).to_contain_text("Saved project shop")
    assert Project.objects.get(slug="shop").time_limit_seconds == 900

    page.go_back()
    expect(page).to_have_url(re.compile(r"/projects/shop/edit/$"))
    expect(page.get_by_role("heading", name="Edit shop")).to_be_visible()
    page.go_back()
    expect(page).to_have_url(re.compile(r"/projects/shop/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("shop")


def test_a_range_widened_twice_before_its_box_arrives_keeps_the_text(login, reviewer):
    """Down, Shift+Enter, Down, Shift+Enter, quicker than the server: the
    box that comes for the widest range still holds what was typed."""
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"/replays/{replay.pk}/")
    held = []

    def hold_the_first_widening(route):
        if "line_end=2" in route.request.url:
            held.append(route)
        else:
            route.continue_()

    page.route("**/comments/new/**", hold_the_first_widening)
    tab_to_the_line_numbers(page, "dod")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    table = page.locator('#dod table[data-target="dod"]')
    box = table.locator("tr.comment-row")
    expect(box.locator("textarea")).to_be_focused()
    page.keyboard.type("three lines")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("ArrowDown")
    with page.expect_request(lambda request: "line_end=2" in request.url):
        page.keyboard.press("Shift+Enter")
    page.keyboard.press("ArrowDown")
    assert page.evaluate(FOCUSED) == "Comment on line 3 (new)"
    page.keyboard.press("Shift+Enter")
    for _ in range(100):  # the held request reaches its route handler
        if held:
            break
        page.evaluate("0")
    held[0].continue_()

    expect(box.locator(".anchor")).to_have_text("src/app.py (new), lines 1-3")
    expect(box.locator("textarea")).to_have_value("three lines")
