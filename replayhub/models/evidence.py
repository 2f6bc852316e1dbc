"""What the test gate remembers across replays: tests that flip, and results it
need not compute again."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from replayhub.models.projects import Project


class TestRecord(models.Model):
    """How often one test passed and failed on one tree, over every run of it.

    A test seen both passing and failing on the same tree is flaky: nothing the
    replay did can explain the difference.
    """

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="test_records"
    )
    tree_sha = models.CharField(max_length=64)
    test_id = models.TextField()
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    # Replays whose test gate ran it on this tree.
    replays = models.PositiveIntegerField(default=0)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "tree_sha", "test_id"], name="testrecord_unique"
            ),
        ]
        indexes = [
            # "Which of these failing tests are known to flip?" for a verdict,
            # and the project page's list of flaky tests.
            models.Index(
                fields=["project", "test_id"],
                name="testrecord_flaky",
                condition=Q(passed__gt=0, failed__gt=0),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.test_id} on {self.tree_sha[:12]}"


class CachedResult(models.Model):
    """The original tree's test result under one configuration, kept for reuse.

    ``key`` digests the tree, the test command, the sandbox image and the
    project's test configuration; a result whose outcome flipped is never kept.
    """

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="cached_results"
    )
    key = models.CharField(max_length=64)
    tree_sha = models.CharField(max_length=64)
    # The attempt as the test gate reports it, test cases included.
    attempt = models.JSONField()
    replay = models.ForeignKey(
        "Replay", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "key"], name="cachedresult_unique_key"
            ),
        ]

    def __str__(self) -> str:
        return f"cached result of {self.tree_sha[:12]}"
