"""The attestation endpoints: a replay's signed attestation, the public key,
and a commit's verdict for a pipeline.

Every answer is JSON but the key (PEM), errors included, each one line. A
request with an ``Authorization`` header is a pipeline's: its ingest token
sees its own project's replays and nothing else. Without one, the browser
session and the permission the replay endpoint asks (``view_replay``); a
reviewer under blind review sees no verdict, here as on the pages.

What only the review app knows comes in a :class:`ReviewSide`, handed to the
views by the root URLconf (the domain never imports the people's side).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.contrib.auth.decorators import login_not_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from replayhub import roles
from replayhub.attest import dsse, gate, keys, signing
from replayhub.attest.statement import canonical
from replayhub.ingest.tokens import Denied, token_authenticate
from replayhub.models import IngestToken, Replay, ReplayStatus

log = logging.getLogger(__name__)

_PREFIX = re.compile(r"rhi_([0-9a-f]{12})_")


@dataclass(frozen=True)
class ReviewSide:
    """The review app's part: ``hidden_from(user, [(replay id, project id)])``
    the replays whose verdict blind review keeps from ``user``, and
    ``with_settled(replays)`` the replays annotated with their standing
    decision (``human_decision``, ``human_verdict``)."""

    hidden_from: Callable[[Any, Iterable[tuple[int, int]]], set[int]]
    with_settled: Callable[[QuerySet[Replay]], QuerySet[Replay]]


def _error(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def _asker(request: HttpRequest) -> IngestToken | JsonResponse | None:
    """The token a pipeline sent (None for a session), or the error answer."""
    authorization = request.headers.get("Authorization", "")
    if not authorization:
        if not request.user.is_authenticated:
            return _error(401, "log in first, or send an ingest token")
        if not request.user.has_perm(roles.VIEW_REPLAYS):
            return _error(403, "you do not have permission to read this")
        return None
    # The token's own project, found by its public prefix; token_authenticate
    # then checks the whole token against it in constant time.
    match = _PREFIX.match(authorization.partition(" ")[2].strip())
    slug = (
        IngestToken.objects.filter(prefix=match[1])
        .values_list("project__slug", flat=True)
        .first()
        if match
        else None
    )
    token = token_authenticate(authorization=authorization, slug=slug or "")
    if isinstance(token, Denied):
        return _error(token.status, token.message)
    return token


def _hidden(
    request: HttpRequest,
    token: IngestToken | None,
    side: ReviewSide,
    pairs: list[tuple[int, int]],
) -> set[int]:
    # Blind review is a reviewer's: a pipeline's token is no reviewer.
    return set() if token is not None else side.hidden_from(request.user, pairs)


# Session or token, and answers 401 itself rather than redirecting.
@login_not_required
@require_GET
def replay_attestation(
    request: HttpRequest, replay_id: int, side: ReviewSide
) -> HttpResponse:
    """A finished replay's DSSE envelope, as a download."""
    token = _asker(request)
    if isinstance(token, JsonResponse):
        return token
    replays = Replay.objects.select_related("run", "project")
    if token is not None:
        replays = replays.filter(project=token.project)
    replay = replays.filter(pk=replay_id).first()
    if replay is None:
        return _error(404, f"there is no replay {replay_id}")
    if _hidden(request, token, side, [(replay.pk, replay.project_id)]):
        return _error(403, "blind review: record your judgement of this replay first")
    if replay.status != ReplayStatus.FINISHED:
        return _error(409, f"replay {replay_id} has not finished: nothing to attest")
    key = _key()
    if isinstance(key, JsonResponse):
        return key
    envelope = signing.replay_envelope(replay, key)
    return HttpResponse(
        canonical(envelope),
        content_type="application/json",
        headers={
            "Content-Disposition": (
                f'attachment; filename="replay-{replay.pk}.intoto.json"'
            )
        },
    )


@login_not_required
@require_GET
def attestation_key(request: HttpRequest) -> HttpResponse:
    """The public key that verifies the attestations (PEM), its id in a
    header; public, like any verification key."""
    key = _key()
    if isinstance(key, JsonResponse):
        return key
    public = key.public_key()
    return HttpResponse(
        dsse.public_pem(public),
        content_type="application/x-pem-file",
        headers={"ReplayHub-Key-Id": dsse.key_id(public)},
    )


def _key() -> Ed25519PrivateKey | JsonResponse:
    """The signing key, or the one-line error a caller answers with."""
    try:
        key = keys.signing_key()
    except keys.KeyUnavailable as error:
        # The message names the setting, never the key.
        log.warning("attestation key unavailable: %s", error)
        return _error(503, "the attestation key cannot be read: see the server log")
    if key is None:
        # Not a fault of the server's: there is no such thing here.
        return _error(
            404, "attestations are not signed here: no attestation key is configured"
        )
    return key


@login_not_required
@require_GET
def commit_verdict(request: HttpRequest, sha: str, side: ReviewSide) -> JsonResponse:
    """The latest settled verdicts of the runs whose original is ``sha``."""
    token = _asker(request)
    if isinstance(token, JsonResponse):
        return token
    try:
        prefix = gate.commit_prefix(sha[:80])
    except ValueError as error:
        return _error(400, str(error))
    project = token.project if token is not None else None
    try:
        runs = gate.runs_of_commit(prefix, project=project)
    except gate.Ambiguous as error:
        return _error(400, str(error))
    if not runs:
        return _error(
            404, f"no run has the original commit {prefix}", verdict=None, gate=None
        )
    replays = gate.latest_replays(runs, settle=side.with_settled)
    hidden = _hidden(
        request, token, side, [(r.pk, r.project_id) for r in replays.values()]
    )
    found = gate.answers(runs, replays, hidden)
    return JsonResponse(
        {
            "commit": runs[0].original_commit,
            "gate": gate.overall(gate.run_gate(answer.settled) for answer in found),
            "runs": [
                gate.answer_json(answer, _links(request, answer.replay))
                for answer in found
            ],
        }
    )


def _links(request: HttpRequest, replay: Replay | None) -> dict[str, str | None]:
    if replay is None:
        return {"replay_url": None, "attestation_url": None}
    page = reverse("reviews:replay_detail", args=[replay.pk])
    attestation = reverse("api_replay_attestation", args=[replay.pk])
    return {
        "replay_url": request.build_absolute_uri(page),
        "attestation_url": request.build_absolute_uri(attestation)
        if keys.configured()
        else None,
    }
