"""Second opinions, gold, labels, comments and hand-off, through their services."""

from __future__ import annotations

import pytest
from django.core import mail

from replayhub import roles
from replayhub.models import Replay, ReviewBand
from reviews.models import (
    AuditEvent,
    Claim,
    Comment,
    GoldItem,
    Label,
    Notice,
    Purpose,
    ReviewLabel,
    ReviewPolicy,
    SecondOpinion,
)
from reviews.services import NotDecidable, claim_next, claim_take, review_decide
from reviews.together import comments, gold, handoff, opinions, past
from tests.factories import make_project, make_replay, make_user


@pytest.fixture
def sam(db):
    return make_user("sam", roles.REVIEWER)


def actions(replay) -> list[str]:
    return list(
        AuditEvent.objects.filter(object_id=str(replay.pk))
        .order_by("created_at", "id")
        .values_list("action", flat=True)
    )


def test_an_overturn_under_the_policy_waits_for_anyone_but_its_reviewer(reviewer, sam):
    project = make_project()
    ReviewPolicy.objects.create(project=project, second_on_overturn=True)
    replay = make_replay(verdict="equivalent", project=project)

    review_decide(
        replay=replay, reviewer=reviewer, decision="overturn", verdict_after="divergent"
    )

    replay.refresh_from_db()
    assert replay.review_band == ReviewBand.NEEDS_SECOND_REVIEW
    assert claim_next(reviewer=reviewer, gold_roll=100) is None
    with pytest.raises(NotDecidable, match="another reviewer"):
        review_decide(replay=replay, reviewer=reviewer, decision="confirm")
    assert claim_next(reviewer=sam, gold_roll=100) == replay

    second = review_decide(replay=replay, reviewer=sam, decision="confirm")

    replay.refresh_from_db()
    assert replay.review_band is None
    opinion = SecondOpinion.objects.get(replay=replay)
    assert opinion.second_review == second and opinion.agrees is False
    assert second.purpose == Purpose.SECOND
    assert "second_opinion.disagree" in actions(replay)
    assert Notice.objects.get(user=reviewer).kind == "second"


def test_a_confirm_needs_no_second_opinion_unless_its_verdict_is_chosen(reviewer, sam):
    project = make_project()
    ReviewPolicy.objects.create(
        project=project, second_on_overturn=True, second_on_verdicts=["divergent"]
    )
    plain = make_replay(verdict="equivalent", project=project)
    chosen = make_replay(verdict="divergent", project=project)

    review_decide(replay=plain, reviewer=reviewer, decision="confirm")
    review_decide(replay=chosen, reviewer=reviewer, decision="confirm")

    plain.refresh_from_db()
    chosen.refresh_from_db()
    assert plain.review_band is None
    assert chosen.review_band == ReviewBand.NEEDS_SECOND_REVIEW
    review_decide(replay=chosen, reviewer=sam, decision="confirm")
    assert SecondOpinion.objects.get(replay=chosen).agrees is True


def test_anyone_can_ask_for_a_second_opinion_once(reviewer, sam):
    replay = make_replay(verdict="divergent")
    review_decide(replay=replay, reviewer=reviewer, decision="confirm")

    opinions.second_opinion_ask(replay=replay, user=sam, note="looks off")

    replay.refresh_from_db()
    assert replay.review_band == ReviewBand.NEEDS_SECOND_REVIEW
    # The first reviewer may not answer; the asker may.
    assert SecondOpinion.objects.get(replay=replay).excluded == reviewer
    with pytest.raises(opinions.OpinionRefused, match="already"):
        opinions.second_opinion_ask(replay=replay, user=sam)


def mark_gold(replay, admin, verdict="divergent"):
    ReviewPolicy.objects.update_or_create(
        project=replay.project, defaults={"gold_rate_percent": 100}
    )
    return gold.gold_mark(replay=replay, actor=admin, verdict=verdict)


