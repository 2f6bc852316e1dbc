"""How runs come in: uploaded files imported by a worker, and push tokens."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from replayhub.models.projects import Project, choices_check


class ImportStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    IMPORTING = "importing", "Importing"
    PREFLIGHT = "preflight", "Preflighting"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ImportFormat(models.TextChoices):
    NATIVE = "native", "Native run records"
    VERIFIERS = "verifiers", "verifiers rollout records"
    CLAUDE_CODE = "claude-code", "Claude Code session files"
    CODEX = "codex", "Codex CLI rollout files"
    AIDER = "aider", "Aider chat history"
    SWE_AGENT = "swe-agent", "SWE-agent trajectories"
    OPENHANDS = "openhands", "OpenHands trajectories"
    SWEBENCH = "swebench", "SWE-bench predictions"
    MINI_SWE_AGENT = "mini-swe-agent", "mini-swe-agent trajectories"
    GEMINI_CLI = "gemini-cli", "Gemini CLI session files"
    ATIF = "atif", "ATIF trajectories (Harbor)"
    OPENCODE = "opencode", "OpenCode session exports"


class ImportJob(models.Model):
    """An uploaded file imported by a worker, too large to import in the request.

    The counts are updated as it goes, for the page that shows its progress;
    ``summary`` is the import's summary object once done.
    """

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="import_jobs"
    )
    filename = models.CharField(max_length=255)
    format = models.CharField(
        max_length=16, choices=ImportFormat, default=ImportFormat.NATIVE
    )
    # The commit named as the original of the one run a transcript makes.
    original = models.CharField(max_length=64, blank=True, default="")
    size_bytes = models.BigIntegerField()
    # The uploaded file under the var directory, removed once imported.
    path = models.CharField(max_length=1024)
    status = models.CharField(
        max_length=16, choices=ImportStatus, default=ImportStatus.QUEUED
    )
    lines_read = models.BigIntegerField(default=0)
    imported = models.BigIntegerField(default=0)
    duplicates = models.BigIntegerField(default=0)
    invalid = models.BigIntegerField(default=0)
    preflight_done = models.BigIntegerField(default=0)
    preflight_total = models.BigIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    # Moved on with every progress update: a job that stops moving lost its worker.
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            choices_check("status", ImportStatus, "importjob_status_valid"),
            choices_check("format", ImportFormat, "importjob_format_valid"),
        ]

    def __str__(self) -> str:
        return f"import {self.pk}: {self.filename} into {self.project.slug}"

    @property
    def finished(self) -> bool:
        return self.status in (ImportStatus.DONE, ImportStatus.FAILED)


class IngestTokenQuerySet(models.QuerySet):
    def active(self):
        return self.filter(revoked_at__isnull=True)


class IngestToken(models.Model):
    """A bearer token that lets one producer push runs into one project.

    Only the token's sha256 is stored; the secret is shown once when issued.
    ``prefix`` is the public part of the token, for lookup and display.
    """

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="ingest_tokens"
    )
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    token_sha256 = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = IngestTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.project.slug})"

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])
