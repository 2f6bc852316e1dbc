"""Rollout workflows: one entry for the command, the API, the upload page and
the beat task. Keyword-only functions.

This module enqueues, so it imports :mod:`replayhub.tasks`, and the tasks call
it back: each takes the other whole and reads its attributes when called.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from replayhub import tasks
from replayhub.ingest import follow, verifiers
from replayhub.ingest.importer import Summary
from replayhub.ingest.verifiers import RolloutSummary
from replayhub.models import FollowSource, Project


def rollouts_import(
    *,
    project: Project,
    paths: Iterable[Path] = (),
    chunks: Iterable[bytes] | None = None,
    progress: Callable[[int, Summary], None] | None = None,
) -> RolloutSummary:
    """Import verifiers record files (index-selected where they have an
    index) or a stream of one file's bytes into ``project``."""
    if chunks is not None:
        return verifiers.import_chunks(
            project=project, chunks=chunks, progress=progress
        )
    return verifiers.import_files(project=project, paths=paths, progress=progress)


def follow_source_get(*, project: Project, pattern: str) -> FollowSource:
    """The source following ``pattern`` for ``project``, made the first time.
    A relative pattern is made absolute, so workers elsewhere find it."""
    pattern = os.path.abspath(pattern)
    return FollowSource.objects.get_or_create(project=project, pattern=pattern)[0]


def rollouts_follow(*, source: FollowSource) -> RolloutSummary:
    """One follow pass over ``source``, now."""
    return follow.follow_pass(source)


def follow_claimed(*, source_id: int) -> RolloutSummary | None:
    """A follow pass, unless one started less than half a period ago (a
    second delivery, or a pass still running): one conditional UPDATE claims
    the pass."""
    now = timezone.now()
    recent = now - timedelta(seconds=settings.REPLAYHUB_FOLLOW_SECONDS / 2)
    claimed = (
        FollowSource.objects.filter(pk=source_id, enabled=True)
        .filter(Q(last_pass_at__isnull=True) | Q(last_pass_at__lt=recent))
        .update(last_pass_at=now)
    )
    if not claimed:
        return None
    source = FollowSource.objects.select_related("project").get(pk=source_id)
    return follow.follow_pass(source)


def follow_due() -> int:
    """Queue a pass for every enabled source; how many were queued."""
    ids = list(FollowSource.objects.filter(enabled=True).values_list("pk", flat=True))
    for source_id in ids:
        tasks.follow_source.delay(source_id)
    return len(ids)
