"""The replay and run endpoints with the people's side added: decisions, comment
threads, and blind review's hiding.

The domain's endpoint answers first (authentication, 404, the replay itself);
this adds what only the review app knows.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from replayhub import api, roles
from replayhub.models import Replay, Run
from reviews.models import Review
from reviews.together import comments, past
from reviews.together.blind import hidden_from

# What blind review keeps from a reviewer until they have judged the replay.
# The agent's exit and its summary in the evidence (timed out, the cap that
# fired) tell the reason as plainly as the reason does.
BLIND_FIELDS = ("verdict", "reason_code", "reason", "review_band", "agent_exit_code")
BLIND_EVIDENCE = ("checks", "agent")


def _blinded(data: dict) -> dict:
    for name in BLIND_FIELDS:
        if name in data:
            data[name] = None
    if isinstance(data.get("evidence"), dict):
        data["evidence"] = {
            k: v for k, v in data["evidence"].items() if k not in BLIND_EVIDENCE
        }
    data["blind"] = True
    return data


@login_not_required
@require_GET
def replay_detail(request: HttpRequest, replay_id: int):
    data = api.replay_data(request, replay_id)
    if isinstance(data, JsonResponse):
        return data
    project_id = Replay.objects.filter(pk=replay_id).values_list("project_id")[0][0]
    if hidden_from(request.user, [(replay_id, project_id)]):
        data = _blinded(data)
        data["comments"], data["open_threads"], data["reviews"] = [], 0, []
        return JsonResponse(data)
    threads = comments.as_json(replay_id)
    data["comments"] = threads
    data["open_threads"] = sum(1 for thread in threads if not thread["resolved"])
    data["reviews"] = [
        {
            "reviewer": review.reviewer.get_username(),
            "decision": review.decision,
            "purpose": review.purpose,
            "verdict_before": review.verdict_before,
            "verdict_after": review.verdict_after or None,
            "note": review.note,
            "labels": {value.label.name: value.value for value in review.labels.all()},
            "created_at": review.created_at,
        }
        for review in past.seen_by(
            Review.objects.filter(replay_id=replay_id),
            viewer_id=request.user.pk,
            blind=set(),
            gold=request.user.has_perm(roles.MANAGE_GOLD),
        )
        .select_related("reviewer")
        .prefetch_related("labels__label")
    ]
    return JsonResponse(data)


@login_not_required
@require_GET
def run_detail(request: HttpRequest, run_id: int):
    """The run endpoint, its replays' verdicts hidden where blind review says."""
    data = api.run_data(request, run_id)
    if isinstance(data, JsonResponse):
        return data
    project_id = Run.objects.filter(pk=run_id).values_list("project_id")[0][0]
    hidden = hidden_from(request.user, [(r["id"], project_id) for r in data["replays"]])
    data["replays"] = [_blinded(r) if r["id"] in hidden else r for r in data["replays"]]
    replicates = data["replicates"]
    if hidden & {r["id"] for r in replicates["replays"]}:
        # The rate and the decision are made of the hidden verdicts.
        data["replicates"] = {
            "replays": [_blinded(r) for r in replicates["replays"]],
            "blind": True,
        }
    return JsonResponse(data)
