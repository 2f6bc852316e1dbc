"""Decisions: confirm, overturn, rerun; each audited, then the next item opens."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

from replayhub.models import Replay, Trigger
from reviews.models import AuditEvent, Claim, Review
from reviews.services import ClaimHeld, NotDecidable, claim_take, review_decide
from tests.factories import make_replay, make_user


def decide_url(replay) -> str:
    return reverse("reviews:replay_decide", args=[replay.pk])


def detail_url(replay) -> str:
    return reverse("reviews:replay_detail", args=[replay.pk])


@pytest.fixture
def as_reviewer(client, reviewer):
    client.force_login(reviewer)
    return client


def test_confirming_takes_the_item_out_of_the_queue_and_audits_it(reviewer):
    replay = make_replay(verdict="equivalent")
    claim_take(replay=replay, reviewer=reviewer)

    review = review_decide(
        replay=replay, reviewer=reviewer, decision="confirm", note="Same idea."
    )

    replay.refresh_from_db()
    assert replay.review_band is None
    assert replay.verdict == "equivalent"
    assert not Claim.objects.exists()
    assert (review.verdict_before, review.verdict_after) == ("equivalent", "equivalent")
    event = AuditEvent.objects.get(action="review.confirm")
    assert event.actor == reviewer
    assert event.object_id == str(replay.pk)
    assert event.before == {
        "verdict": "equivalent",
        "review_band": 1,
        "claimed_by": "rita",
    }
    assert event.after == {
        "decision": "confirm",
        "verdict": "equivalent",
        "review_band": None,
        "note": "Same idea.",
    }


def test_overturning_records_the_corrected_verdict(reviewer):
    replay = make_replay(verdict="equivalent")

    review = review_decide(
        replay=replay, reviewer=reviewer, decision="overturn", verdict_after="divergent"
    )

    assert (review.verdict_before, review.verdict_after) == ("equivalent", "divergent")
    event = AuditEvent.objects.get(action="review.overturn")
    assert event.after["verdict"] == "divergent"


@pytest.mark.parametrize("verdict_after", [None, "", "equivalent", "excellent"])
def test_an_overturn_must_name_a_different_verdict(reviewer, verdict_after):
    replay = make_replay(verdict="equivalent")

    with pytest.raises(NotDecidable):
        review_decide(
            replay=replay,
            reviewer=reviewer,
            decision="overturn",
            verdict_after=verdict_after,
        )

    assert not Review.objects.exists()
    assert Replay.objects.get(pk=replay.pk).review_band == 1


def test_a_rerun_queues_a_fresh_replay_of_the_same_run(reviewer):
    replay = make_replay(verdict="inconclusive")

    review_decide(replay=replay, reviewer=reviewer, decision="rerun")

    fresh = Replay.objects.exclude(pk=replay.pk).get()
    assert fresh.run_id == replay.run_id
    assert fresh.trigger == Trigger.RERUN
    assert fresh.requested_by == reviewer
    assert fresh.status == "queued"
    assert fresh.attempt == 2
    event = AuditEvent.objects.get(action="review.rerun")
    assert event.after["rerun_replay"] == fresh.pk


def test_a_decision_on_an_item_someone_else_holds_is_refused(reviewer):
    replay = make_replay(verdict="equivalent")
    claim_take(replay=replay, reviewer=make_user("remy", "reviewer"))

    with pytest.raises(ClaimHeld):
        review_decide(replay=replay, reviewer=reviewer, decision="confirm")

    assert not Review.objects.exists()


def test_an_unfinished_replay_cannot_be_decided(reviewer):
    done = make_replay(verdict="equivalent")
    running = Replay.objects.create(run=done.run, project=done.project)

    with pytest.raises(NotDecidable):
        review_decide(replay=running, reviewer=reviewer, decision="confirm")


def test_after_a_decision_the_next_item_opens(as_reviewer):
    first = make_replay(verdict="equivalent")
    second = make_replay(verdict="divergent")

    response = as_reviewer.post(decide_url(first), {"decision": "confirm"})

    assert response.status_code == 302
    assert response["Location"] == detail_url(second)
    assert Claim.objects.get().replay == second


def test_triage_from_a_filtered_queue_stays_in_its_filter(as_reviewer):
    """Opened from the queue filtered to divergent replays, a replay's next
    item (after a decision, or Next) and its way back keep that filter."""
    first = make_replay(verdict="divergent")
    make_replay(verdict="equivalent")  # first in the queue's order otherwise
    second = make_replay(verdict="divergent")
    queue = as_reviewer.get(reverse("reviews:queue"), {"verdict": "divergent"})
    opened = f"{detail_url(first)}?verdict=divergent"
    assert f'href="{opened}"' in queue.content.decode()

    page = as_reviewer.get(opened).content.decode()
    assert f'href="/?verdict=divergent&amp;at={first.pk}" data-back' in page
    assert f'action="{decide_url(first)}' not in page  # the page's own address
    assert f'action="{opened}"' in page
    response = as_reviewer.post(opened, {"decision": "confirm"})
    assert response["Location"] == f"{detail_url(second)}?verdict=divergent"

    # Nothing divergent left: back to the filtered queue, saying so.
    response = as_reviewer.post(
        f"{detail_url(second)}?verdict=divergent", {"decision": "confirm"}
    )
    assert response["Location"] == "/?verdict=divergent"
    nothing = as_reviewer.get(response["Location"]).content.decode()
    assert "Nothing left to review in these filters." in nothing


def test_next_from_a_filtered_replay_page_keeps_the_filter(as_reviewer):
    make_replay(verdict="equivalent")
    wanted = make_replay(verdict="divergent")
    next_url = reverse("reviews:next") + "?verdict=divergent"
    page = as_reviewer.get(f"{detail_url(wanted)}?verdict=divergent").content
    assert f'action="{next_url}"' in page.decode()

    response = as_reviewer.post(next_url)

    assert response["Location"] == f"{detail_url(wanted)}?verdict=divergent"


def test_after_the_last_decision_the_queue_opens(as_reviewer):
    only = make_replay(verdict="equivalent")

    response = as_reviewer.post(
        decide_url(only),
        {"decision": "overturn", "verdict_after": "divergent"},
        follow=True,
    )

    assert response.redirect_chain[-1][0] == reverse("reviews:queue")
    assert b"overturned equivalent to divergent." in response.content
    assert b"The queue is empty." in response.content


def test_an_invalid_overturn_is_shown_on_the_page(as_reviewer):
    replay = make_replay(verdict="equivalent")

    response = as_reviewer.post(decide_url(replay), {"decision": "overturn"})

    assert response.status_code == 400
    assert b"Choose the corrected verdict." in response.content
    assert not Review.objects.exists()


def test_a_decision_sent_with_htmx_is_refused_in_place_or_sends_the_browser_on(
    as_reviewer,
):
    """The page's decision form is sent with htmx: a refused decision is the
    page again with its status (swapped in place, no history entry holding
    a post), one taken sends the browser where a plain post is redirected."""
    first = make_replay(verdict="equivalent")
    second = make_replay(verdict="divergent")
    htmx = {"HX-Request": "true"}
    page = as_reviewer.get(detail_url(first)).content.decode()
    assert f'hx-post="{detail_url(first)}"' in page

    refused = as_reviewer.post(
        detail_url(first), {"decision": "overturn"}, headers=htmx
    )

    assert refused.status_code == 400
    assert 'id="decision-errors"' in refused.content.decode()
    assert "Choose the corrected verdict." in refused.content.decode()
    assert not Review.objects.exists()

    taken = as_reviewer.post(detail_url(first), {"decision": "confirm"}, headers=htmx)

    assert taken.status_code == 200
    assert taken["HX-Redirect"] == detail_url(second)
    assert Review.objects.get().replay == first


def test_the_overturn_choices_leave_out_the_current_verdict(as_reviewer):
    replay = make_replay(verdict="divergent")

    html = as_reviewer.get(detail_url(replay)).content.decode()

    assert '<option value="equivalent" data-key="2">2 · Equivalent' in html
    assert '<option value="divergent"' not in html


def test_a_decision_on_a_held_item_through_the_page_is_refused(as_reviewer):
    replay = make_replay(verdict="equivalent")
    claim_take(replay=replay, reviewer=make_user("remy", "reviewer"))

    response = as_reviewer.post(
        decide_url(replay), {"decision": "confirm"}, follow=True
    )

    assert b"remy holds this replay until" in response.content
    assert not Review.objects.exists()


@pytest.mark.parametrize("role", ["lead", "nobody"])
def test_a_forged_decision_from_a_reader_is_forbidden(client, db, request, role):
    replay = make_replay(verdict="equivalent")
    client.force_login(request.getfixturevalue(role))

    response = client.post(decide_url(replay), {"decision": "confirm"})

    assert response.status_code == 403
    assert not Review.objects.exists()
    assert Replay.objects.get(pk=replay.pk).review_band == 1


@pytest.mark.parametrize("name", ["reviews:next", "reviews:replay_claim"])
def test_leads_cannot_claim(client, lead, name):
    replay = make_replay(verdict="equivalent")
    client.force_login(lead)
    args = [] if name == "reviews:next" else [replay.pk]

    assert client.post(reverse(name, args=args)).status_code == 403
    assert not Claim.objects.exists()


def test_the_lead_sees_no_decision_buttons(client, lead):
    replay = make_replay(verdict="equivalent")
    client.force_login(lead)

    html = client.get(detail_url(replay)).content.decode()

    assert 'name="decision"' not in html
    assert 'id="next-form"' not in html
    assert "Read only" in html


def test_decisions_need_the_csrf_token(reviewer):
    replay = make_replay(verdict="equivalent")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(reviewer)

    response = browser.post(decide_url(replay), {"decision": "confirm"})

    assert response.status_code == 403
    assert not Review.objects.exists()


@pytest.mark.parametrize("name", ["reviews:replay_claim", "reviews:replay_release"])
def test_mutations_refuse_get(as_reviewer, name):
    replay = make_replay(verdict="equivalent")
    assert as_reviewer.get(reverse(name, args=[replay.pk])).status_code == 405
    assert as_reviewer.get(reverse("reviews:next")).status_code == 405


def test_opening_the_decision_address_leads_back_to_the_page(as_reviewer):
    replay = make_replay(verdict="equivalent")

    response = as_reviewer.get(decide_url(replay))

    assert response.status_code == 302
    assert response["Location"] == detail_url(replay)
    assert not Review.objects.exists()


def test_the_decision_history_and_audit_trail_are_on_the_page(as_reviewer, reviewer):
    replay = make_replay(verdict="equivalent", finished_ago=timedelta(minutes=3))
    review_decide(
        replay=replay,
        reviewer=reviewer,
        decision="overturn",
        verdict_after="divergent",
        note="Tests <pass> but the change drops a guard.",
    )

    html = as_reviewer.get(detail_url(replay)).content.decode()

    assert "<b>rita</b> overturned <em>equivalent</em> to <em>divergent</em>" in html
    assert "Tests &lt;pass&gt; but the change drops a guard." in html
    # Each audit event reads as a sentence; the raw values stay in the admin.
    assert html.count("overturned <em>equivalent</em> to <em>divergent</em>") == 2
    assert "note: <q>Tests &lt;pass&gt; but the change drops a guard.</q>" in html
    assert "review_band=" not in html and "claimed_by=" not in html
