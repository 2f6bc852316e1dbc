"""The people's side: who holds which replay, what they decided, and the audit trail."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from replayhub import roles
from replayhub.models import Replay, Verdict


class Ability(models.Model):
    """No table and no rows: it carries the app-wide permissions of the roles."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = roles.ABILITIES

    def __str__(self) -> str:
        return "app-wide permissions"


class Claim(models.Model):
    """A reviewer's lease on one replay. Expired claims are free to take."""

    replay = models.OneToOneField(
        Replay, on_delete=models.CASCADE, related_name="claim"
    )
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    claimed_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [
            # "Who holds what" on the queue and the reviewer's own claims.
            models.Index(
                fields=["reviewer", "expires_at"], name="claim_reviewer_active"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reviewer} holds replay {self.replay_id}"

    @property
    def active(self) -> bool:
        return self.expires_at > timezone.now()


class Decision(models.TextChoices):
    CONFIRM = "confirm", "Confirm"
    OVERTURN = "overturn", "Overturn"
    RERUN = "rerun", "Rerun"


class Review(models.Model):
    """A human decision on a replay's verdict."""

    replay = models.ForeignKey(Replay, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    decision = models.CharField(max_length=16, choices=Decision)
    verdict_before = models.CharField(max_length=16, choices=Verdict)
    verdict_after = models.CharField(max_length=16, choices=Verdict, blank=True)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(decision__in=Decision.values), name="review_decision_valid"
            ),
            # An overturn names the corrected verdict, and it must differ.
            models.CheckConstraint(
                condition=~Q(decision="overturn")
                | (~Q(verdict_after="") & ~Q(verdict_after=models.F("verdict_before"))),
                name="review_overturn_names_new_verdict",
            ),
        ]
        indexes = [
            # The decision history of one replay, newest first.
            models.Index(fields=["replay", "-created_at"], name="review_replay_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} on replay {self.replay_id}"


class AuditEvent(models.Model):
    """Append-only: who changed what, from what, to what, when."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The history of one object (a replay, a budget), newest first.
            models.Index(
                fields=["object_type", "object_id", "-created_at"], name="audit_object"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.object_type}:{self.object_id}"
