"""The replay endpoint with the people's side added: decisions and comment threads.

The domain's endpoint answers first (authentication, 404, the replay itself);
this adds what only the review app knows.
"""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from replayhub import api
from reviews.models import Review
from reviews.together import comments


@login_not_required
@require_GET
def replay_detail(request: HttpRequest, replay_id: int):
    response = api.replay_detail(request, replay_id)
    if response.status_code != 200:
        return response
    data = json.loads(response.content)
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
        for review in Review.objects.filter(replay_id=replay_id)
        .select_related("reviewer")
        .prefetch_related("labels__label")
    ]
    return JsonResponse(data)
