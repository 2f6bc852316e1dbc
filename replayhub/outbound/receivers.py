"""The domain's news, turned into deliveries: receivers of ``replayhub.signals``,
connected in ``ReplayhubConfig.ready``.

Each runs after the news is committed and only queues rows (the sending is a
worker's), so a slow or broken forge never holds a replay, a decision or a
night's close; the signals are sent with ``send_robust``, so a receiver that
fails is logged and nothing else is held either.
"""

from __future__ import annotations

from typing import Any

from replayhub.models import Night, Replay
from replayhub.outbound.services import Settled, event_queue, page_url, status_queue


def on_replay_finished(sender: Any, *, replay_id: int, **kwargs: Any) -> None:
    status_queue(replay_id=replay_id)
    replay = Replay.objects.select_related("project", "run").filter(pk=replay_id)
    found = replay.first()
    if found is None or not found.verdict:
        return
    event_queue(
        project=found.project,
        event="replay.finished",
        ident=f"replay-{found.pk}",
        data={
            "project": found.project.slug,
            "replay": found.pk,
            "run": found.run.external_id,
            "original_commit": found.run.original_commit,
            "verdict": found.verdict,
            "reason_code": found.reason_code,
            "url": page_url("reviews:replay_detail", found.pk),
        },
        text=(
            f"ReplayHub {found.project.slug}: replay {found.pk} of "
            f"{found.run.external_id} is {found.verdict} ({found.reason_code}) "
            f"{page_url('reviews:replay_detail', found.pk)}"
        ).strip(),
    )


def on_review_decided(
    sender: Any,
    *,
    replay_id: int,
    review_id: int,
    decision: str,
    verdict: str,
    **kwargs: Any,
) -> None:
    """``verdict`` is the one the decision leaves standing ("" for a rerun,
    whose new replay sends its own status)."""
    if verdict:
        status_queue(
            replay_id=replay_id,
            settled=Settled(review_id=review_id, decision=decision, verdict=verdict),
        )
    found = Replay.objects.select_related("project").filter(pk=replay_id).first()
    if found is None:
        return
    event_queue(
        project=found.project,
        event="review.decided",
        ident=f"{decision}-{review_id}",
        data={
            "project": found.project.slug,
            "replay": found.pk,
            "decision": decision,
            "verdict": verdict or None,
            "verdict_before": found.verdict,
            "url": page_url("reviews:replay_detail", found.pk),
        },
        text=(
            f"ReplayHub {found.project.slug}: replay {found.pk} {decision}"
            + (f", verdict {verdict}" if verdict else "")
            + f" {page_url('reviews:replay_detail', found.pk)}"
        ).strip(),
    )


def on_night_closed(sender: Any, *, night: Night, **kwargs: Any) -> None:
    event_queue(
        project=night.project,
        event="night.closed",
        ident=f"night-{night.date.isoformat()}",
        data={"project": night.project.slug, "night": night.date.isoformat()},
        text=f"ReplayHub {night.project.slug}: the night of {night.date} closed.",
    )
