"""What goes out of ReplayHub: a project's forge, its webhooks, and each
delivery to them (``replayhub.outbound`` sends them)."""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from replayhub.models.projects import Project, choices_check


class ForgeKind(models.TextChoices):
    # Gitea and Forgejo answer GitHub's status API at their own base URL.
    GITHUB = "github", "GitHub (or Gitea, Forgejo)"
    GITLAB = "gitlab", "GitLab"


class Forge(models.Model):
    """Where a project's original commits live, to set commit statuses on.

    ``token_env`` is the *name* of the worker's variable holding the token,
    from the operator's allow-list (as a repository credential's); the token
    itself is never stored.
    """

    project = models.OneToOneField(
        Project, on_delete=models.CASCADE, related_name="forge"
    )
    kind = models.CharField(max_length=16, choices=ForgeKind)
    api_url = models.URLField(max_length=500)
    # owner/repo on GitHub; the project's path (group/name) or numeric id on GitLab.
    repo = models.CharField(max_length=300)
    token_env = models.CharField(max_length=128)

    class Meta:
        constraints = [choices_check("kind", ForgeKind, "forge_kind_valid")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.repo}"


class WebhookFormat(models.TextChoices):
    CLOUDEVENTS = "cloudevents", "CloudEvents 1.0 JSON"
    SLACK = "slack", 'Slack-compatible {"text": ...}'


class Webhook(models.Model):
    """A URL a project's events are posted to, signed with HMAC-SHA256 over
    the body when ``secret_env`` names the variable holding the key (from
    the same allow-list as the forge's token; never stored)."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="webhooks"
    )
    url = models.URLField(max_length=2000)
    # A subset of replayhub.outbound.EVENTS.
    events = models.JSONField(default=list)
    format = models.CharField(
        max_length=16, choices=WebhookFormat, default=WebhookFormat.CLOUDEVENTS
    )
    secret_env = models.CharField(max_length=128, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            choices_check("format", WebhookFormat, "webhook_format_valid"),
        ]

    def __str__(self) -> str:
        return f"webhook {self.pk} of {self.project_id}"


class DeliveryTarget(models.TextChoices):
    FORGE = "forge", "Commit status"
    WEBHOOK = "webhook", "Webhook"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"


class DeliveryQuerySet(models.QuerySet["Delivery"]):
    def recent(self, project: Project) -> DeliveryQuerySet:
        return self.filter(project=project).order_by("-created_at", "-id")

    def claim(self, pk: int, *, now: datetime, until: datetime) -> bool:
        """Take a pending delivery for one attempt, unless a worker holds it
        (a redelivered message finds it held, or already settled)."""
        return bool(
            self.filter(pk=pk, status=DeliveryStatus.PENDING)
            .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
            .update(claimed_until=until, attempts=F("attempts") + 1)
        )

    def settle(
        self,
        pk: int,
        *,
        status: str,
        http_status: int | None,
        answer: str,
        hold_until: datetime | None = None,
    ) -> int:
        """End a claimed attempt: for good, or ``pending`` again to be retried,
        held from the sweep until ``hold_until``."""
        done = status != DeliveryStatus.PENDING
        return self.filter(pk=pk, status=DeliveryStatus.PENDING).update(
            status=status,
            http_status=http_status,
            answer=answer[:300],
            claimed_until=None if done else hold_until,
            finished_at=timezone.now() if done else None,
        )

    def lost(self, *, before: datetime) -> DeliveryQuerySet:
        """Pending deliveries no worker has held since ``before``: their
        message was lost, or their worker died mid-attempt."""
        return self.filter(status=DeliveryStatus.PENDING, created_at__lt=before).filter(
            Q(claimed_until__isnull=True) | Q(claimed_until__lt=before)
        )


class Delivery(models.Model):
    """One message to a forge or a webhook, and the answer it got.

    ``key`` is the message's identity (the target, the commit or event, and
    the state it says): the unique constraint makes a second send of the same
    state find the first row, so nothing goes out twice. ``body`` is what is
    posted, secrets apart (the token and the signature are added on sending).
    """

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="deliveries"
    )
    target = models.CharField(max_length=16, choices=DeliveryTarget)
    webhook = models.ForeignKey(
        Webhook,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="deliveries",
    )
    event = models.CharField(max_length=32)
    key = models.CharField(max_length=64)
    commit = models.CharField(max_length=64, blank=True)
    summary = models.CharField(max_length=200)
    body = models.JSONField(default=dict)
    status = models.CharField(
        max_length=16, choices=DeliveryStatus, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    http_status = models.PositiveIntegerField(null=True, blank=True)
    # The first line of the answer's body, or the error's, bounded.
    answer = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    claimed_until = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["key"], name="delivery_key_unique"),
            choices_check("target", DeliveryTarget, "delivery_target_valid"),
            choices_check("status", DeliveryStatus, "delivery_status_valid"),
            models.CheckConstraint(
                condition=Q(target=DeliveryTarget.FORGE, webhook__isnull=True)
                | Q(target=DeliveryTarget.WEBHOOK, webhook__isnull=False),
                name="delivery_webhook_iff_webhook_target",
            ),
        ]
        indexes = [
            # The project page's last deliveries: project = ? ORDER BY created_at DESC.
            models.Index(
                fields=["project", "-created_at"], name="delivery_project_recent"
            ),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk}: {self.summary}"