def test_a_gold_item_is_served_once_and_judging_it_changes_nothing(
    reviewer, sam, admin_user
):
    replay = make_replay(verdict="equivalent")
    review_decide(
        replay=replay, reviewer=sam, decision="overturn", verdict_after="divergent"
    )
    item = mark_gold(replay, admin_user)
    assert item.band == ReviewBand.PASSED_DIFF_DIVERGED

    # Its own decider never gets it; another reviewer does, once.
    assert claim_next(reviewer=sam, gold_roll=0) is None
    assert claim_next(reviewer=reviewer, gold_roll=0) == replay
    serving = gold.pending(replay_id=replay.pk, user=reviewer)
    assert serving is not None
    assert claim_next(reviewer=reviewer, gold_roll=0) is None

    review = gold.gold_judge(serving=serving, decision="confirm", verdict_after=None)

    assert review.purpose == Purpose.GOLD and review.verdict_after == "equivalent"
    assert gold.pending(replay_id=replay.pk, user=reviewer) is None
    replay.refresh_from_db()
    assert replay.review_band is None
    event = AuditEvent.objects.get(action="gold.judge")
    assert event.after["agrees"] is False


def test_gold_is_not_served_above_the_projects_rate(reviewer, sam, admin_user):
    replay = make_replay(verdict="divergent")
    review_decide(replay=replay, reviewer=sam, decision="confirm")
    mark_gold(replay, admin_user)
    ReviewPolicy.objects.filter(project=replay.project).update(gold_rate_percent=30)

    assert claim_next(reviewer=reviewer, gold_roll=30) is None
    assert claim_next(reviewer=reviewer, gold_roll=29.9) == replay


def test_only_a_decided_replay_can_be_gold(admin_user):
    with pytest.raises(gold.NotGold):
        gold.gold_mark(replay=make_replay(), actor=admin_user)
    assert not GoldItem.objects.exists()


def test_labels_are_stored_with_the_decision_and_audited(reviewer):
    replay = make_replay(verdict="divergent")
    cause = Label.objects.create(
        project=replay.project,
        name="root cause",
        kind="category",
        categories=["harness", "agent", "task"],
        required=True,
    )

    review = review_decide(
        replay=replay, reviewer=reviewer, decision="confirm", labels={cause.pk: "agent"}
    )

    assert ReviewLabel.objects.get(review=review).value == "agent"
    event = AuditEvent.objects.get(action="review.confirm")
    assert event.after["labels"] == {"root cause": "agent"}
    found = past.done(past.DoneFilters(label_id=cause.pk, label_value="agent"))
    assert list(found) == [review]


def test_a_comment_quotes_the_lines_from_the_stored_diff_and_mentions_notify(
    reviewer, sam, settings
):
    settings.REPLAYHUB_NOTICE_EMAIL = True
    sam.email = "sam@example.com"
    sam.save()
    replay = make_replay()

    thread = comments.comment_add(
        replay=replay,
        author=reviewer,
        data={
            "target": "dod",
            "path": "src/app.py",
            "side": "new",
            "line_start": 2,
            "line_end": 3,
            "body": "Why y? @sam <b>look</b>",
        },
    )

    assert thread.excerpt == "x = 2\ny = 3"
    assert thread.anchor == "src/app.py (new), lines 2-3"
    notice = Notice.objects.get(user=sam)
    assert notice.kind == "mention"
    assert comments.unresolved([replay.pk]) == {replay.pk: 1}

    comments.comment_reply(thread=thread, author=sam, body="Harmless.")
    assert comments.comment_resolve(thread=thread, user=sam, resolved=True)
    assert comments.unresolved([replay.pk]) == {}
    assert actions(replay) == ["comment.add", "comment.reply", "comment.resolve"]
    assert [c["replies"][0]["body"] for c in comments.as_json(replay.pk)] == [
        "Harmless."
    ]


