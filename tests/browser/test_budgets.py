"""The budgets page in Chromium: a refused value is explained beside its field,
and neither the refusal nor the save after it meets a CSP violation."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from replayhub.models import Budget, BudgetShare, Project, Provider, Replay
from reviews.models import AuditEvent
from tests.browser.watch import Watch
from tests.factories import (
    make_budget,
    make_night,
    make_project,
    make_runs,
    make_superuser,
)

pytestmark = pytest.mark.browser


def test_a_refused_budget_shows_its_errors_in_place_and_nothing_is_saved(
    login, screenshot
):
    shop = make_project("shop")
    Budget.objects.create(project=shop)
    root = make_superuser()
    page = login(root)
    watch = Watch(page, console_errors=True)
    watch.goto("/budgets/")
    card = page.locator("#budget-shop")

    card.locator("input[name=share-shop-agentic-max_cost_usd]").fill("-5")
    card.locator("input[name=budget-shop-window_start_hour]").fill("5")
    card.locator("input[name=budget-shop-window_end_hour]").fill("5")
    card.get_by_role("button", name="Save shop").click()

    expect(card.get_by_text("Cannot be negative.").first).to_be_visible()
    expect(
        card.get_by_text("The window must last at least one hour").first
    ).to_be_visible()
    expect(card.locator(".badge.ok")).to_have_count(0)
    # Said beside the Save button, where the eye is, and focused there.
    said = card.locator(".form-problems")
    expect(said).to_be_focused()
    expect(said).to_be_in_viewport()
    # The focus shows: a ring of at least 2 px around the summary, even after
    # a click (Chromium draws none of its own on a focused block then).
    ring = said.evaluate(
        "e => [getComputedStyle(e).outlineStyle, getComputedStyle(e).outlineWidth]"
    )
    assert ring[0] != "none" and float(ring[1].removesuffix("px")) >= 2, ring
    expect(said.locator("li")).to_have_count(2)
    watch.check("budget refused")
    screenshot(page, "budget-errors")
    budget = Budget.objects.get(project=shop)
    assert (budget.window_start_hour, budget.window_end_hour) == (1, 6)
    assert not BudgetShare.objects.exists()  # the defaults stand, unsaved
    assert not AuditEvent.objects.exists()

    card.locator("input[name=share-shop-agentic-max_cost_usd]").fill("15")
    card.locator("input[name=budget-shop-window_end_hour]").fill("7")
    card.get_by_role("button", name="Save shop").click()
    expect(card.locator(".badge.ok")).to_have_text("Saved.")
    expect(card.locator(".saved-here")).to_be_focused()
    expect(card.locator(".saved-here")).to_be_in_viewport()
    budget.refresh_from_db()
    assert (budget.window_start_hour, budget.window_end_hour) == (5, 7)
    watch.check("budget saved after a refusal")


def test_a_label_in_the_second_card_ticks_the_second_cards_box(login):
    """Each card's fields have ids of their own: the label "Agentic replays by
    the scheduler" of the second project's card ticks that card's box, not
    the first card's, and saving the second card changes only its project."""
    for slug in ("alpha", "beta"):
        Budget.objects.create(project=make_project(slug))
    page = login(make_superuser())
    page.goto("/budgets/")
    first, second = page.locator("#budget-alpha"), page.locator("#budget-beta")
    label = "Agentic replays by the scheduler"

    second.locator("label", has_text=label).click()

    expect(second.get_by_label(label)).to_be_checked()
    expect(first.get_by_label(label)).not_to_be_checked()
    second.get_by_role("button", name="Save beta").click()
    expect(second.locator(".badge.ok")).to_have_text("Saved.")
    alpha, beta = (Project.objects.get(slug=s) for s in ("alpha", "beta"))
    assert beta.agentic_enabled and not alpha.agentic_enabled


