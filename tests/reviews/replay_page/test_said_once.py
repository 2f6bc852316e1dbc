"""What a reviewer reads after deciding says each thing once, and a time
names its zone; the agreement page dates its period as the trends do."""

from __future__ import annotations

from datetime import date

import pytest
from django.test import Client
from django.urls import reverse

from reviews.models import Label
from tests.factories import make_replay, make_user

pytestmark = pytest.mark.django_db


def as_user(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_undo_bar_says_what_was_recorded_and_no_flash_repeats_it(reviewer):
    first = make_replay(verdict="equivalent")
    make_replay(verdict="divergent")
    client = as_user(reviewer)

    page = client.post(
        reverse("reviews:replay_decide", args=[first.pk]),
        {"decision": "confirm"},
        follow=True,
    ).content.decode()

    sentence = f"Replay {first.pk}: confirmed equivalent."
    assert page.count(sentence) == 1
    assert 'id="undo"' in page


def test_a_rerun_has_no_undo_and_is_still_said(reviewer):
    first = make_replay(verdict="equivalent")
    client = as_user(reviewer)

    page = client.post(
        reverse("reviews:replay_decide", args=[first.pk]),
        {"decision": "rerun"},
        follow=True,
    ).content.decode()

    assert page.count(f"Replay {first.pk}: rerun requested.") == 1
    assert 'id="undo"' not in page


def test_the_undo_bars_time_names_its_zone(reviewer, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    replay = make_replay(verdict="equivalent")
    client = as_user(reviewer)

    page = client.post(
        reverse("reviews:replay_decide", args=[replay.pk]),
        {"decision": "confirm"},
        follow=True,
    ).content.decode()

    bar = page.split('id="undo"')[1].split("</form>")[0]
    assert "CET</time>" in bar or "CEST</time>" in bar


def test_a_required_labels_error_is_shown_once_beside_the_label(reviewer):
    replay = make_replay(verdict="divergent")
    Label.objects.create(
        project=replay.project, name="would merge", kind="yes_no", required=True
    )
    client = as_user(reviewer)

    refused = client.post(
        reverse("reviews:replay_decide", args=[replay.pk]), {"decision": "confirm"}
    )

    html = refused.content.decode()
    assert refused.status_code == 400
    # Once as text (its title may hold it too, for when it is cut short).
    assert html.count(">Set the label “would merge”.<") == 1
    assert 'id="decision-errors"' not in html


def test_the_agreement_page_dates_its_period_as_the_trends_do():
    lead = make_user("leo", "lead")
    client = as_user(lead)

    html = client.get(
        reverse("reviews:agreement"), {"since": "2026-02-01", "until": "2026-02-20"}
    ).content.decode()

    assert f"Decisions from {date(2026, 2, 1):%a %-d %b %Y}" in html
    assert "Sun 1 Feb 2026 to Fri 20 Feb 2026" in html
