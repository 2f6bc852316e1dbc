"""The budgets page: admins edit (audited), leads read, reviewers never see money."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from replayhub.models import Budget, BudgetShare, NightShare, Project, Run
from replayhub.nights import shares
from reviews.models import AuditEvent
from reviews.views.budget_forms import bound_problem
from tests.factories import make_budget, make_night, make_project
from tests.reviews.views.stored import post_from_page

# Each card's forms are prefixed with its project's slug, a tier's share with
# the tier too: two cards never share a field name or id.
AGENTIC = "share-shop-agentic-"
TAPE = "share-shop-tape-"


@pytest.fixture
def budgeted_project(db):
    """A project with a budget of $12.50 and tonight's night partly spent."""
    project = Project.objects.create(slug="shop", repo_path="/srv/shop.git")
    make_budget(project, shares={"agentic": {"max_cost_usd": Decimal("12.50")}})
    make_night(
        project,
        start=timezone.now() - timedelta(hours=1),
        hours=4,
        shares={
            "agentic": {
                "limit_replays": 20,
                "limit_sandbox_seconds": 14_400,
                "limit_tokens": 2_000_000,
                "limit_cost_usd": Decimal("12.50"),
                "used_replays": 5,
                "reserved_replays": 2,
                "used_cost_usd": Decimal("3.25"),
                "deferred": 4,
            }
        },
    )
    return project


def agentic_share(project) -> BudgetShare:
    return BudgetShare.objects.get(budget__project=project, tier="agentic")


def save(client, data: dict, slug: str = "shop", **kwargs):
    """Post ``data`` from ``slug``'s card as the budgets page has it now."""
    url = reverse("reviews:budget_edit", args=[slug])
    return post_from_page(client, url, data, **kwargs)


def form_data(**overrides):
    data = {
        f"{AGENTIC}max_replays": "30",
        f"{AGENTIC}max_sandbox_minutes": "240",
        f"{AGENTIC}max_tokens": "2000000",
        f"{AGENTIC}max_cost_usd": "12.50",
        "budget-shop-window_start_hour": "1",
        "budget-shop-window_end_hour": "6",
        "budget-shop-timezone": "Europe/Berlin",
        "caps-shop-agentic_enabled": "on",
        "caps-shop-time_limit_seconds": "900",
        "caps-shop-test_time_limit_seconds": "",
        "caps-shop-memory_limit_mb": "2048",
        "caps-shop-max_processes": "256",
        "caps-shop-max_disk_mb": "2048",
        "caps-shop-max_files": "200000",
        "caps-shop-max_tokens": "",
        "caps-shop-max_turns": "40",
        "caps-shop-flake_reruns": "2",
        "caps-shop-evidence_floor": "1",
        "caps-shop-max_attempts": "3",
    }
    data.update(overrides)
    return data


