"""The people's side: who holds which replay, what they decided, and the audit trail."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from replayhub import roles
from replayhub.models import VERDICT_CHOICES, Project, Replay
from replayhub.verdicts import Verdict


class Ability(models.Model):
    """No table and no rows: it carries the app-wide permissions of the roles."""

    class Meta:
        managed = False
        default_permissions = ()
        # A list of its own: the stubs' element type is wider (lists are invariant).
        permissions = [*roles.ABILITIES]

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


class _Decision(models.TextChoices):
    """What a reviewer does with a verdict: ``Review.Decision`` (defined out here
    so that ``Review.Meta``'s constraint can name it)."""

    CONFIRM = "confirm", "Confirm"
    OVERTURN = "overturn", "Overturn"
    RERUN = "rerun", "Rerun"


class Purpose(models.TextChoices):
    DECISION = "decision", "Decision"
    SECOND = "second", "Second opinion"
    GOLD = "gold", "Gold check"


class ReviewQuerySet(models.QuerySet):
    def standing(self):
        """Decisions not taken back: the ones that count.

        A gold check is a measurement of its reviewer, never a decision on the
        replay, so it does not count either.
        """
        return self.filter(undone_at__isnull=True).exclude(purpose="gold")


class Review(models.Model):
    """A human decision on a replay's verdict.

    A gold check is a judgement on a gold item: it is measured against the
    settled verdict and changes nothing on the replay.
    """

    Decision = _Decision

    replay = models.ForeignKey(Replay, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    decision = models.CharField(max_length=16, choices=_Decision)
    verdict_before = models.CharField(max_length=16, choices=VERDICT_CHOICES)
    verdict_after = models.CharField(max_length=16, choices=VERDICT_CHOICES, blank=True)
    note = models.TextField(blank=True)
    purpose = models.CharField(max_length=16, choices=Purpose, default=Purpose.DECISION)
    created_at = models.DateTimeField(default=timezone.now)
    # Set when the reviewer took the decision back (shortly after making it);
    # the row stays, so the history shows both the decision and its undoing.
    undone_at = models.DateTimeField(null=True, blank=True)

    objects = ReviewQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(decision__in=_Decision.values),
                name="review_decision_valid",
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
            # The Done tab: one reviewer's decisions, newest first.
            models.Index(
                fields=["reviewer", "-created_at"], name="review_reviewer_recent"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.decision} on replay {self.replay_id}"


class AuditEventManager(models.Manager["AuditEvent"]):
    def record(
        self, *, actor, action: str, replay_id: int, before=None, after=None
    ) -> AuditEvent:
        """One event of a replay's trail: a change a person made to it."""
        return self.create(
            actor=actor,
            action=action,
            object_type="replay",
            object_id=str(replay_id),
            before=before or {},
            after=after or {},
        )


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

    objects = AuditEventManager()

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


# --- Working together: policies, labels, comments, second opinions, gold --------


class ReviewPolicy(models.Model):
    """How a project's replays are reviewed; a project without one uses defaults."""

    project = models.OneToOneField(
        Project, on_delete=models.CASCADE, related_name="review_policy"
    )
    blind = models.BooleanField(
        default=False,
        help_text="Hide the automated verdict and reason until a reviewer has "
        "recorded a first judgement.",
    )
    second_on_overturn = models.BooleanField(
        default=False, help_text="Every overturn needs a second reviewer."
    )
    second_on_verdicts = models.JSONField(
        default=list,
        blank=True,
        help_text="Decisions that end on one of these verdicts need a second "
        'reviewer, e.g. ["equivalent"].',
    )
    gold_rate_percent = models.PositiveSmallIntegerField(
        default=0,
        help_text="Out of every 100 items a reviewer takes with Next, about this "
        "many are gold items they have not judged yet.",
    )

    class Meta:
        verbose_name_plural = "review policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(gold_rate_percent__lte=100), name="policy_gold_rate_range"
            ),
        ]

    def __str__(self) -> str:
        return f"review policy of {self.project}"

    def clean(self) -> None:
        verdicts = self.second_on_verdicts
        if not isinstance(verdicts, list) or any(
            v not in tuple(Verdict) for v in verdicts
        ):
            raise ValidationError(
                {
                    "second_on_verdicts": "A list of verdicts: "
                    + ", ".join(f'"{v}"' for v in tuple(Verdict))
                }
            )

    def needs_second(self, *, decision: str, verdict_after: str) -> str:
        """Why a decision needs a second reviewer ("" when it does not)."""
        if decision == Review.Decision.OVERTURN and self.second_on_overturn:
            return "overturn"
        if decision != Review.Decision.RERUN and verdict_after in (
            self.second_on_verdicts or []
        ):
            return f"decided {verdict_after}"
        return ""


class LabelKind(models.TextChoices):
    YES_NO = "yes_no", "Yes / no"
    SCALE = "scale", "Scale 1-5"
    CATEGORY = "category", "Category list"


