"""The budgets page: admins edit (audited), leads read, reviewers never see money."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from replayhub.models import Budget, Night, Project
from reviews.models import AuditEvent
from reviews.views.budgets import bound_problem


@pytest.fixture
def budgeted_project(db):
    """A project with a budget of $12.50 and tonight's night partly spent."""
    project = Project.objects.create(slug="shop", repo_path="/srv/shop.git")
    Budget.objects.create(project=project, max_cost_usd=Decimal("12.50"))
    now = timezone.now()
    Night.objects.create(
        project=project,
        date=now.date(),
        window_start=now - timedelta(hours=1),
        window_end=now + timedelta(hours=3),
        limit_replays=20,
        limit_sandbox_seconds=14_400,
        limit_tokens=2_000_000,
        limit_cost_usd=Decimal("12.50"),
        used_replays=5,
        reserved_replays=2,
        used_cost_usd=Decimal("3.25"),
        deferred=4,
    )
    return project


def form_data(**overrides):
    data = {
        "budget-max_replays": "30",
        "budget-max_sandbox_minutes": "240",
        "budget-max_tokens": "2000000",
        "budget-max_cost_usd": "12.50",
        "budget-window_start_hour": "1",
        "budget-window_end_hour": "6",
        "budget-timezone": "Europe/Berlin",
        "caps-agentic_enabled": "on",
        "caps-time_limit_seconds": "900",
        "caps-test_time_limit_seconds": "",
        "caps-memory_limit_mb": "2048",
        "caps-max_processes": "256",
        "caps-max_disk_mb": "2048",
        "caps-max_files": "200000",
        "caps-max_tokens": "",
        "caps-max_turns": "40",
        "caps-flake_reruns": "2",
        "caps-evidence_floor": "1",
        "caps-max_attempts": "3",
    }
    data.update(overrides)
    return data


