"""What the replay page adds for working together: threads, second opinions,
gold, labels, blind mode and hand-off.

A gold item served to the viewer is shown as an ordinary queued item (no
history, no comments, its band, the viewer's own lease) until judged; that a
replay is gold, its settled verdict and others' gold checks show only to those
who manage gold. In blind mode the automated verdict, its reason, its band,
earlier decisions and why a second opinion is asked stay hidden from a
reviewer until they have recorded a first judgement, and so do others'
comments (the page says how many): a comment can tell the answer.
"""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest, QueryDict

from replayhub import roles
from replayhub.models import VERDICT_CHOICES, Replay, ReplayStatus, ReviewBand
from reviews.models import GoldItem, Purpose, Review, ReviewPolicy, SecondOpinion
from reviews.replay_page.evidence import read_evidence
from reviews.replay_page.meanwhile import shown_value
from reviews.services import lease_end
from reviews.together import comments, gold, handoff, opinions
from reviews.together.labels import LabelledDecisionForm, project_labels


def is_blind(replay: Replay, user) -> bool:
    if not user.has_perm(roles.DECIDE):
        return False
    policy = ReviewPolicy.objects.filter(project_id=replay.project_id).first()
    if policy is None or not policy.blind:
        return False
    return not Review.objects.filter(replay_id=replay.pk, reviewer=user).exists()


def decision_form(
    replay: Replay, data: QueryDict | None = None
) -> LabelledDecisionForm:
    """The decision form with the project's labels.

    A blind decision names the reviewer's own verdict: the same as the
    automated one is a confirm, another one an overturn.
    """
    if data is not None and "blind_verdict" in data:
        data = data.copy()
        chosen = data.get("blind_verdict", "")
        if chosen and chosen == replay.verdict:
            data["decision"] = "confirm"
        elif chosen:
            data["decision"], data["verdict_after"] = "overturn", chosen
        else:
            data["decision"] = ""
    return LabelledDecisionForm(
        data,
        verdict=replay.verdict,
        checks=read_evidence(replay.evidence).checks,
        labels=project_labels(replay.project_id),
    )


# What the header says of a queued replay the viewer reviews blind.
BLIND_BAND = "blind review"


def _without_gold(reviews, audit, user) -> dict:
    """The page's decisions and trail without other reviewers' gold checks."""
    out: dict = {}
    if reviews is not None:
        out["reviews"] = [
            r for r in reviews if r.purpose != Purpose.GOLD or r.reviewer_id == user.pk
        ]
    if audit is not None:
        out["audit"] = [
            e
            for e in audit
            if not e.action.startswith("gold.") or e.actor_id == user.pk
        ]
    return out


def _withheld(out: dict, context: dict, user, *, blind: bool) -> dict:
    """What the page keeps from this viewer, as replacements for ``out``."""
    hidden: dict = {}
    if not out["can_manage_gold"]:
        # Gold status only to those who manage gold: to anyone else a gold
        # item is an ordinary replay (a reviewer told which replays are gold,
        # and their answers, would be checked against nothing).
        hidden["gold_item"] = None
        hidden.update(
            _without_gold(
                out.get("reviews", context.get("reviews")),
                out.get("audit", context.get("audit")),
                user,
            )
        )
    if blind:
        # Every band but the second reviewer's names a verdict ("queued:
        # Divergent"), and so does the reason a second opinion is asked for
        # ("decided identical"); the first reviewer's decision is another's.
        # The model check's warning is one of the checks, hidden with them.
        hidden.update(
            reviews=[],
            decided=False,
            audit=[],
            opinion_history=[],
            human=None,
            shown_band=BLIND_BAND if out["shown_band"] else "",
            opinion_blind=True,
            model_warning="",
        )
    return hidden


class _Lease:
    """The viewer's own hold on a gold item, shaped like a Claim for the page."""

    def __init__(self, expires_at: datetime):
        self.expires_at = expires_at


def extras(request: HttpRequest, replay: Replay, context: dict) -> dict:
    user = request.user
    serving = gold.pending(replay_id=replay.pk, user=user)
    blind = is_blind(replay, user)
    finished = replay.status == ReplayStatus.FINISHED
    out: dict = {
        "blind": blind,
        "gold_serving": serving,
        "shown_band": (
            ReviewBand(replay.review_band).label
            if replay.review_band is not None
            else ""
        ),
        "verdict_choices": VERDICT_CHOICES,
        "can_comment": user.has_perm(roles.COMMENT),
        "can_manage_claims": user.has_perm(roles.MANAGE_CLAIMS),
        "can_manage_gold": user.has_perm(roles.MANAGE_GOLD),
        "comment_form": comments.CommentForm(),
        "comment_draft": comments.take_draft(request.session, replay.pk),
        "test_keys": [
            comments.test_output_key(o)
            for _label, attempts in context.get("outcomes", [])
            for o in attempts
        ],
    }
    if serving is not None:
        # Indistinguishable from a queued item until judged.
        out.update(
            reviews=[],
            audit=[],
            human=None,
            undoable=None,
            threads=[],
            open_threads=0,
            opinion=None,
            opinion_history=[],
            gold_item=None,
            claim=_Lease(lease_end(serving.served_at)),
            claim_mine=True,
            decision_open=True,
            shown_band=ReviewBand(serving.gold.band).label,
            can_ask_second=False,
            reviewers=[],
        )
    else:
        threads = comments.threads(replay.pk)
        if blind:
            threads, out["others_comments"] = comments.own_only(threads, user)
        out.update(
            threads=threads,
            open_threads=sum(1 for t in threads if t.resolved_at is None),
            opinion=opinions.open_request(replay.pk),
            opinion_history=SecondOpinion.objects.filter(
                replay=replay, second_review__isnull=False
            ).select_related("first_review__reviewer", "second_review__reviewer"),
            gold_item=GoldItem.objects.filter(replay=replay, active=True).first(),
            reviewers=handoff.reviewers() if out["can_manage_claims"] else [],
        )
        out["can_ask_second"] = (
            user.has_perm(roles.DECIDE) and finished and out["opinion"] is None
        )
        reviews = context.get("reviews")
        if reviews is not None and hasattr(reviews, "prefetch_related"):
            out["reviews"] = reviews.prefetch_related("labels__label")
    out.update(_withheld(out, context, user, blind=blind))
    out["decision_shown"] = shown_value(
        standing_id=context.get("standing_id"),
        blind=blind,
        gold=serving is not None,
    )
    decision_open = out.get("decision_open", context.get("decision_open"))
    form = context.get("form")
    if decision_open and (form is None or not form.is_bound):
        out["form"] = decision_form(replay)
    return out
