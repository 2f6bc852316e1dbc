"""A night started from a budget card: what ``nightly --now`` does, said in
its lines, idempotent as it is, audited, an admin's only and by POST only."""

from __future__ import annotations

import pytest
from django.utils import timezone

from replayhub.models import Night, Project, Replay
from reviews.models import AuditEvent
from tests.factories import make_budget, make_runs, share_of

URL = "/budgets/shop/night/"


@pytest.fixture
def project(db):
    project = Project.objects.create(
        slug="shop",
        repo_path="/srv/shop.git",
        agentic_enabled=True,
        time_limit_seconds=300,
        flake_reruns=0,
    )
    make_budget(
        project,
        window_start_hour=22,
        window_end_hour=6,
        timezone="UTC",
        shares={"agentic": {"max_replays": 3}},
    )
    make_runs(project, 4, now=timezone.now())
    return project


def said(response) -> list[str]:
    """The messages the budgets page shows after the redirect."""
    assert response.redirect_chain == [("/budgets/#budget-shop", 302)]
    return [str(m) for m in response.context["messages"]]


def test_an_admin_starts_tonight_and_a_second_press_admits_nothing_more(
    client, admin_user, project
):
    client.force_login(admin_user)

    first = client.post(URL, follow=True)

    night = Night.objects.get(project=project)
    assert said(first) == [
        f"shop night of {night.date}: admitted 3, deferred 1 (replays reserved 3/3)"
    ]
    assert Replay.objects.filter(project=project).count() == 3

    second = client.post(URL, follow=True)

    assert said(second) == [
        f"shop night of {night.date}: admitted 0, deferred 1 (replays reserved 3/3)",
        "shop: already admitted tonight: 3",
    ]
    assert Replay.objects.filter(project=project).count() == 3
    assert share_of(night).reserved_replays == 3
    events = AuditEvent.objects.filter(action="night.start").order_by("pk")
    assert [(e.actor, e.object_id) for e in events] == [
        (admin_user, str(project.pk)),
        (admin_user, str(project.pk)),
    ]
    assert (events[0].after["admitted"], events[1].after["already_admitted"]) == (
        3,
        3,
    )
    page = second.content.decode()
    assert "shop: already admitted tonight: 3" in page
    assert "Start tonight now" in page


def test_only_an_admin_starts_a_night_and_only_by_post(
    client, lead, admin_user, project
):
    client.force_login(lead)
    assert client.post(URL).status_code == 403
    assert "Start tonight now" not in client.get("/budgets/").content.decode()
    client.force_login(admin_user)
    assert client.get(URL).status_code == 405
    assert client.post("/budgets/nowhere/night/").status_code == 404
    assert not Night.objects.exists() and not Replay.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_night_start_is_refused_without_the_csrf_token(admin_user, project):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.post(URL).status_code == 403
    assert not Night.objects.exists()
