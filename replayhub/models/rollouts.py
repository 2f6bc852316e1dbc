"""Rollouts: the seeds a rollout's replays start from, and the record files
followed as a training run writes them."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from replayhub.lib.boundedjson import StoredListDecoder
from replayhub.models.projects import Project, Run, choices_check


class SeedKind(models.TextChoices):
    CONTINUE = "continue", "Continue"
    RECHECK = "recheck", "Recheck"


class SeedAnchor(models.TextChoices):
    """Where in the rollout a seed re-enters."""

    # The first node of a branch that restarts the context (a compaction).
    COMPACTION = "compaction", "Context restart"
    # The last tool result of a run that answers every call of its assistant turn.
    TOOL_CALL = "tool-call", "After tool results"
    # The last node of the final attempt (recheck).
    FINAL = "final", "Final attempt"


class Seed(models.Model):
    """One resume point of a rollout: the conversation a replay starts from.

    ``key`` identifies the seed across imports and workers: the trace id, the
    kind, the anchor and the anchor's node index, never the seed's position.
    ``number`` is its place in trajectory order, from 1.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="seeds")
    number = models.PositiveIntegerField()
    key = models.CharField(max_length=400)
    kind = models.CharField(max_length=16, choices=SeedKind)
    anchor = models.CharField(max_length=16, choices=SeedAnchor)
    # Index in the record's ``nodes`` of the node the seed re-enters at.
    anchor_node = models.PositiveIntegerField()
    # Index of the branch (root-to-leaf path, in leaf order) it was cut from.
    branch = models.PositiveIntegerField(default=0)
    # The seed conversation: chat messages ({role, content, tool_calls?, ...}).
    # Both lists are a record's: too deep to read, they read as refused.
    messages = models.JSONField(default=list, decoder=StoredListDecoder)
    # What the original did from the anchor on: the rest of the branch's
    # messages, and its model-written text (for recheck, the final answer).
    continuation = models.JSONField(default=list, blank=True, decoder=StoredListDecoder)
    original_completion = models.TextField(blank=True)
    # Recorded token ids of the seed's nodes when the record has them, else
    # characters / 4.
    token_count = models.PositiveIntegerField(default=0)
    # The sandbox snapshot recorded for the anchor node (info.snapshots); ""
    # when the record carries none.
    snapshot = models.CharField(max_length=1024, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="seed_unique_key"),
            models.UniqueConstraint(
                fields=["run", "number"], name="seed_unique_number"
            ),
            models.CheckConstraint(
                condition=Q(number__gte=1), name="seed_number_positive"
            ),
            choices_check("kind", SeedKind, "seed_kind_valid"),
            choices_check("anchor", SeedAnchor, "seed_anchor_valid"),
        ]

    def __str__(self) -> str:
        return f"seed {self.number} of {self.run}"


class FollowSource(models.Model):
    """A directory or glob of rollout record files a training run keeps writing,
    imported as it grows (``import_runs --follow``, the beat task)."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="follow_sources"
    )
    pattern = models.CharField(
        max_length=1024,
        help_text="A directory (its rollouts/step_*/…_rollouts_*.jsonl) or a glob.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_pass_at = models.DateTimeField(null=True, blank=True)
    # The last pass's summary: counts, and files that shrank or were replaced.
    last_summary = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["project", "pattern"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "pattern"], name="followsource_unique_pattern"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug}: {self.pattern}"


class FollowedFile(models.Model):
    """How far a followed record file has been imported.

    ``offset`` is the byte just after the last whole line imported, moved in
    the transaction that stores that line's run, so a crash between passes
    never imports a line twice. ``head_sha256`` (of the file's first bytes,
    up to the offset) and the inode tell a rotated or rewritten file from one
    that only grew.
    """

    source = models.ForeignKey(
        FollowSource, on_delete=models.CASCADE, related_name="files"
    )
    path = models.CharField(max_length=1024)
    offset = models.BigIntegerField(default=0)
    # Lines consumed so far, so reports name a line by its number in the file.
    lines = models.BigIntegerField(default=0)
    size = models.BigIntegerField(default=0)
    mtime_ns = models.BigIntegerField(default=0)
    inode = models.BigIntegerField(default=0)
    head_sha256 = models.CharField(max_length=64, blank=True)
    # The last time it was found shrunk, replaced or rewritten, what was found
    # (it is then read again from its start); "" when never.
    problem = models.TextField(blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["source", "path"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "path"], name="followedfile_unique_path"
            ),
            models.CheckConstraint(
                condition=Q(offset__gte=0), name="followedfile_offset_nonnegative"
            ),
        ]

    def __str__(self) -> str:
        return self.path