def test_an_admin_edits_a_budget_and_the_change_is_audited(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    response = save(
        client,
        form_data(),
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert b"Saved." in response.content

    budget = Budget.objects.get(project=budgeted_project)
    budgeted_project.refresh_from_db()
    assert (agentic_share(budgeted_project).max_replays, budget.timezone) == (
        30,
        "Europe/Berlin",
    )
    assert (budgeted_project.time_limit_seconds, budgeted_project.max_turns) == (
        900,
        40,
    )
    assert budgeted_project.agentic_enabled
    event = AuditEvent.objects.get(action="budget.update")
    assert event.actor == admin_user
    assert event.before["shares"]["agentic"]["max_replays"] == 20
    assert event.after["shares"]["agentic"]["max_replays"] == 30
    assert event.before["budget"]["timezone"] == "UTC"
    assert event.after["caps"]["time_limit_seconds"] == 900
    # Unchanged: not listed.
    assert "max_cost_usd" not in event.after["shares"]["agentic"]
    assert "text" not in event.after["shares"]


def test_saving_without_a_change_writes_no_audit_event(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    data = form_data(
        **{
            f"{AGENTIC}max_replays": "20",
            f"{AGENTIC}max_cost_usd": "12.5",  # as saved, to the cent
            "budget-shop-timezone": "UTC",
            "caps-shop-time_limit_seconds": "600",
            "caps-shop-max_turns": "",
            "caps-shop-memory_limit_mb": "2048",
        }
    )
    data.pop("caps-shop-agentic_enabled")
    save(client, data)
    assert not AuditEvent.objects.exists()


def test_a_bad_value_is_refused_and_nothing_changes(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    response = save(
        client,
        form_data(
            **{"budget-shop-timezone": "Mars/Olympus", f"{AGENTIC}max_replays": "99"}
        ),
    )
    assert response.status_code == 400
    assert b"is not a known time zone" in response.content
    assert agentic_share(budgeted_project).max_replays == 20
    assert not AuditEvent.objects.exists()


def test_a_lead_reads_the_page_but_cannot_edit(client, lead, budgeted_project):
    client.force_login(lead)
    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "Night of" in page and "12.50" in page
    assert f'name="{AGENTIC}max_replays"' not in page
    assert "20 replays, 240 minutes, 2,000,000 tokens, 12.50 USD per night" in page
    response = client.post(reverse("reviews:budget_edit", args=["shop"]), form_data())
    assert response.status_code == 403
    assert agentic_share(budgeted_project).max_replays == 20


def test_a_lead_sees_a_tier_that_is_off_as_off_without_its_numbers(
    client, lead, budgeted_project
):
    """Tape, text and replicates off, agentic off for the scheduler: the
    card lists no share a night would never use; the agentic one is said to
    pay only for Replay now."""
    client.force_login(lead)

    page = client.get(reverse("reviews:budgets")).content.decode()

    facts = page[page.index('<dl class="facts">') :]
    facts = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]+)</dd>", facts))
    assert facts["Tape tier, before the others"] == "off"
    assert facts["Text tier, before the agentic tier"] == "off"
    assert facts["Replicates, after the first replays"] == "off"
    assert facts["Agentic tier"] == (
        "off at night; Replay now spends from 20 replays, 240 minutes, "
        "2,000,000 tokens, 12.50 USD per night"
    )

    Budget.objects.filter(project=budgeted_project).update(tape_enabled=True)
    Project.objects.filter(pk=budgeted_project.pk).update(agentic_enabled=True)
    page = client.get(reverse("reviews:budgets")).content.decode()
    facts = page[page.index('<dl class="facts">') :]
    facts = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]+)</dd>", facts))
    assert facts["Tape tier, before the others"].endswith(" per night")
    assert facts["Agentic tier"] == (
        "20 replays, 240 minutes, 2,000,000 tokens, 12.50 USD per night"
    )


def test_a_reviewer_never_sees_money(client, reviewer, budgeted_project):
    client.force_login(reviewer)
    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "Replays" in page and "Sandbox minutes" in page
    assert "Money" not in page
    assert "12.50" not in page and "3.25" not in page


