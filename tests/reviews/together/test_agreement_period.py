"""The agreement page's period: a refused one keeps both dates as typed,
says why, and shows the default period whole, as the Done and Trends pages
do; never a typed start beside a default end."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.dateformat import format as date_format

from tests.factories import make_project

AGREEMENT = "/agreement/"


@pytest.fixture
def as_lead(lead) -> Client:
    client = Client()
    client.force_login(lead)
    return client


def shown(since: date, until: date) -> str:
    return (
        f"Decisions from {date_format(since, 'D j M Y')} "
        f"to {date_format(until, 'D j M Y')}."
    )


def test_a_period_that_ends_before_it_starts_keeps_both_dates_and_shows_the_default(
    as_lead,
):
    make_project("shop")
    today = timezone.localdate()
    since, until = today + timedelta(days=4), today - timedelta(days=5)

    page = as_lead.get(
        AGREEMENT,
        {"project": "shop", "since": since.isoformat(), "until": until.isoformat()},
    ).content.decode()

    assert f'name="since" value="{since.isoformat()}"' in page
    assert f'name="until" value="{until.isoformat()}"' in page
    assert (
        "To: The period ends before it starts. Shown for the last 28 days instead."
        in page
    )
    assert shown(today - timedelta(days=27), today) in page
    assert '<option value="shop" selected>shop</option>' in page


def test_an_end_that_is_no_date_keeps_the_start_typed_and_shows_the_default(as_lead):
    today = timezone.localdate()
    since = today - timedelta(days=3)

    page = as_lead.get(
        AGREEMENT, {"since": since.isoformat(), "until": "2026-13-45"}
    ).content.decode()

    assert f'name="since" value="{since.isoformat()}"' in page
    assert 'name="until" value="2026-13-45"' in page
    assert "Shown for the last 28 days instead." in page
    assert shown(today - timedelta(days=27), today) in page


def test_a_period_asked_for_is_shown_and_a_start_alone_ahead_is_never_reversed(
    as_lead,
):
    page = as_lead.get(
        AGREEMENT, {"since": "2026-11-01", "until": "2026-11-30"}
    ).content.decode()
    assert 'name="since" value="2026-11-01"' in page
    assert shown(date(2026, 11, 1), date(2026, 11, 30)) in page
    assert 'class="error"' not in page

    ahead = timezone.localdate() + timedelta(days=4)
    page = as_lead.get(AGREEMENT, {"since": ahead.isoformat()}).content.decode()
    assert shown(ahead, ahead) in page
