"""Taking a decision back: one's own, the latest, shortly after; always audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from replayhub.models import Replay
from reviews.models import AuditEvent, Review
from reviews.replay_page.overrule import contradicted
from reviews.services import (
    NotUndoable,
    OverrulesEvidence,
    review_decide,
    review_undo,
)
from tests.factories import make_replay, make_user

FAILED_TREES = [
    {
        "name": "tree identity",
        "outcome": "fail",
        "evidence_class": "cryptographically_verified",
        "detail": "The two result trees have different tree hashes.",
    }
]


def test_a_corrected_verdict_contradicting_the_tree_hashes_is_named():
    assert contradicted(FAILED_TREES, "identical") == [
        "The tree identity check failed (The two result trees have different "
        "tree hashes), so the trees are not identical."
    ]
    assert contradicted(FAILED_TREES, "inconclusive") == []
    passed = [{**FAILED_TREES[0], "outcome": "pass", "detail": ""}]
    assert contradicted(passed, "divergent") == [
        "The tree identity check passed, so the trees are identical."
    ]
    assert contradicted(passed, "identical") == []
    observed = [{**FAILED_TREES[0], "evidence_class": "independently_observed"}]
    assert contradicted(observed, "identical") == []


def test_an_overturn_against_verified_evidence_needs_the_explicit_yes(reviewer):
    replay = make_replay(verdict="divergent")
    with pytest.raises(OverrulesEvidence):
        review_decide(
            replay=replay,
            reviewer=reviewer,
            decision="overturn",
            verdict_after="identical",
        )
    assert not Review.objects.exists()
    review_decide(
        replay=replay,
        reviewer=reviewer,
        decision="overturn",
        verdict_after="identical",
        overrule=True,
    )
    assert Review.objects.get().verdict_after == "identical"


def test_the_page_asks_again_with_409_and_keeps_the_choice(client, reviewer):
    replay = make_replay(verdict="divergent")
    client.force_login(reviewer)
    url = reverse("reviews:replay_detail", args=[replay.pk])
    data = {"decision": "overturn", "verdict_after": "identical", "note": "why"}

    response = client.post(url, data)

    assert response.status_code == 409
    html = response.content.decode()
    assert "contradicts cryptographically verified evidence" in html
    assert 'name="overrule" value="on"' in html
    assert not Review.objects.exists()
    assert client.post(url, {**data, "overrule": "on"}).status_code == 302
    assert Review.objects.get().note == "why"


def test_undo_puts_the_replay_back_in_its_band_held_by_the_reviewer(reviewer):
    replay = make_replay(verdict="divergent")
    band = replay.review_band
    review = review_decide(
        replay=replay,
        reviewer=reviewer,
        decision="overturn",
        verdict_after="inconclusive",
    )
    assert Replay.objects.get(pk=replay.pk).review_band is None

    review_undo(review=review, reviewer=reviewer)

    assert Replay.objects.get(pk=replay.pk).review_band == band
    assert Review.objects.get().undone_at is not None
    assert Review.objects.standing().count() == 0
    event = AuditEvent.objects.get(action="review.undo")
    assert event.before["decision"] == "overturn"
    assert event.after["review_band"] == band


def test_only_ones_own_latest_decision_and_only_for_a_while(reviewer):
    replay = make_replay(verdict="equivalent")
    review = review_decide(replay=replay, reviewer=reviewer, decision="confirm")
    with pytest.raises(NotUndoable, match="only the reviewer"):
        review_undo(review=review, reviewer=make_user("remy", "reviewer"))
    later = timezone.now() + timedelta(minutes=6)
    with pytest.raises(NotUndoable, match="time"):
        review_undo(review=review, reviewer=reviewer, now=later)
    rerun = review_decide(replay=replay, reviewer=reviewer, decision="rerun")
    with pytest.raises(NotUndoable, match="rerun"):
        review_undo(review=rerun, reviewer=reviewer)
    with pytest.raises(NotUndoable, match="later decision"):
        review_undo(review=review, reviewer=reviewer)
    assert not AuditEvent.objects.filter(action="review.undo").exists()


def test_a_refused_undo_says_why_on_the_page(client, reviewer):
    replay = make_replay(verdict="equivalent")
    review = review_decide(replay=replay, reviewer=reviewer, decision="confirm")
    Review.objects.filter(pk=review.pk).update(
        created_at=timezone.now() - timedelta(hours=1)
    )
    client.force_login(reviewer)

    response = client.post(
        reverse("reviews:review_undo", args=[review.pk]), follow=True
    )

    assert b"Not taken back: the time to take this decision back has passed." in (
        response.content
    )
    assert Review.objects.standing().count() == 1


def test_taking_back_a_second_decision_says_the_first_still_stands(client, reviewer):
    replay = make_replay(verdict="equivalent")
    review_decide(replay=replay, reviewer=reviewer, decision="confirm")
    # The same key pressed again on the decided replay: a second confirm.
    second = review_decide(replay=replay, reviewer=reviewer, decision="confirm")
    client.force_login(reviewer)

    response = client.post(
        reverse("reviews:review_undo", args=[second.pk]), follow=True
    )

    page = response.content.decode()
    assert "is taken back; an earlier decision still stands." in page
    assert "yours to decide again" not in page
    # Not back in the queue: the first confirm stands, and the trail says so.
    assert Replay.objects.get(pk=replay.pk).review_band is None
    assert "an earlier decision still stands" in page.split("Decisions and audit")[-1]
    assert "back in the queue" not in page


def test_the_page_an_undo_leads_to_shows_the_note_taken_back_once(client, reviewer):
    """Undo leads back to the replay to decide again, the note written with
    the decision taken back in the form again; a later visit starts empty."""
    replay = make_replay(verdict="equivalent")
    client.force_login(reviewer)
    page = reverse("reviews:replay_detail", args=[replay.pk])
    client.post(page, {"decision": "confirm", "note": "Same fix, other names."})
    review = Review.objects.get()

    response = client.post(
        reverse("reviews:review_undo", args=[review.pk]), follow=True
    )

    assert response.redirect_chain[-1][0] == page
    assert response.context["form"]["note"].value() == "Same fix, other names."
    assert client.get(page).context["form"]["note"].value() in (None, "")
