"""Blind review is blind everywhere: a reviewer who has not judged a replay
reads its automated verdict on no page, partial or API answer."""

from __future__ import annotations

import pytest
from django.urls import reverse

from reviews.models import Review, ReviewPolicy
from reviews.services import review_decide
from tests.factories import make_project, make_replay, make_user

pytestmark = pytest.mark.django_db

REASON = "Both trees pass the test suite"


@pytest.fixture
def blind_replay():
    project = make_project("blind")
    ReviewPolicy.objects.create(project=project, blind=True)
    return make_replay(verdict="equivalent", project=project, reason=REASON)


@pytest.fixture
def rita(client):
    user = make_user("rita", "reviewer")
    client.force_login(user)
    return user


def shows_verdict(html: str) -> bool:
    """The verdict's badge or its reason (a filter's choices name every verdict)."""
    return "badge v-equivalent" in html or "big v-equivalent" in html or REASON in html


def test_no_page_shows_the_verdict_before_the_reviewer_judged(
    client, rita, blind_replay
):
    run = blind_replay.run
    pages = {
        "run": reverse("reviews:run_detail", args=[run.pk]),
        "project": reverse("reviews:project_detail", args=[blind_replay.project.slug]),
        "replay": reverse("reviews:replay_detail", args=[blind_replay.pk]),
        "search": reverse("reviews:search") + f"?q={blind_replay.pk}",
    }
    for name, url in pages.items():
        html = client.get(url).content.decode()
        assert not shows_verdict(html), name
        assert "hidden" in html.lower(), name

    # Listing the project's runs by verdict tells nothing either.
    url = pages["project"] + "?verdict=equivalent"
    assert f"#{blind_replay.pk}<" not in client.get(url).content.decode()


def test_the_queue_puts_blind_items_in_a_neutral_band(client, rita, blind_replay):
    seen = make_replay(verdict="divergent")

    html = client.get(reverse("reviews:queue")).content.decode()

    assert "Blind review: the verdict shows once you have judged" in html
    # Its band's header is not above it, and the band counts leave it out.
    blind_at = html.index(f"#{blind_replay.pk}<")
    assert "Verifier passed, diff diverged" not in html[:blind_at].split("<tbody")[-1]
    assert f"#{seen.pk}<" in html
    filtered = client.get(reverse("reviews:queue") + "?verdict=equivalent")
    assert f"#{blind_replay.pk}<" not in filtered.content.decode()


def test_the_api_hides_the_verdict_until_the_reviewer_judged(
    client, rita, blind_replay
):
    replay_url = f"/api/v1/replays/{blind_replay.pk}"
    run_url = f"/api/v1/runs/{blind_replay.run_id}"

    data = client.get(replay_url).json()
    assert (data["verdict"], data["reason_code"], data["reason"]) == (None,) * 3
    assert data["blind"] and "checks" not in (data["evidence"] or {})
    (listed,) = client.get(run_url).json()["replays"]
    assert listed["verdict"] is None and listed["blind"]

    review_decide(replay=blind_replay, reviewer=rita, decision="confirm", note="judged")
    assert client.get(replay_url).json()["verdict"] == "equivalent"
    assert client.get(run_url).json()["replays"][0]["verdict"] == "equivalent"
    assert Review.objects.filter(reviewer=rita).count() == 1


def test_a_lead_who_does_not_decide_still_reads_the_verdict(client, blind_replay):
    client.force_login(make_user("lena", "lead"))
    data = client.get(f"/api/v1/replays/{blind_replay.pk}").json()
    assert data["verdict"] == "equivalent"
