"""Blind review records the reviewer's own call as given: a judgement that
contradicts verified evidence is not questioned there, since the question
would say what the evidence and the hidden verdict are."""

from __future__ import annotations

from reviews.models import AuditEvent, Review, ReviewPolicy
from tests.factories import make_project, make_replay

TREES_EQUAL = {
    "name": "trees_identical",
    "outcome": "pass",
    "evidence_class": "cryptographically_verified",
    "detail": "tree hashes equal",
}
# What the refusal said, each a word or phrase the blind page keeps back.
HIDDEN = ["identical", "tree identity", "tree hashes", "overrule", "contradicts"]


def test_a_blind_judgement_against_identical_trees_is_saved_and_reveals_nothing(
    client, reviewer
):
    project = make_project()
    ReviewPolicy.objects.create(project=project, blind=True)
    replay = make_replay(verdict="identical", project=project)
    replay.evidence = {"checks": [TREES_EQUAL]}
    replay.save(update_fields=["evidence"])
    client.force_login(reviewer)

    answer = client.post(
        f"/replays/{replay.pk}/",
        {"blind_verdict": "divergent", "standing": "blind", "note": "differs"},
    )

    assert answer.status_code == 302
    body = answer.content.decode().lower()
    assert [word for word in HIDDEN if word in body] == []
    review = Review.objects.get()
    assert (review.decision, review.verdict_after) == ("overturn", "divergent")
    # The record keeps what the judgement went against, for those who see it.
    event = AuditEvent.objects.get(action="review.overturn")
    assert event.after["overruled"] == [
        "The tree identity check passed (tree hashes equal), so the trees are "
        "identical."
    ]
