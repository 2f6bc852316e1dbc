"""The audit trail of a replay: one append-only event per change a person makes."""

from __future__ import annotations

from reviews.models import AuditEvent


def record(*, actor, action: str, replay_id: int, before=None, after=None) -> None:
    AuditEvent.objects.create(
        actor=actor,
        action=action,
        object_type="replay",
        object_id=str(replay_id),
        before=before or {},
        after=after or {},
    )