class Label(models.Model):
    """A structured judgement a project asks for with each decision."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="labels"
    )
    name = models.CharField(max_length=80)
    kind = models.CharField(max_length=16, choices=LabelKind)
    categories = models.JSONField(
        default=list, blank=True, help_text='For a category list: ["harness", "agent"]'
    )
    required = models.BooleanField(default=False)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="label_unique"),
            models.CheckConstraint(
                condition=Q(kind__in=LabelKind.values), name="label_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project}: {self.name}"

    def clean(self) -> None:
        categories = self.categories
        if self.kind == LabelKind.CATEGORY and (
            not isinstance(categories, list)
            or not categories
            or not all(isinstance(c, str) and 0 < len(c) <= 80 for c in categories)
        ):
            raise ValidationError(
                {"categories": 'A category list names its values: ["harness", "agent"]'}
            )

    def choices(self) -> list[tuple[str, str]]:
        if self.kind == LabelKind.YES_NO:
            return [("yes", "yes"), ("no", "no")]
        if self.kind == LabelKind.SCALE:
            return [(str(n), str(n)) for n in range(1, 6)]
        return [(str(c), str(c)) for c in self.categories or []]

    def choice_list(self) -> str:
        """The values as a reader is told them: "yes, no"."""
        return ", ".join(value for value, _ in self.choices())


class ReviewLabel(models.Model):
    """One label's value on one decision."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="labels")
    label = models.ForeignKey(Label, on_delete=models.CASCADE, related_name="values")
    value = models.CharField(max_length=80)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["review", "label"], name="review_label_unique"
            ),
        ]
        indexes = [
            # Label filters and counts: decisions with one label's value.
            models.Index(fields=["label", "value"], name="review_label_value"),
        ]

    def __str__(self) -> str:
        return f"{self.label.name}={self.value}"


class CommentTarget(models.TextChoices):
    DOD = "dod", "Diff of diffs"
    ORIGINAL = "original", "Original change"
    REPLAY = "replay", "Replay change"
    TESTS = "tests", "Test output"


class Comment(models.Model):
    """A remark on a line range of a diff or a test output; replies form a thread.

    The first comment of a thread carries the anchor and the resolution; a
    reply carries only its text.
    """

    replay = models.ForeignKey(
        Replay, on_delete=models.CASCADE, related_name="comments"
    )
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="replies"
    )
    target = models.CharField(max_length=16, choices=CommentTarget, blank=True)
    # The file path of a diff, or "<tree> run <n>" of a test output.
    path = models.CharField(max_length=1000, blank=True)
    # "old" or "new" side of a diff line; empty for a test output.
    side = models.CharField(max_length=8, blank=True)
    line_start = models.PositiveIntegerField(null=True, blank=True)
    line_end = models.PositiveIntegerField(null=True, blank=True)
    # The lines as they read when the comment was written.
    excerpt = models.TextField(blank=True)
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(line_end__isnull=True)
                | Q(line_start__isnull=False, line_end__gte=models.F("line_start")),
                name="comment_range_ordered",
            ),
            models.CheckConstraint(
                condition=Q(parent__isnull=False) | ~Q(target=""),
                name="comment_thread_anchored",
            ),
        ]
        indexes = [
            # A replay's threads, and its count of unresolved ones.
            models.Index(
                fields=["replay", "resolved_at"],
                name="comment_open_threads",
                condition=Q(parent__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"comment {self.pk} on replay {self.replay_id}"

    @property
    def anchor(self) -> str:
        where = self.path or CommentTarget(self.target).label
        if self.line_start is None:
            return where
        lines = (
            f"line {self.line_start}"
            if self.line_end in (None, self.line_start)
            else f"lines {self.line_start}-{self.line_end}"
        )
        side = f" ({self.side})" if self.side else ""
        return f"{where}{side}, {lines}"


class SecondOpinion(models.Model):
    """A replay waiting for a second reviewer's independent decision."""

    replay = models.ForeignKey(
        Replay, on_delete=models.CASCADE, related_name="second_opinions"
    )
    # The decision being checked; None when asked for before any decision.
    first_review = models.ForeignKey(
        Review, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # Who may not give it: the first reviewer, or whoever asked.
    excluded = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    why = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    second_review = models.ForeignKey(
        Review, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    agrees = models.BooleanField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # At most one open request per replay.
            models.UniqueConstraint(
                fields=["replay"],
                condition=Q(second_review__isnull=True),
                name="second_opinion_one_open",
            ),
        ]

    def __str__(self) -> str:
        return f"second opinion on replay {self.replay_id}"


class GoldItem(models.Model):
    """A decided replay whose verdict is settled: reviewers are checked against it."""

    replay = models.OneToOneField(Replay, on_delete=models.CASCADE, related_name="gold")
    verdict = models.CharField(max_length=16, choices=VERDICT_CHOICES)
    # The band it is shown in, as if freshly queued.
    band = models.PositiveSmallIntegerField()
    marked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL
    )
    marked_at = models.DateTimeField(default=timezone.now)
    active = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"gold {self.verdict} on replay {self.replay_id}"


class GoldServing(models.Model):
    """A gold item handed to one reviewer, and the judgement they gave it."""

    gold = models.ForeignKey(GoldItem, on_delete=models.CASCADE, related_name="served")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    served_at = models.DateTimeField(default=timezone.now)
    review = models.OneToOneField(
        Review, null=True, blank=True, on_delete=models.SET_NULL, related_name="gold"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["gold", "reviewer"], name="gold_served_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.gold} served to {self.reviewer}"


class NoticeKind(models.TextChoices):
    MENTION = "mention", "Mentioned"
    ASSIGNED = "assigned", "Assigned"
    SECOND = "second", "Second opinion"


class Notice(models.Model):
    """An inbox entry: someone mentioned or assigned a reviewer."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notices"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    kind = models.CharField(max_length=16, choices=NoticeKind)
    replay = models.ForeignKey(Replay, on_delete=models.CASCADE, related_name="+")
    # The thread a mention was made in (its first comment): the link's anchor.
    thread = models.ForeignKey(
        "Comment",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    text = models.CharField(max_length=300)
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The inbox badge: one user's unread notices.
            models.Index(fields=["user", "read_at"], name="notice_user_unread"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} for {self.user}"

    @property
    def anchor(self) -> str:
        """Where on the replay's page the notice points: its thread, if any."""
        return f"thread-{self.thread_id}" if self.thread_id else ""