def test_a_mention_mail_goes_out_after_commit(reviewer, sam, settings):
    settings.REPLAYHUB_NOTICE_EMAIL = True
    sam.email = "sam@example.com"
    sam.save()
    replay = make_replay()
    with pytest.MonkeyPatch.context():
        from django.test import TestCase

        with TestCase.captureOnCommitCallbacks(execute=True):
            comments.comment_reply(
                thread=comments.comment_add(
                    replay=replay,
                    author=reviewer,
                    data={
                        "target": "tests",
                        "path": "original run 1",
                        "side": "",
                        "line_start": 1,
                        "body": "cc @sam",
                    },
                ),
                author=reviewer,
                body="again @sam",
            )
    assert [m.to for m in mail.outbox] == [["sam@example.com"], ["sam@example.com"]]


def test_a_comment_on_a_line_that_does_not_exist_is_refused(reviewer):
    replay = make_replay()
    with pytest.raises(comments.CommentRefused):
        comments.comment_add(
            replay=replay,
            author=reviewer,
            data={
                "target": "dod",
                "path": "src/other.py",
                "side": "new",
                "line_start": 1,
                "body": "?",
            },
        )
    assert not Comment.objects.exists()


def test_an_admin_reassigns_a_claim_and_the_new_holder_is_told(
    reviewer, sam, admin_user
):
    replay = make_replay()
    claim_take(replay=replay, reviewer=reviewer)

    handoff.claim_reassign(replay=replay, actor=admin_user, to=sam)

    assert Claim.objects.get(replay=replay).reviewer == sam
    assert Notice.objects.get(user=sam).kind == "assigned"
    assert handoff.claim_release_any(replay=replay, actor=admin_user)
    assert not Claim.objects.exists()
    with pytest.raises(handoff.HandoffRefused):
        handoff.claim_reassign(
            replay=replay, actor=admin_user, to=make_user("leo", roles.LEAD)
        )


def test_bulk_confirm_decides_each_item_and_skips_what_it_must(reviewer, sam):
    free = [make_replay(verdict="identical", queued=False) for _ in range(3)]
    held = make_replay(verdict="identical", queued=False)
    claim_take(replay=held, reviewer=sam)
    labelled_project = make_project("labelled")
    Label.objects.create(
        project=labelled_project, name="would merge", kind="yes_no", required=True
    )
    labelled = make_replay(verdict="identical", project=labelled_project)
    blind_project = make_project("blind")
    ReviewPolicy.objects.create(project=blind_project, blind=True)
    blind = make_replay(verdict="identical", project=blind_project)

    result = handoff.bulk_confirm(
        replay_ids=[r.pk for r in [*free, held, labelled, blind]], reviewer=reviewer
    )

    assert result.confirmed == 3
    assert len(result.skipped) == 3
    assert "reviews blind" in result.skipped[-1]
    assert AuditEvent.objects.filter(action="review.confirm").count() == 3
    assert Replay.objects.filter(reviews__isnull=False).count() == 3


def test_search_finds_by_id_external_id_title_and_comment_text(reviewer):
    first = make_replay(title="Round invoice totals")
    second = make_replay(title="Other")
    comments.comment_add(
        replay=second,
        author=reviewer,
        data={
            "target": "dod",
            "path": "src/app.py",
            "side": "new",
            "line_start": 2,
            "body": "flaky currency rounding",
        },
    )
    assert past.search("invoice") == [first]
    assert past.search(str(second.pk))[0] == second
    assert past.search(first.run.external_id)[0] == first
    assert past.search("rounding") == [second]
    assert past.search("   ") == []


def test_a_served_gold_item_released_unjudged_can_come_back(reviewer, sam, admin_user):
    replay = make_replay(verdict="divergent")
    review_decide(replay=replay, reviewer=sam, decision="confirm")
    mark_gold(replay, admin_user)
    assert claim_next(reviewer=reviewer, gold_roll=0) == replay

    assert gold.gold_release(replay_id=replay.pk, user=reviewer)

    assert gold.pending(replay_id=replay.pk, user=reviewer) is None
    assert claim_next(reviewer=reviewer, gold_roll=0) == replay
