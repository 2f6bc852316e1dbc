"""Two pages deciding one replay: a decision taken from a page opened before
another one was recorded (or taken back) is refused with 409 and saves
nothing; the page then shows what stands and who decided it."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from replayhub import roles
from reviews.models import Review, ReviewPolicy
from tests.factories import make_project, make_replay, make_user

SHOWN = re.compile(r'name="standing" value="([^"]*)"')


def opened(client: Client, replay) -> dict:
    """The decision form's hidden fields as the page sends them."""
    page = client.get(f"/replays/{replay.pk}/").content.decode()
    (shown,) = SHOWN.findall(page)
    return {"standing": shown}


def as_user(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def vera(db):
    return make_user("vera", roles.REVIEWER)


def test_a_decision_from_a_page_opened_before_another_reviewers_is_refused(
    reviewer, vera
):
    replay = make_replay(verdict="divergent")
    rita, other = as_user(reviewer), as_user(vera)
    rita_page = opened(rita, replay)
    vera_page = opened(other, replay)

    other.post(f"/replays/{replay.pk}/", {"decision": "confirm", **vera_page})
    refused = rita.post(
        f"/replays/{replay.pk}/",
        {"decision": "overturn", "verdict_after": "equivalent", **rita_page},
    )

    assert refused.status_code == 409
    page = refused.content.decode()
    (line,) = re.findall(r'id="decided-meanwhile"[^>]*>([^<]*)<', page)
    assert line.startswith("vera confirmed divergent at ")
    assert "nothing was saved" in line
    assert 'id="human-decision"' in page
    (standing,) = Review.objects.all()
    assert (standing.reviewer, standing.decision) == (vera, "confirm")


def test_the_second_tab_of_one_reviewer_is_refused_and_says_it_was_them(reviewer):
    replay = make_replay(verdict="divergent")
    rita = as_user(reviewer)
    first_tab, second_tab = opened(rita, replay), opened(rita, replay)

    rita.post(f"/replays/{replay.pk}/", {"decision": "confirm", **first_tab})
    refused = rita.post(f"/replays/{replay.pk}/", {"decision": "rerun", **second_tab})

    assert refused.status_code == 409
    assert "You (in another page) confirmed divergent" in refused.content.decode()
    assert Review.objects.get().decision == "confirm"


def test_a_decision_from_the_page_as_it_stands_is_recorded_beside_the_other(
    reviewer, vera
):
    replay = make_replay(verdict="divergent")
    other = as_user(vera)
    other.post(
        f"/replays/{replay.pk}/", {"decision": "confirm", **opened(other, replay)}
    )
    rita = as_user(reviewer)

    answer = rita.post(
        f"/replays/{replay.pk}/",
        {"decision": "overturn", "verdict_after": "equivalent", **opened(rita, replay)},
    )

    assert answer.status_code == 302
    assert [r.reviewer for r in Review.objects.order_by("pk")] == [vera, reviewer]


def test_an_undo_then_a_decision_from_the_reloaded_page_is_recorded(reviewer):
    replay = make_replay(verdict="divergent")
    rita = as_user(reviewer)
    rita.post(f"/replays/{replay.pk}/", {"decision": "confirm", **opened(rita, replay)})
    decided = opened(rita, replay)
    first = Review.objects.get()
    rita.post(f"/reviews/{first.pk}/undo/")
    first.refresh_from_db()
    assert first.undone_at is not None

    # The page that showed the decision taken back is older than the replay.
    refused = rita.post(f"/replays/{replay.pk}/", {"decision": "confirm", **decided})
    assert refused.status_code == 409
    assert "taken back meanwhile: nothing was saved" in refused.content.decode()

    answer = rita.post(
        f"/replays/{replay.pk}/",
        {"decision": "overturn", "verdict_after": "equivalent", **opened(rita, replay)},
    )
    assert answer.status_code == 302
    assert Review.objects.standing().get().verdict_after == "equivalent"


def test_a_decision_whose_page_value_is_unreadable_saves_nothing(reviewer):
    replay = make_replay(verdict="divergent")
    answer = as_user(reviewer).post(
        f"/replays/{replay.pk}/", {"decision": "confirm", "standing": "x1"}
    )
    assert answer.status_code == 400
    assert "did not say which decision its page showed" in answer.content.decode()
    assert not Review.objects.exists()


def test_a_blind_judgement_is_taken_as_given_until_the_reviewer_has_judged(
    reviewer, vera
):
    project = make_project()
    ReviewPolicy.objects.create(project=project, blind=True)
    replay = make_replay(verdict="divergent", project=project)
    rita, other = as_user(reviewer), as_user(vera)
    first_tab, second_tab = opened(rita, replay), opened(rita, replay)
    # A blind page tells nothing of a decision standing.
    other.post(f"/replays/{replay.pk}/", {"decision": "rerun", **opened(other, replay)})
    assert opened(rita, replay) == first_tab == {"standing": "blind"}

    judged = rita.post(
        f"/replays/{replay.pk}/", {"blind_verdict": "divergent", **first_tab}
    )
    assert judged.status_code == 302
    again = rita.post(
        f"/replays/{replay.pk}/", {"blind_verdict": "equivalent", **second_tab}
    )

    assert again.status_code == 409
    assert "You (in another page) confirmed divergent" in again.content.decode()
    assert [(r.reviewer, r.decision) for r in Review.objects.order_by("pk")] == [
        (vera, "rerun"),
        (reviewer, "confirm"),
    ]
