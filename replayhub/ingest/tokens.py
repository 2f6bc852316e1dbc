"""Per-project ingest tokens: issued once, stored as a hash, checked in constant time.

A token reads ``rhi_<prefix>_<secret>``. The prefix is public (it finds the row and
names the token in the admin); the secret never leaves :func:`token_issue` except
in its return value, and only the sha256 of the whole token is stored, so a leaked
database does not leak working tokens.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from replayhub.models import IngestToken, Project

SCHEME = "rhi"
_TOKEN = re.compile(r"rhi_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def token_issue(
    *, project: Project, rotate: bool = False, row: IngestToken | None = None
) -> tuple[IngestToken, str]:
    """Create a token for ``project``; returns the saved row and the token text.

    The text is not stored anywhere: show it once. ``rotate`` revokes every
    other active token of the project in the same transaction. ``row`` is an
    unsaved instance to fill and save (the admin's add form hands one in).
    """
    prefix = secrets.token_hex(6)
    token = f"{SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    row = row if row is not None else IngestToken()
    row.project = project
    row.prefix = prefix
    row.token_sha256 = _digest(token)
    with transaction.atomic():
        if rotate:
            IngestToken.objects.active().filter(project=project).update(
                revoked_at=timezone.now()
            )
        row.save()
    return row, token


@dataclass(frozen=True)
class Denied:
    """Why a request's token is refused, and the HTTP status that says so."""

    status: int
    message: str


def token_authenticate(*, authorization: str, slug: str) -> IngestToken | Denied:
    """Check an ``Authorization`` header against the project named in the URL.

    401 when there is no usable token (absent, malformed, unknown, wrong secret),
    403 when the token is genuine but revoked or belongs to another project. A
    project that does not exist answers like a project the token does not belong
    to, so the answer never tells an outsider which projects exist.
    """
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return Denied(401, "send the ingest token as 'Authorization: Bearer <token>'")
    match = _TOKEN.fullmatch(token.strip())
    if match is None:
        return Denied(401, "the ingest token is malformed")
    row = IngestToken.objects.select_related("project").filter(prefix=match[1]).first()
    # Compared in constant time so response timing tells nothing about the hash.
    if row is None or not hmac.compare_digest(row.token_sha256, _digest(match[0])):
        return Denied(401, "the ingest token is not valid")
    if row.revoked_at is not None:
        return Denied(403, "the ingest token was revoked")
    if row.project.slug != slug:
        return Denied(403, "the ingest token is not valid for this project")
    IngestToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    return row
