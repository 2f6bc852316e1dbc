"""Two admins with the budgets page open in Chromium: the second save, from
a page older than the first, is refused in place; the first stands, and
what the second typed stays in its form."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from replayhub.models import BudgetShare, Project
from reviews.models import AuditEvent
from tests.browser.watch import Watch
from tests.factories import make_budget, make_superuser

pytestmark = pytest.mark.browser

REPLAYS = "input[name=share-demo-agentic-max_replays]"
TIME_LIMIT = "input[name=caps-demo-time_limit_seconds]"


def stored() -> tuple[int, int]:
    share = BudgetShare.objects.get(budget__project__slug="demo", tier="agentic")
    project = Project.objects.get(slug="demo")
    return share.max_replays, project.time_limit_seconds


def test_a_save_from_a_page_opened_before_anothers_save_is_refused(login, screenshot):
    demo = Project.objects.create(
        slug="demo", repo_path="/srv/demo.git", time_limit_seconds=900
    )
    make_budget(demo, shares={"agentic": {"max_replays": 8}})
    tab1 = login(make_superuser("ada", "ada@example.com"))
    tab2 = login(make_superuser("bob", "bob@example.com"))
    watch1 = Watch(tab1, console_errors=True)
    watch1.goto("/budgets/")
    Watch(tab2, console_errors=True).goto("/budgets/")
    card1, card2 = tab1.locator("#budget-demo"), tab2.locator("#budget-demo")
    expect(card1.locator(REPLAYS)).to_have_value("8")

    card2.locator(REPLAYS).fill("11")
    card2.get_by_role("button", name="Save demo").click()
    expect(card2.locator(".badge.ok")).to_have_text("Saved.")
    assert stored() == (11, 900)
    events = AuditEvent.objects.count()

    # Still showing 8: only the time limit is changed.
    card1.locator(TIME_LIMIT).fill("12")
    card1.get_by_role("button", name="Save demo").click()

    refused = card1.locator(".stale-refused")
    expect(refused).to_contain_text(
        "demo's budget was changed by someone else since you opened this page: "
        "nothing was saved."
    )
    expect(refused).to_be_focused()
    expect(refused).to_contain_text(
        "Agentic tier — replays per night: stored now 11 (this form: 8)"
    )
    expect(refused).to_contain_text(
        "Agent time limit (s): stored now 900 (this form: 12)"
    )
    expect(card1.locator(".badge.ok")).to_have_count(0)
    expect(card1.locator(TIME_LIMIT)).to_have_value("12")
    expect(card1.locator(REPLAYS)).to_have_value("8")
    assert stored() == (11, 900)
    assert AuditEvent.objects.count() == events
    watch1.check("a save from an older page refused")
    screenshot(tab1, "budget-changed-by-someone-else")

    # Put right from the list, and saved again: the page is current now.
    card1.locator(REPLAYS).fill("11")
    card1.get_by_role("button", name="Save demo").click()
    expect(card1.locator(".badge.ok")).to_have_text("Saved.")
    assert stored() == (11, 12)
    watch1.check("saved again once put right")
