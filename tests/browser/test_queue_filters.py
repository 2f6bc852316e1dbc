"""The queue's filters in a real Chromium: Enter in "Model" asks once (one
history entry), and Back shows in the filter boxes the filters the rows are
filtered by."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from reviews.models import Claim
from tests.factories import make_project, make_replay

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
    # The Model box suggests the known names: a combobox.
    return page.get_by_role("combobox", name="Model")


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


def test_claim_next_claims_within_the_queues_filters(login, reviewer):
    demo = make_replay(verdict="divergent", project=make_project("demo"))
    quiet = make_project("uni-ok")
    page = login(reviewer)

    # Nothing in uni-ok: n says so and claims nothing elsewhere.
    page.goto("/?project=uni-ok")
    expect(page.locator("#queue-rows")).to_contain_text("Nothing awaits review")
    page.keyboard.press("n")
    expect(page.locator(".messages")).to_contain_text(
        "Nothing left to review in these filters"
    )
    assert page.url.endswith("/?project=uni-ok")
    assert not Claim.objects.exists()

    # Filtered in place (htmx), n claims from what the rows show, though a
    # replay of another project ranks first.
    inconclusive = make_replay(verdict="inconclusive", project=quiet)
    page.goto("/")
    expect(rows(page)).to_have_count(2)
    page.get_by_role("combobox", name="Project").select_option("uni-ok")
    expect(rows(page)).to_have_count(1)
    page.keyboard.press("n")
    # The replay opens in the filter it was claimed from.
    page.wait_for_url(re.compile(rf"/replays/{inconclusive.pk}/\?project=uni-ok$"))
    assert list(Claim.objects.values_list("replay_id", flat=True)) == [inconclusive.pk]
    assert not Claim.objects.filter(replay=demo).exists()


def test_back_to_the_queue_keeps_the_row_of_the_replay_opened(login, reviewer, queued):
    page = login(reviewer)
    page.goto("/")
    expect(rows(page)).to_have_count(2)
    expect(rows(page).nth(0)).to_have_class(re.compile(r"\bselected\b"))
    page.keyboard.press("j")
    second = rows(page).nth(1).get_attribute("data-href")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith(second)

    with page.expect_navigation():
        page.keyboard.press("u")
    expect(rows(page).nth(1)).to_have_class(re.compile(r"\bselected\b"))
    expect(page.locator("#queue-rows tr.row.selected")).to_have_count(1)


def test_enter_after_filtering_and_choosing_a_row_opens_it(login, reviewer, queued):
    """Focus left on the Filter button does not take the Enter meant for the
    row chosen with j; the replay opens in the queue's filter."""
    page = login(reviewer)
    page.goto("/")
    model_box(page).fill("gpt-5")
    page.get_by_role("button", name="Filter").click()
    expect(rows(page)).to_have_count(1)
    page.keyboard.press("j")

    with page.expect_navigation():
        page.keyboard.press("Enter")

    assert page.url.endswith(f"/replays/{queued['gpt'].pk}/?model=gpt-5")
    back = page.locator("a[data-back]").get_attribute("href")
    assert back == f"/?model=gpt-5&at={queued['gpt'].pk}"
