"""The queue keeps the reviewer's place: back from a replay's page (the
browser's Back, the page's link or u), the row of the replay just opened is
chosen again, in the queue's filter, so keyboard triage goes on from there."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from replayhub.models import Replay
from tests.factories import make_project, make_replay

pytestmark = pytest.mark.browser

SELECTED = re.compile(r"\bselected\b")


@pytest.fixture
def demo_queue(db):
    """Five queued replays of project demo, newest first, and one elsewhere."""
    demo = make_project("demo")
    make_replay(verdict="divergent", title="Elsewhere", finished_ago=timedelta(0))
    return [
        make_replay(
            verdict="divergent",
            project=demo,
            title=f"Demo task {n}",
            finished_ago=timedelta(minutes=n + 1),
        )
        for n in range(5)
    ]


def opens(replay: Replay) -> re.Pattern:
    """A queue row's link to the replay's page, in any filter."""
    return re.compile(rf"^/replays/{replay.pk}/(\?|$)")


def rows(page):
    return page.locator("#queue-rows tr.row")


def chosen(page):
    return page.locator("#queue-rows tr.row.selected")


def open_third(page, demo_queue) -> Replay:
    """From the queue filtered to demo, j j and Enter: the third row's replay."""
    page.goto("/?project=demo")
    expect(rows(page)).to_have_count(5)
    expect(rows(page).nth(0)).to_have_class(SELECTED)
    page.keyboard.press("j")
    page.keyboard.press("j")
    third = demo_queue[2]
    expect(rows(page).nth(2)).to_have_attribute("data-href", opens(third))
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith(f"/replays/{third.pk}/?project=demo")
    return third


def expect_chosen(page, replay: Replay) -> None:
    expect(chosen(page)).to_have_count(1)
    expect(chosen(page)).to_have_attribute("data-href", opens(replay))
    expect(chosen(page)).to_be_in_viewport()


@pytest.mark.parametrize("width", [1024, 1280])
def test_back_comes_to_the_row_just_opened(login, reviewer, demo_queue, width):
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 400})
    third = open_third(page, demo_queue)

    page.go_back()
    assert page.url.endswith("/?project=demo")
    expect_chosen(page, third)
    page.keyboard.press("j")
    expect(chosen(page)).to_have_attribute("data-href", opens(demo_queue[3]))


def test_u_comes_to_the_row_just_opened(login, reviewer, demo_queue):
    page = login(reviewer)
    third = open_third(page, demo_queue)
    back = page.locator("a[data-back]")
    expect(back).to_have_attribute("href", f"/?project=demo&at={third.pk}")

    with page.expect_navigation():
        page.keyboard.press("u")
    expect(rows(page)).to_have_count(5)
    expect(page.locator("#queue-rows")).not_to_contain_text("Elsewhere")
    expect_chosen(page, third)
    page.keyboard.press("k")
    expect(chosen(page)).to_have_attribute("data-href", opens(demo_queue[1]))


def test_a_replay_no_longer_queued_gives_its_place_to_the_next(
    login, reviewer, demo_queue
):
    page = login(reviewer)
    third = open_third(page, demo_queue)
    # Decided meanwhile: out of the queue, the row below takes its place.
    Replay.objects.leave_review_queue(third.pk)

    with page.expect_navigation():
        page.keyboard.press("u")
    expect(rows(page)).to_have_count(4)
    expect_chosen(page, demo_queue[3])

    # The same by Back, from the replay's page opened again.
    page.keyboard.press("k")
    second = demo_queue[1]
    expect(chosen(page)).to_have_attribute("data-href", opens(second))
    with page.expect_navigation():
        page.keyboard.press("Enter")
    Replay.objects.leave_review_queue(second.pk)
    page.go_back()
    # Asked again (no signed-in page is kept by the browser's cache), the
    # row below the one just opened takes its place; reloaded, the same.
    expect(rows(page)).to_have_count(3)
    expect_chosen(page, demo_queue[3])
    page.reload()
    expect(rows(page)).to_have_count(3)
    expect_chosen(page, demo_queue[3])


def test_a_filter_applied_in_place_keeps_the_row_chosen(login, reviewer, demo_queue):
    page = login(reviewer)
    page.goto("/")
    expect(rows(page)).to_have_count(6)
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(chosen(page)).to_have_attribute("data-href", opens(demo_queue[2]))

    page.get_by_role("combobox", name="Project").select_option("demo")
    expect(rows(page)).to_have_count(5)
    expect_chosen(page, demo_queue[2])