def test_at_1024_px_the_nights_and_the_form_do_not_overlap_and_inputs_stay_short(
    login,
):
    """A project with a night on record: the nights table and the budget form
    stack rather than run into each other (the table first, as wide as the
    card, since each tier adds five columns; the long form after it), and
    help text sits under its field instead of stretching the input beside
    it."""
    shop = make_project("shop")
    Budget.objects.create(project=shop)
    make_night(
        shop,
        start=timezone.now() - timedelta(days=1),
        shares={"agentic": {"limit_replays": 9, "used_replays": 4}},
    )
    page = login(make_superuser())
    page.set_viewport_size({"width": 1024, "height": 800})
    page.goto("/budgets/")
    card = page.locator("#budget-shop")

    table = card.locator("table.night-history").bounding_box()
    form = card.locator(".budget-edit form").bounding_box()
    assert table and form
    # Stacked: the nights' table, as wide as the card, then the long form.
    assert form["y"] >= table["y"] + table["height"], (table, form)
    assert table["width"] >= card.bounding_box()["width"] * 0.9
    heights = card.locator("fieldset input:not([type=checkbox])").evaluate_all(
        "inputs => inputs.map(i => i.getBoundingClientRect().height)"
    )
    assert heights and max(heights) < 48, heights


def test_an_admin_turns_the_text_tier_on_for_the_second_project_only(login):
    """The text tier's nightly settings are on each card, each with a label
    and its help, checked as the model checks them, audited, and the card
    still fits 1024 px."""
    for slug in ("alpha", "beta"):
        Budget.objects.create(project=make_project(slug))
    Provider.objects.create(
        name="anthropic", kind="anthropic", base_url="https://a.test", key_env="K"
    )
    page = login(make_superuser())
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto("/budgets/")
    second = page.locator("#budget-beta")

    second.get_by_label("Text tier first (runs with prompts)").check()
    second.get_by_role("button", name="Save beta").click()
    # On, with nothing to ask: refused, said beside the field.
    expect(second.get_by_text("The text tier needs a PROVIDER:MODEL")).to_have_count(2)
    target = second.get_by_label("Text tier: model asked")
    target.fill("anthropic:claude-sonnet-4-5")
    second.get_by_label("Text tier: categories always escalated").fill(
        "security, payments"
    )
    second.get_by_role("button", name="Save beta").click()
    expect(second.locator(".badge.ok")).to_have_text("Saved.")
    expect(second.get_by_label("Text tier: model asked")).to_have_value(
        "anthropic:claude-sonnet-4-5"
    )
    expect(second.get_by_text("PROVIDER:MODEL the text tier asks.")).to_be_visible()
    assert page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )

    alpha, beta = (Budget.objects.get(project__slug=s) for s in ("alpha", "beta"))
    assert beta.text_enabled and beta.text_target == "anthropic:claude-sonnet-4-5"
    assert beta.escalate_categories == ["security", "payments"]
    assert not alpha.text_enabled and alpha.text_target == ""
    assert alpha.escalate_categories == []
    event = AuditEvent.objects.get(action="budget.update")
    assert event.after["budget"]["text_enabled"] is True
    assert event.before["budget"]["text_target"] == ""


def test_an_admin_starts_tonight_from_the_card_and_again_admits_nothing(
    login, admin_user
):
    shop = Project.objects.create(
        slug="shop", repo_path="/srv/shop.git", agentic_enabled=True
    )
    make_budget(
        shop,
        window_start_hour=22,
        window_end_hour=6,
        timezone="UTC",
        shares={"agentic": {"max_replays": 3}},
    )
    make_runs(shop, 2, now=timezone.now())
    page = login(admin_user)
    watch = Watch(page, console_errors=True)
    watch.goto("/budgets/")
    card = page.locator("#budget-shop")
    expect(card.get_by_role("heading", name="No night yet")).to_be_visible()
    # Not to be read as "nothing ran": Trends' nights hold replays run by hand.
    expect(card).to_contain_text("Trends counts replays started by hand too")

    card.get_by_role("button", name="Start tonight now for shop").click()

    messages = card.locator("#night-started-shop")
    expect(messages).to_contain_text("admitted 2, deferred 0 (replays reserved 2/3)")
    expect(card.get_by_role("heading", name="Night of")).to_be_visible()
    card.get_by_role("button", name="Start tonight now for shop").click()
    expect(messages).to_contain_text("was already started: admitted 0 now")
    # A worker may have run the first two by now (their repository does not
    # exist: a replay that never started spends nothing): either way, none
    # again, and no more than the two spent of three.
    spent = r"before this press 2 admitted \(replays [0-2]/3: [0-2] done, [0-2] in fli"
    expect(messages).to_contain_text(re.compile(spent))
    assert Replay.objects.filter(project=shop).count() == 2
    watch.check("night started")


