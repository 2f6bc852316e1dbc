"""Blind review: whose eyes a replay's automated verdict (and what could
tell it, such as others' comments) waits from. Every page, partial, export,
API answer and mail asks here before it shows one.

A blind judgement is recorded as given, the independent call being the point
of blind review: it is never asked whether it means to overrule verified
evidence (the question would name the evidence and so the verdict); the
decision's audit event still records what it overruled."""

from __future__ import annotations

from collections.abc import Iterable

from replayhub import roles
from reviews.models import Review, ReviewPolicy


def blind_projects() -> set[int]:
    return set(
        ReviewPolicy.objects.filter(blind=True).values_list("project_id", flat=True)
    )


def hidden_from(user, replays: Iterable[tuple[int, int]]) -> set[int]:
    """Of ``(replay id, project id)`` pairs, the replays whose automated
    verdict ``user`` may not see yet: blind review, and no judgement of theirs.
    Every page, partial, export and API answer asks this before it shows one."""
    if not user.has_perm(roles.DECIDE):
        return set()
    blind = blind_projects()
    candidates = {pk for pk, project_id in replays if project_id in blind}
    if not candidates:
        return set()
    judged = Review.objects.filter(replay_id__in=candidates, reviewer=user)
    return candidates - set(judged.values_list("replay_id", flat=True))