def test_tonight_shows_usage_reservations_and_deferrals(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "5 used · 2 reserved / 20" in page
    assert "<strong>4 deferred</strong> by the agentic share" in page
    assert "<strong>4</strong>" in page  # deferred runs stand out in the history


def test_both_max_tokens_changed_in_one_save_are_each_audited_under_their_owner(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    save(
        client,
        form_data(
            **{f"{AGENTIC}max_tokens": "3000000", "caps-shop-max_tokens": "50000"}
        ),
    )
    event = AuditEvent.objects.get(action="budget.update")
    assert event.before["shares"]["agentic"]["max_tokens"] == 2_000_000
    assert event.after["shares"]["agentic"]["max_tokens"] == 3_000_000
    assert event.before["caps"]["max_tokens"] is None
    assert event.after["caps"]["max_tokens"] == 50_000

    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "Tokens per night, agentic tier</code> 2000000 → 3000000" in page
    assert "Tokens per replay</code> not set → 50000" in page


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (f"{AGENTIC}max_cost_usd", "-5", "Cannot be negative."),
        (f"{AGENTIC}max_replays", "-5", "Cannot be negative."),
        (f"{AGENTIC}max_replays", "1000001", "At most 100,000 replays."),
        (f"{TAPE}max_sandbox_minutes", "10000001", "At most 10,000,000 minutes."),
        ("share-shop-text-max_tokens", "-1", "Cannot be negative."),
        ("budget-shop-window_start_hour", "30", "At most 23."),
        ("budget-shop-window_end_hour", "1", "The window must last at least one hour"),
        ("caps-shop-time_limit_seconds", "0", "At least 1 s."),
        ("caps-shop-time_limit_seconds", "999999", "At most 86,400 s."),
        ("caps-shop-memory_limit_mb", "1", "At least 64 MiB."),
        ("caps-shop-max_processes", "0", "At least 1 process."),
        ("caps-shop-max_disk_mb", "1", "At least 16 MiB."),
        ("caps-shop-max_files", "5", "At least 100 files."),
        ("caps-shop-max_tokens", "0", "At least 1 token."),
        ("caps-shop-max_turns", "0", "At least 1 turn."),
        ("caps-shop-flake_reruns", "50", "At most 10 reruns."),
        ("caps-shop-max_attempts", "0", "At least 1 attempt."),
        ("caps-shop-test_time_limit_seconds", "0", "At least 1 s."),
    ],
)
def test_each_budget_and_cap_field_refuses_a_bad_value_in_place(
    client, admin_user, budgeted_project, field, value, message
):
    client.force_login(admin_user)
    response = save(
        client,
        form_data(**{field: value}),
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html
    assert "Ensure this value" not in html  # the form's words only, once
    # The message sits with its field.
    at = html.index(f'name="{field}"')
    assert html.rfind(message, 0, at) > html.rfind("<label", 0, at) - 400
    assert agentic_share(budgeted_project).max_replays == 20
    assert not AuditEvent.objects.exists()


def test_the_budgets_page_writes_nothing_on_get(client, lead):
    Project.objects.create(slug="fresh", repo_path="/srv/fresh.git")
    client.force_login(lead)
    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "budget-fresh" in page
    assert not Budget.objects.exists()


def test_the_form_address_opened_again_leads_back_to_the_page(
    client, lead, budgeted_project
):
    client.force_login(lead)
    response = client.get(reverse("reviews:budget_edit", args=["shop"]))
    assert response.status_code == 302
    assert response["Location"] == reverse("reviews:budgets") + "#budget-shop"


def test_a_bound_of_one_is_said_in_the_singular():
    assert bound_problem(0, 1, 20, " attempts") == "At least 1 attempt."
    assert bound_problem(30, 1, 20, " attempts") == "At most 20 attempts."
    assert bound_problem(-1, 0, 10, " reruns") == "Cannot be negative."


def test_an_admin_turns_the_tape_tier_on_and_sets_its_share(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    response = save(
        client,
        form_data(
            **{
                "budget-shop-tape_enabled": "on",
                f"{TAPE}max_replays": "12",
                f"{TAPE}max_sandbox_minutes": "90",
            }
        ),
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    budget = Budget.objects.get(project=budgeted_project)
    tape = BudgetShare.objects.get(budget=budget, tier="tape")
    assert (budget.tape_enabled, tape.max_replays) == (True, 12)
    assert tape.max_sandbox_minutes == 90
    # The tape tier's form has no model dimensions: they stay zero.
    assert (tape.max_tokens, tape.max_cost_usd) == (0, 0)
    assert f"{TAPE}max_tokens" not in response.content.decode()
    event = AuditEvent.objects.get(action="budget.update")
    assert event.before["shares"]["tape"]["max_sandbox_minutes"] == 120
    assert event.after["shares"]["tape"]["max_sandbox_minutes"] == 90
    # The card now shows the tape tier's share of tonight beside the agentic one.
    NightShare.objects.filter(night__project=budgeted_project, tier="tape").update(
        limit_replays=12, used_replays=3, deferred=2
    )
    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "Replays per night, tape tier</code> 50 → 12" in page
    assert "Tape tier, before the others" in page
    assert "Tape replays: 3 used, 0 reserved of 12" in page
    assert "<strong>2 deferred</strong> by the tape share" in page


def test_the_tape_share_has_bounds_and_a_blank_keeps_it(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    refused = save(client, form_data(**{f"{TAPE}max_replays": "100001"}))
    assert refused.status_code == 400
    save(
        client,
        form_data(**{f"{TAPE}max_replays": "", "budget-shop-tape_enabled": "on"}),
    )
    budget = Budget.objects.get(project=budgeted_project)
    assert budget.tape_enabled
    assert shares.budget_shares(budget)["tape"].max_replays == 50


def test_two_cards_never_share_a_field_id(client, admin_user, budgeted_project):
    """A label ticks the box of its own card: no id is on the page twice."""
    other = Project.objects.create(slug="docs", repo_path="/srv/docs.git")
    make_budget(other, tape_enabled=True)
    client.force_login(admin_user)

    page = client.get(reverse("reviews:budgets")).content.decode()

    ids = re.findall(r'\sid="([^"]+)"', page)
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    assert repeated == []
    assert 'id="id_caps-docs-agentic_enabled"' in page
    assert 'for="id_caps-docs-agentic_enabled"' in page
    assert 'id="id_share-docs-tape-max_replays"' in page


def test_saving_one_card_changes_only_its_project(client, admin_user, budgeted_project):
    other = Project.objects.create(slug="docs", repo_path="/srv/docs.git")
    make_budget(other)
    client.force_login(admin_user)
    # What a browser posts from the docs card: only the docs card's fields.
    data = {
        key.replace("-shop-", "-docs-"): value
        for key, value in form_data(**{f"{AGENTIC}max_replays": "7"}).items()
    }

    response = save(client, data, "docs")

    assert response.status_code == 302
    assert agentic_share(other).max_replays == 7
    assert agentic_share(budgeted_project).max_replays == 20
    other.refresh_from_db()
    budgeted_project.refresh_from_db()
    assert other.agentic_enabled and not budgeted_project.agentic_enabled


def test_the_problems_above_the_form_name_the_tier_of_a_share_field(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    response = save(
        client,
        form_data(**{"share-shop-text-max_cost_usd": "-1"}),
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 400
    problems = re.search(
        r'class="notice bad form-problems".*?</ul>', response.content.decode(), re.S
    ).group(0)
    assert (
        '<a href="#id_share-shop-text-max_cost_usd">'
        "Text tier — money per night (USD)</a>: Cannot be negative." in problems
    )


def test_the_text_share_is_edited_on_its_own_form(client, admin_user, budgeted_project):
    client.force_login(admin_user)
    save(
        client,
        form_data(
            **{
                "share-shop-text-max_replays": "40",
                "share-shop-text-max_cost_usd": "2.5",
                # Not a dimension of the text tier: never read.
                "share-shop-text-max_sandbox_minutes": "999",
            }
        ),
    )
    text = BudgetShare.objects.get(budget__project=budgeted_project, tier="text")
    assert (text.max_replays, text.max_tokens, text.max_cost_usd) == (
        40,
        1_000_000,
        Decimal("2.50"),
    )
    assert text.max_sandbox_minutes == 0
    event = AuditEvent.objects.get(action="budget.update")
    assert event.after["shares"]["text"] == {"max_replays": 40, "max_cost_usd": "2.50"}


def test_a_reviewer_sees_no_money_field_on_any_tier(client, reviewer, budgeted_project):
    client.force_login(reviewer)
    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "max_cost_usd" not in page and "USD" not in page


def test_every_tiers_deferred_runs_are_listed_the_same_way(
    client, lead, budgeted_project
):
    from tests.factories import make_runs
    from tests.nights.test_tape_tier import RECORDED_TAPE

    Budget.objects.filter(project=budgeted_project).update(tape_enabled=True)
    waiting = make_runs(
        budgeted_project,
        2,
        now=timezone.now(),
        prefix="taped",
        raw={"tape": RECORDED_TAPE},
    )
    (late,) = make_runs(budgeted_project, 1, now=timezone.now(), prefix="late")
    Run.objects.filter(pk=late.pk).update(deferred_at=timezone.now())
    NightShare.objects.filter(night__project=budgeted_project, tier="tape").update(
        deferred=2
    )
    client.force_login(lead)

    page = client.get(reverse("reviews:budgets")).content.decode()

    def listed(title: str) -> str:
        section = page[page.index(f'aria-label="{title} of ') :]
        section = section[: section.index("</section>")]
        return section[section.index("Deferred runs") :]

    tape = listed("Tape tier, before the others")
    assert all(f"/runs/{run.pk}/" in tape for run in waiting)
    assert "<strong>2 deferred</strong> by the tape share" in page
    agentic = listed("Agentic tier")
    assert f"/runs/{late.pk}/" in agentic and "since " in agentic
    assert "<strong>4 deferred</strong> by the agentic share" in page


def test_the_history_has_a_row_per_tier_and_a_column_per_dimension(client, lead, db):
    project = Project.objects.create(slug="fresh", repo_path="/srv/fresh.git")
    make_budget(project, tape_enabled=True, text_enabled=True, text_target="gpt:x")
    client.force_login(lead)

    page = client.get(reverse("reviews:budgets")).content.decode()

    table = page[page.index('<table class="grid compact night-history">') :]
    table = table[: table.index("</table>")]
    heads = re.findall(r'<th scope="col"(?: class="num")?>([^<]+)</th>', table)
    # Leads see money; every dimension a shown tier budgets is one column.
    assert heads == [
        "Night",
        "Status",
        "Tier",
        "Replays",
        "Sandbox min",
        "Tokens",
        "Money (USD)",
        "Deferred",
    ]
    assert '<td colspan="8" class="muted">No nights yet.</td>' in table

    make_night(project, start=timezone.now() - timedelta(days=1))
    page = client.get(reverse("reviews:budgets")).content.decode()
    table = page[page.index('<table class="grid compact night-history">') :]
    table = table[: table.index("</table>")]
    assert re.findall(r'<th scope="row">(\w+)</th>', table) == [
        "Tape",
        "Text",
        "Agentic",
    ]
    # The night and its status head its three rows; a dimension a tier does
    # not budget is a dash (the tape tier's tokens and money).
    assert len(re.findall(r'rowspan="3"', table)) == 2
    tape = table[table.index('<th scope="row">Tape</th>') :]
    tape = tape[: tape.index("</tr>")]
    assert tape.count("not budgeted by this tier") == 2


def test_changes_recorded_before_shares_were_rows_still_show(
    client, lead, budgeted_project
):
    AuditEvent.objects.create(
        action="budget.update",
        object_type="project",
        object_id=str(budgeted_project.pk),
        before={"budget": {"max_replays": 20, "tape_max_replays": 50}},
        after={"budget": {"max_replays": 25, "tape_max_replays": 40}},
    )
    AuditEvent.objects.create(
        action="budget.update",
        object_type="project",
        object_id=str(budgeted_project.pk),
        before={"max_tokens": 1000},
        after={"max_tokens": 2000},
    )
    client.force_login(lead)

    page = client.get(reverse("reviews:budgets")).content.decode()

    assert "Replays per night</code> 20 → 25" in page
    assert "Tape replays per night</code> 50 → 40" in page
    assert "max_tokens</code> 1000 → 2000" in page


def test_an_admin_sets_a_replicate_policy_and_the_card_shows_its_share(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    data = form_data(
        **{
            "replicates-shop-replicate_threshold": "0.8",
            "replicates-shop-replicate_confidence": "0.9",
            "replicates-shop-replicate_most": "10",
        }
    )
    response = save(
        client,
        data,
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200
    budget = Budget.objects.get(project=budgeted_project)
    assert budget.replicate_policy() is not None
    assert budget.replicate_most == 10
    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "replicates p0 0.8 at 0.9, k 10" in page
    assert "Replicates, after the first replays" in page
    assert "Replicate replays" in page  # tonight's bar of the replicate share


def test_a_replicate_policy_the_statistics_refuse_is_not_saved(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    data = form_data(**{"replicates-shop-replicate_threshold": "0.95"})

    response = save(client, data)

    assert response.status_code == 400
    assert "the zone must lie strictly between 0 and 1" in response.content.decode()
    assert Budget.objects.get(project=budgeted_project).replicate_policy() is None


def test_a_page_of_cards_opens_with_a_way_to_each_and_says_when_nothing_ran(
    client, admin_user
):
    for slug in ("shop", "billing"):
        Budget.objects.create(project=make_project(slug))
    client.force_login(admin_user)

    page = client.get(reverse("reviews:budgets")).content.decode()

    jump = page[page.index('aria-label="Projects on this page"') :]
    assert '<a href="#budget-billing">' in jump and '<a href="#budget-shop">' in jump
    assert "Last 0 nights" not in page and "Past nights" in page
    assert "Nothing spent: no night yet." in page


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("text_target", "claude", "Write PROVIDER:MODEL"),
        ("text_judge", "no model", "Write PROVIDER:MODEL"),
        ("text_similarity_below", "1.5", "Give a similarity from 0 to 1."),
        ("text_score_at_most", "-1", "Cannot be negative."),
        ("window_start_hour", "24", "At most 23."),
        ("window_end_hour", "-1", "Cannot be negative."),
    ],
)
def test_the_text_tier_settings_are_checked_as_the_model_checks_them(
    client, admin_user, budgeted_project, field, value, message
):
    client.force_login(admin_user)
    text = {
        "budget-shop-text_target": "anthropic:claude-sonnet-4-5",
        "budget-shop-text_similarity_below": "0.5",
        "budget-shop-agentic_after_text": "on",
    }
    response = save(
        client,
        form_data(**{**text, f"budget-shop-{field}": value}),
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 400
    assert message in response.content.decode()
    assert Budget.objects.get(project=budgeted_project).text_target == ""
    assert not AuditEvent.objects.exists()


def test_tonight_and_its_row_in_past_nights_say_the_same_figures(client, lead, db):
    """One night, as its bars and its table row show it: minutes and money
    rounded alike, large counts with separators, the night's date as the
    trends page writes it."""
    project = Project.objects.create(slug="shop", repo_path="/srv/shop.git")
    make_budget(project)
    night = make_night(
        project,
        start=timezone.now() - timedelta(hours=1),
        shares={
            "agentic": {
                "limit_replays": 20,
                "used_replays": 1,
                "limit_sandbox_seconds": 240 * 60,
                "used_sandbox_seconds": 12,
                "limit_cost_usd": Decimal("20"),
                "used_cost_usd": Decimal("0.0007"),
                "limit_tokens": 2_000_000,
                "used_tokens": 1_500,
            }
        },
    )
    client.force_login(lead)

    page = client.get(reverse("reviews:budgets")).content.decode()

    said = night.date.strftime("%a %-d %b %Y")
    assert f"Night of {said}</h3>" in page
    assert f'<th scope="rowgroup" rowspan="1">{said}</th>' in page
    values = re.findall(r'<span class="bar-value">([^<]+)</span>', page)
    assert values == [
        "1 used · 0 reserved / 20",
        "0.2 used · 0 reserved / 240 min",
        "1,500 used · 0 reserved / 2,000,000",
        "&lt;0.01 used · 0.00 reserved / 20.00 USD",
    ]
    row = page[page.index('<th scope="row">Agentic</th>') :]
    row = row[: row.index("</tr>")]
    assert re.findall(r'<td class="num">([^<]+)</td>', row) == [
        "1/20",
        "0.2/240",
        "1,500/2,000,000",
        "&lt;0.01/20.00",
        "0",
    ]


def test_a_text_tier_turned_off_says_so_though_a_replay_by_hand_was_counted(
    client, lead
):
    project = Project.objects.create(slug="shop", repo_path="/srv/shop.git")
    make_budget(project, text_enabled=False, text_target="gpt:x")
    # One "Replay as text" started by hand, counted against tonight.
    make_night(
        project,
        start=timezone.now() - timedelta(hours=1),
        shares={"text": {"limit_replays": 50, "used_replays": 1}},
    )
    client.force_login(lead)

    page = client.get(reverse("reviews:budgets")).content.decode()

    assert "text tier off" in page
    text = page[page.index("Text tier, before the agentic tier") :]
    text = text[: text.index("</section>")]
    assert "<b>Off</b> for shop: the night asks no run as text." in text
    assert "text replays started by hand" in text
    # Not the rule of a tier that is on.
    assert "Asks gpt:x" not in text
    assert "Agentic replays only for runs it passes on" not in text