def test_at_1024_px_past_nights_fit_with_every_tier_and_the_box_is_reachable(
    login,
):
    """Text tier and replicates on: every tier of a past night, money and
    deferred included, is in view at 1024 px without scrolling sideways, and
    the box the table sits in is a named stop for the keyboard."""
    shop = make_project("shop")
    make_budget(
        shop,
        text_enabled=True,
        text_target="anthropic:claude-sonnet-4-5",
        replicate_threshold=0.8,
    )
    make_night(
        shop,
        start=timezone.now() - timedelta(days=1),
        shares={
            "replicate": {"limit_cost_usd": 2_000_000, "deferred": 7},
            "agentic": {"limit_tokens": 2_000_000, "used_tokens": 1_234_567},
        },
    )
    page = login(make_superuser(), own_context=True)
    axe = Path(os.environ.get("REPLAYHUB_AXE_JS") or AXE_JS)
    if axe.is_file():
        page.context.add_init_script(axe.read_text())
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto("/budgets/")
    box = page.locator("#budget-shop .budget-history .table-wrap")

    expect(box).to_have_attribute("tabindex", "0")
    expect(box).to_have_attribute("role", "region")
    expect(box).to_have_accessible_name("Past nights of shop")
    fits = box.evaluate("b => [b.querySelector('table').scrollWidth, b.clientWidth]")
    assert fits[0] <= fits[1], fits
    assert page.evaluate(SIDEWAYS) <= 0
    replicate = box.locator("tr", has=page.get_by_role("rowheader", name="Replicate"))
    expect(replicate.locator("td").last).to_have_text("7")
    expect(replicate.locator("td").nth(-2)).to_have_text("0.00/2,000,000.00")
    if axe.is_file():
        found = page.evaluate(AXE_SCROLLABLE)
        assert found == [], found


AXE_JS = Path(__file__).parents[2] / "var/axe/node_modules/axe-core/axe.min.js"
SIDEWAYS = "document.documentElement.scrollWidth - window.innerWidth"
AXE_SCROLLABLE = """async () => (await axe.run(document, {
  runOnly: ["scrollable-region-focusable"], resultTypes: ["violations"]}))
  .violations.map(v => v.nodes.map(n => n.target.join(" ")))"""


def in_view(locator) -> bool:
    return locator.evaluate(
        """el => { const r = el.getBoundingClientRect();
        return r.top >= 0 && r.bottom <= innerHeight; }"""
    )


def test_at_1024_px_a_started_night_is_said_in_view_beside_its_button(
    login, admin_user
):
    for slug in ("alpha", "shop"):
        project = Project.objects.create(
            slug=slug, repo_path=f"/srv/{slug}.git", agentic_enabled=True
        )
        make_budget(
            project,
            window_start_hour=22,
            window_end_hour=6,
            timezone="UTC",
            shares={"agentic": {"max_replays": 3}},
        )
    page = login(admin_user)
    page.set_viewport_size({"width": 1024, "height": 800})
    watch = Watch(page, console_errors=True)
    watch.goto("/budgets/")
    card = page.locator("#budget-shop")
    card.get_by_role("button", name="Start tonight now for shop").click()

    said = card.locator("#night-started-shop")
    expect(said).to_contain_text("shop night of")
    # Announced, focused and on screen, not above the visible area.
    expect(said).to_have_attribute("role", "status")
    expect(said).to_be_focused()
    assert in_view(said)
    # Said beside the button, not again at the top of the page.
    expect(page.locator("ul.messages")).to_have_count(0)
    watch.check("night started at 1024")


def test_a_project_with_every_tier_off_cannot_start_a_night_and_says_why(
    login, admin_user
):
    project = make_project("shop")
    assert not project.agentic_enabled
    make_budget(project, text_enabled=False, tape_enabled=False)
    page = login(admin_user)
    page.goto("/budgets/")

    button = page.get_by_role("button", name="Start tonight now for shop")
    expect(button).to_be_disabled()
    expect(button).to_have_accessible_description(re.compile("Nothing to start"))
    expect(page.locator("#budget-shop")).to_contain_text(
        "agentic replays, the text tier, the tape tier and replicates are all off"
    )
