"""The text tier: one completion of a recorded prompt by another model, compared
with the original output. Never a reproduction verdict — see ``texttier``."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from replayhub.models.projects import Project, Run, choices_check


class TextStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"


class TextTrigger(models.TextChoices):
    COMMAND = "command", "Command line"
    PAGE = "page", "From the run page"
    SUITE = "suite", "Suite"
    SCHEDULER = "scheduler", "Nightly scheduler"


class TextReplayQuerySet(models.QuerySet):
    """Reads, and the row's transitions (each one conditional UPDATE)."""

    def claim(self, pk: int, *, now=None) -> bool:
        """Queued → running; only one caller wins."""
        return bool(
            self.filter(pk=pk, status=TextStatus.QUEUED).update(
                status=TextStatus.RUNNING, started_at=now or timezone.now()
            )
        )

    def requeue(self, pk: int, *, sent_before, now) -> bool:
        """Still queued, its message sent before ``sent_before``: stamp it sent
        at ``now``; only one caller wins, so one message goes per period."""
        return bool(
            self.filter(
                pk=pk, status=TextStatus.QUEUED, enqueued_at__lt=sent_before
            ).update(enqueued_at=now)
        )

    def finish(self, pk: int, **result) -> bool:
        """Running → finished with ``result``."""
        return bool(
            self.filter(pk=pk, status=TextStatus.RUNNING).update(
                status=TextStatus.FINISHED, finished_at=timezone.now(), **result
            )
        )

    def settle(self, pk: int, *, night_id: int) -> bool:
        """Mark the spend as charged to ``night_id``; once per row."""
        return bool(
            self.filter(pk=pk, settled=False).update(settled=True, night_id=night_id)
        )

    def succeeded(self):
        return self.filter(status=TextStatus.FINISHED, error="")


class TextSuite(models.Model):
    """Every matching run of a project sent to one target model; its summary
    is written when the last run is done."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="text_suites"
    )
    target = models.CharField(max_length=270, help_text="PROVIDER:MODEL")
    judge = models.CharField(max_length=270, blank=True)
    # What selected the runs: model, since, include_failed, max.
    filters = models.JSONField(default=dict, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    total = models.PositiveIntegerField(default=0)
    replayed = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    mean_similarity = models.FloatField(null=True, blank=True)
    mean_equivalence = models.FloatField(null=True, blank=True)
    scores_high = models.PositiveIntegerField(default=0, help_text="Scores of 8+.")
    scores_low = models.PositiveIntegerField(
        default=0, help_text="Scores of 4 or less."
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"suite {self.pk} of {self.project} on {self.target}"


class TextReplay(models.Model):
    """One attempt to have another model answer a run's prompt: failures are
    rows too, with their error."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="text_replays")
    # Copied from the run so per-project reads need no join.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="text_replays"
    )
    suite = models.ForeignKey(
        TextSuite,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="text_replays",
    )
    night = models.ForeignKey(
        "Night",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="text_replays",
    )
    trigger = models.CharField(
        max_length=16, choices=TextTrigger, default=TextTrigger.COMMAND
    )
    status = models.CharField(
        max_length=16, choices=TextStatus, default=TextStatus.QUEUED
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    target_provider = models.CharField(max_length=64)
    target_model = models.CharField(max_length=200)
    judge_provider = models.CharField(max_length=64, blank=True)
    judge_model = models.CharField(max_length=200, blank=True)
    output = models.TextField(blank=True)
    similarity = models.FloatField(null=True, blank=True)
    equivalence_score = models.PositiveSmallIntegerField(null=True, blank=True)
    judge_rationale = models.TextField(blank=True)
    # The judge's answer as it came, kept when it could not be read.
    judge_answer = models.TextField(blank=True)
    judge_error = models.CharField(max_length=500, blank=True)
    error = models.CharField(max_length=500, blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    duration_ms = models.FloatField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    judge_input_tokens = models.PositiveBigIntegerField(default=0)
    judge_output_tokens = models.PositiveBigIntegerField(default=0)
    # Both calls; null when a price is missing for a model that used tokens.
    cost_usd = models.DecimalField(
        max_digits=14, decimal_places=6, null=True, blank=True
    )
    reservation = models.JSONField(default=dict, blank=True)
    settled = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    # When its message last went to the broker: one still queued long after
    # is sent again (a broker that restarted without its data lost it).
    enqueued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TextReplayQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            choices_check("status", TextStatus, "textreplay_status_valid"),
            choices_check("trigger", TextTrigger, "textreplay_trigger_valid"),
            models.CheckConstraint(
                condition=Q(equivalence_score__isnull=True)
                | Q(equivalence_score__gte=1, equivalence_score__lte=10),
                name="textreplay_score_1_to_10",
            ),
            models.CheckConstraint(
                condition=Q(similarity__isnull=True)
                | Q(similarity__gte=0, similarity__lte=1),
                name="textreplay_similarity_0_to_1",
            ),
            models.CheckConstraint(
                condition=~Q(status=TextStatus.FINISHED) | Q(finished_at__isnull=False),
                name="textreplay_finished_has_time",
            ),
        ]
        indexes = [
            # The run page: a run's text replays, newest first.
            models.Index(fields=["run", "-created_at"], name="textreplay_run_recent"),
            # Trends and the tier policy: a project's finished rows by time.
            models.Index(
                fields=["project", "finished_at"], name="textreplay_project_done"
            ),
        ]

    def __str__(self) -> str:
        return f"text replay {self.pk} of {self.run_id} on {self.target}"

    @property
    def target(self) -> str:
        return f"{self.target_provider}:{self.target_model}"

    @property
    def judge(self) -> str:
        return f"{self.judge_provider}:{self.judge_model}" if self.judge_model else ""

    @property
    def tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.judge_input_tokens
            + self.judge_output_tokens
        )

    def summary(self) -> dict:
        """The row as the command's ``--json`` prints it."""
        failed = self.status == TextStatus.FINISHED and bool(self.error)
        return {
            "text_replay": self.pk,
            "run": self.run_id,
            "tier": "text",
            "status": self.status,
            "target": self.target,
            "judge": self.judge or None,
            "similarity": self.similarity,
            "equivalence_score": self.equivalence_score,
            "rationale": self.judge_rationale or None,
            "judge_error": self.judge_error or None,
            "output": None if failed else self.output,
            "error": self.error or None,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "judge_input_tokens": self.judge_input_tokens,
            "judge_output_tokens": self.judge_output_tokens,
            "cost_usd": None if self.cost_usd is None else str(self.cost_usd),
            "duration_ms": round(self.duration_ms, 1),
            "attempts": self.attempts,
        }
