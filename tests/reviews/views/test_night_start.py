"""A night started from a budget card: what ``nightly --now`` does, said in
its lines, idempotent as it is, audited, an admin's only and by POST only."""

from __future__ import annotations

import re

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
    """The lines the budgets page shows beside the button after the redirect."""
    assert response.redirect_chain == [("/budgets/", 302)]
    (card,) = response.context["cards"]
    return card["started"]["lines"]


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
        f"shop night of {night.date} was already started: admitted 0 now, "
        "deferred 1; before this press 3 admitted (replays 3/3: 0 done, 3 in "
        "flight)"
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
    assert "before this press 3 admitted" in page
    assert "Start tonight now" in page


def test_a_second_press_after_the_replays_ran_says_what_the_night_spent(
    client, admin_user, project
):
    """Finished replays give their reservation back: the second press says
    the night is started with the replays it spent, not "reserved 0/3"."""
    client.force_login(admin_user)
    client.post(URL)
    night = Night.objects.get(project=project)
    share = share_of(night)
    share.used_replays, share.reserved_replays = 2, 1
    share.save(update_fields=["used_replays", "reserved_replays"])

    second = client.post(URL, follow=True)

    assert said(second) == [
        f"shop night of {night.date} was already started: admitted 0 now, "
        "deferred 1; before this press 3 admitted (replays 3/3: 2 done, 1 in "
        "flight)"
    ]
    assert "reserved 1/3" not in second.content.decode()


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


def test_a_run_replayed_on_an_earlier_night_is_replayed_again_as_the_help_says(
    client, admin_user, project
):
    from datetime import timedelta

    from replayhub.nights.scheduler import RETRY_MIN_AGE
    from tests.factories import make_replay

    client.force_login(admin_user)
    runs = list(project.runs.order_by("imported_at"))
    decided = make_replay(
        verdict="divergent", project=project, run=runs[0], finished_ago=timedelta(2)
    )
    decided.review_band = None
    decided.save(update_fields=["review_band"])
    make_replay(
        verdict="divergent", project=project, run=runs[1], finished_ago=timedelta(1)
    )

    client.post(URL, follow=True)

    # The two never replayed, then the least recently replayed, decided or not.
    assert runs[0].replays.count() == 2
    assert runs[1].replays.count() == 1
    page = client.get("/budgets/").content.decode()
    # The help's line, as read: its words without the markup inside it.
    line = page.split('id="night-start-help-shop">')[1].split("\n")[0]
    help_text = re.sub(r"<[^>]*>", "", line)
    assert "runs replayed on earlier nights, decided or not, again" in help_text
    assert "a new replay beside its earlier ones" in help_text
    hours = RETRY_MIN_AGE // timedelta(hours=1)
    assert f"{hours} hours after its last replay" in help_text
    assert "only runs not admitted tonight yet" in help_text