def test_an_admin_edits_a_budget_and_the_change_is_audited(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:budget_edit", args=["shop"]),
        form_data(),
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert b"Saved." in response.content

    budget = Budget.objects.get(project=budgeted_project)
    budgeted_project.refresh_from_db()
    assert (budget.max_replays, budget.timezone) == (30, "Europe/Berlin")
    assert (budgeted_project.time_limit_seconds, budgeted_project.max_turns) == (
        900,
        40,
    )
    assert budgeted_project.agentic_enabled
    event = AuditEvent.objects.get(action="budget.update")
    assert event.actor == admin_user
    assert event.before["budget"]["max_replays"] == 20
    assert event.after["budget"]["max_replays"] == 30
    assert event.before["budget"]["timezone"] == "UTC"
    assert event.after["caps"]["time_limit_seconds"] == 900
    assert "max_cost_usd" not in event.after["budget"]  # unchanged: not listed


def test_saving_without_a_change_writes_no_audit_event(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    data = form_data(
        **{
            "budget-max_replays": "20",
            "budget-timezone": "UTC",
            "caps-agentic_enabled": "",
            "caps-time_limit_seconds": "600",
            "caps-max_turns": "",
            "caps-memory_limit_mb": "2048",
        }
    )
    data.pop("caps-agentic_enabled")
    client.post(reverse("reviews:budget_edit", args=["shop"]), data)
    assert not AuditEvent.objects.exists()


def test_a_bad_value_is_refused_and_nothing_changes(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:budget_edit", args=["shop"]),
        form_data(**{"budget-timezone": "Mars/Olympus", "budget-max_replays": "99"}),
    )
    assert response.status_code == 400
    assert b"is not a known time zone" in response.content
    assert Budget.objects.get(project=budgeted_project).max_replays == 20
    assert not AuditEvent.objects.exists()


def test_a_lead_reads_the_page_but_cannot_edit(client, lead, budgeted_project):
    client.force_login(lead)
    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "Night of" in page and "12.50" in page
    assert 'name="budget-max_replays"' not in page
    response = client.post(reverse("reviews:budget_edit", args=["shop"]), form_data())
    assert response.status_code == 403
    assert Budget.objects.get(project=budgeted_project).max_replays == 20


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
    assert "<strong>4</strong>" in page  # deferred runs stand out


def test_both_max_tokens_changed_in_one_save_are_each_audited_under_their_owner(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    client.post(
        reverse("reviews:budget_edit", args=["shop"]),
        form_data(**{"budget-max_tokens": "3000000", "caps-max_tokens": "50000"}),
    )
    event = AuditEvent.objects.get(action="budget.update")
    assert event.before["budget"]["max_tokens"] == 2_000_000
    assert event.after["budget"]["max_tokens"] == 3_000_000
    assert event.before["caps"]["max_tokens"] is None
    assert event.after["caps"]["max_tokens"] == 50_000

    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "Tokens per night</code> 2000000 → 3000000" in page
    assert "Tokens per replay</code> None → 50000" in page


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("budget-max_cost_usd", "-5", "Cannot be negative."),
        ("budget-max_replays", "-1", "Ensure this value is greater than or equal"),
        ("budget-max_replays", "1000001", "At most 100,000 replays."),
        ("budget-window_start_hour", "30", "At most 23."),
        ("budget-window_end_hour", "1", "The window must last at least one hour"),
        ("caps-time_limit_seconds", "0", "At least 1 s."),
        ("caps-time_limit_seconds", "999999", "At most 86,400 s."),
        ("caps-memory_limit_mb", "1", "At least 64 MiB."),
        ("caps-max_processes", "0", "At least 1 process."),
        ("caps-max_disk_mb", "1", "At least 16 MiB."),
        ("caps-max_files", "5", "At least 100 files."),
        ("caps-max_tokens", "0", "At least 1 token."),
        ("caps-max_turns", "0", "At least 1 turn."),
        ("caps-flake_reruns", "50", "At most 10 reruns."),
        ("caps-max_attempts", "0", "At least 1 attempt."),
        ("caps-test_time_limit_seconds", "0", "At least 1 s."),
    ],
)
def test_each_budget_and_cap_field_refuses_a_bad_value_in_place(
    client, admin_user, budgeted_project, field, value, message
):
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:budget_edit", args=["shop"]),
        form_data(**{field: value}),
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html
    # The message sits with its field.
    at = html.index(f'name="{field}"')
    assert html.rfind(message, 0, at) > html.rfind("<label", 0, at) - 400
    assert Budget.objects.get(project=budgeted_project).max_replays == 20
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
    response = client.post(
        reverse("reviews:budget_edit", args=["shop"]),
        form_data(
            **{
                "budget-tape_enabled": "on",
                "budget-tape_max_replays": "12",
                "budget-tape_max_sandbox_minutes": "90",
            }
        ),
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    budget = Budget.objects.get(project=budgeted_project)
    assert (budget.tape_enabled, budget.tape_max_replays) == (True, 12)
    assert budget.tape_max_sandbox_minutes == 90
    event = AuditEvent.objects.get(action="budget.update")
    assert event.after["budget"]["tape_max_sandbox_minutes"] == 90
    # The card now shows the tape tier's share of tonight beside the agentic one.
    Night.objects.filter(project=budgeted_project).update(
        tape_limit_replays=12, tape_used_replays=3, tape_deferred=2
    )
    page = client.get(reverse("reviews:budgets")).content.decode()
    assert "Tape tier, before the others" in page
    assert "Tape replays: 3 used, 0 reserved of 12" in page
    assert "<strong>2 deferred</strong> by the tape share" in page


def test_the_tape_share_has_bounds_and_a_blank_keeps_it(
    client, admin_user, budgeted_project
):
    client.force_login(admin_user)
    url = reverse("reviews:budget_edit", args=["shop"])
    refused = client.post(url, form_data(**{"budget-tape_max_replays": "100001"}))
    assert refused.status_code == 400
    client.post(
        url, form_data(**{"budget-tape_max_replays": "", "budget-tape_enabled": "on"})
    )
    budget = Budget.objects.get(project=budgeted_project)
    assert (budget.tape_enabled, budget.tape_max_replays) == (True, 50)
