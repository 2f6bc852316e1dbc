from __future__ import annotations

from django.utils import timezone

from replayhub import roles
from reviews.models import Review
from reviews.replay_page.trail import UNDO_SESSION_KEY, decision_sentence
from reviews.services import undo_deadline


def user_roles(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "can_decide": user.has_perm(roles.DECIDE),
        "can_view_trends": user.has_perm(roles.VIEW_TRENDS),
        "can_view_money": user.has_perm(roles.VIEW_MONEY),
        "can_manage_budgets": user.has_perm(roles.MANAGE_BUDGETS),
        "can_manage_projects": user.has_perm(roles.MANAGE_PROJECTS),
        "can_view_budgets": user.has_perm(roles.VIEW_BUDGETS),
        "can_view_projects": user.has_perm(roles.VIEW_PROJECTS),
        "can_view_replays": user.has_perm(roles.VIEW_REPLAYS),
        "can_upload": user.has_perm("replayhub.add_run"),
        "user_role": roles.role_of(user),
        "undo": _undo_offer(request, user),
    }


def _undo_offer(request, user):
    """The user's decision just recorded, while it can still be taken back."""
    session = getattr(request, "session", None)
    if session is None or UNDO_SESSION_KEY not in session:
        return None
    review = (
        Review.objects.standing()
        .filter(pk=session[UNDO_SESSION_KEY], reviewer=user)
        .only(
            "id",
            "replay_id",
            "decision",
            "verdict_before",
            "verdict_after",
            "created_at",
        )
        .first()
    )
    if review is None or timezone.now() > undo_deadline(review):
        session.pop(UNDO_SESSION_KEY, None)
        return None
    return {
        "review": review,
        "sentence": decision_sentence(review),
        "until": undo_deadline(review),
    }
