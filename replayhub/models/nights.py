"""Budgets, the nights that spend them, and the nightly rollups."""

from __future__ import annotations

import re
from datetime import date

from django.core.exceptions import ValidationError
from django.db import connection, models
from django.db.models import Q
from django.utils import timezone

from replayhub.models.projects import Project, RunSource, choices_check
from replayhub.models.replays import Tier
from replayhub.nights import tiers
from replayhub.nights.arithmetic import Amounts
from replayhub.replicates.stopping import MOST_REPLICATES, ReplicatePolicy

# The tiers with a share of a night, in admission order.
SHARE_TIER_CHOICES = [(t, tiers.LABELS[t]) for t in tiers.SHARE_TIERS]

# As the text tier reads it: a provider name, a colon, a model name.
_TARGET = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}:\S.{0,199}")


class Budget(models.Model):
    """What one project may spend per night, and when its night is."""

    project = models.OneToOneField(
        Project, on_delete=models.CASCADE, related_name="budget"
    )
    # Each tier's share of the night is a BudgetShare row (``shares``).
    window_start_hour = models.PositiveSmallIntegerField(default=1)
    window_end_hour = models.PositiveSmallIntegerField(default=6)
    timezone = models.CharField(max_length=64, default="UTC")
    # The tier policy: preflight (free) → text (cheap) → agentic (expensive).
    text_enabled = models.BooleanField(
        default=False,
        help_text="Send the night's candidates to the text tier first.",
    )
    text_target = models.CharField(
        max_length=270, blank=True, help_text="PROVIDER:MODEL the text tier asks."
    )
    text_judge = models.CharField(
        max_length=270, blank=True, help_text="PROVIDER:MODEL of the judge; optional."
    )
    agentic_after_text = models.BooleanField(
        default=True,
        help_text="With the text tier on, an agentic replay is admitted only for "
        "runs the text tier passed on.",
    )
    text_similarity_below = models.FloatField(
        default=0.5,
        help_text="A run goes on to the agentic tier when its text similarity is "
        "below this.",
    )
    text_score_at_most = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="…or when the judge's score is at most this. Empty: not used.",
    )
    # The tape tier: a replay whose model answers come from a tape (the run's
    # recorded one, else a previous replay's). It spends no model tokens, so
    # its share is a count and sandbox time, and it runs before the agentic tier.
    tape_enabled = models.BooleanField(
        default=False,
        help_text="Replay runs that have a tape from their tape first, before "
        "the agentic tier.",
    )
    escalate_categories = models.JSONField(
        default=list,
        blank=True,
        help_text="Record categories that go on to the agentic tier whatever the "
        'text tier found, e.g. ["security"].',
    )
    # The replicate policy (``replicates.stopping.ReplicatePolicy``): more
    # replays of a run, each one sample, until its reproducibility is decided
    # or it has ``replicate_most``. Off while the threshold is empty.
    replicate_threshold = models.FloatField(
        null=True,
        blank=True,
        help_text="Replicates decide whether a run reproduces at least this "
        "often (p0, e.g. 0.8). Empty: no replicates.",
    )
    replicate_confidence = models.FloatField(
        default=0.9,
        help_text="The chance of deciding rightly at the zone's edges (e.g. 0.9).",
    )
    replicate_most = models.PositiveSmallIntegerField(
        default=10, help_text="The most samples a run gets (k, at most 50)."
    )
    replicate_margin = models.FloatField(
        default=0.15,
        help_text="Half the indifference zone around the threshold.",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(window_start_hour__lte=23) & Q(window_end_hour__lte=23),
                name="budget_window_hours_valid",
            ),
            models.CheckConstraint(
                condition=Q(text_similarity_below__gte=0)
                & Q(text_similarity_below__lte=1),
                name="budget_text_threshold_valid",
            ),
            # The policy's own checks (ReplicatePolicy) are the form's; this
            # keeps a row any command could write from being nonsense.
            models.CheckConstraint(
                condition=(
                    Q(replicate_threshold__isnull=True)
                    | Q(replicate_threshold__gt=0, replicate_threshold__lt=1)
                )
                & Q(replicate_confidence__gt=0, replicate_confidence__lt=1)
                & Q(replicate_most__gte=1, replicate_most__lte=MOST_REPLICATES)
                & Q(replicate_margin__gt=0, replicate_margin__lt=0.5),
                name="budget_replicate_policy_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"budget of {self.project}"

    def clean(self) -> None:
        errors = {}
        for name in ("text_target", "text_judge"):
            value = getattr(self, name)
            if value and not _TARGET.fullmatch(value):
                errors[name] = "Write PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-5."
        if self.text_enabled and not self.text_target:
            errors["text_target"] = "The text tier needs a PROVIDER:MODEL to ask."
        categories = self.escalate_categories
        if not isinstance(categories, list) or not all(
            isinstance(c, str) for c in categories
        ):
            errors["escalate_categories"] = 'Give a list of names, e.g. ["security"].'
        if self.replicate_threshold is not None:
            try:
                self.replicate_policy()
            except ValueError as exc:
                errors["replicate_threshold"] = str(exc)
        if errors:
            raise ValidationError(errors)

    def replicate_policy(self) -> ReplicatePolicy | None:
        """The project's replicate policy; None when replicates are off.
        ValueError for a policy ``ReplicatePolicy`` refuses."""
        if self.replicate_threshold is None:
            return None
        return ReplicatePolicy(
            threshold=self.replicate_threshold,
            confidence=self.replicate_confidence,
            most=self.replicate_most,
            margin=self.replicate_margin,
        )


class BudgetShare(models.Model):
    """One tier's share of a project's nightly budget.

    A tier's dimensions are ``tiers.BUDGETED``; the others stay zero. A
    budget without a row for a tier gives it ``tiers.DEFAULT_SHARES``.
    """

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="shares")
    tier = models.CharField(max_length=16, choices=SHARE_TIER_CHOICES)
    max_replays = models.PositiveIntegerField(default=0)
    max_sandbox_minutes = models.PositiveIntegerField(default=0)
    max_tokens = models.PositiveBigIntegerField(default=0)
    max_cost_usd = models.DecimalField(max_digits=12, decimal_places=2, default=0)

    class Meta:
        ordering = ["budget", "tier"]
        constraints = [
            # One share per tier: the night copies it, the budgets page edits
            # it by (budget, tier); the index also serves a budget's shares.
            models.UniqueConstraint(
                fields=["budget", "tier"], name="budgetshare_unique_tier"
            ),
            choices_check("tier", SHARE_TIER_CHOICES, "budgetshare_tier_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.tier} share of {self.budget}"

    def as_share(self) -> tiers.Share:
        return tiers.Share(
            self.max_replays,
            self.max_sandbox_minutes,
            self.max_tokens,
            self.max_cost_usd,
        )


class NightStatus(models.TextChoices):
    OPEN = "open", "Open"
    CLOSED = "closed", "Closed"


class Night(models.Model):
    """One project's nightly window; what each tier may spend in it, and has
    reserved and used, is its shares."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="nights"
    )
    date = models.DateField()
    status = models.CharField(
        max_length=16, choices=NightStatus, default=NightStatus.OPEN
    )
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    # What each tier may spend tonight, and has reserved and used, is a
    # NightShare row (``shares``), copied from the budget when the night opens.

    # When the scheduler ran this night's selection (once per night).
    scheduled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-date"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "date"], name="night_unique_date"
            ),
            choices_check("status", NightStatus, "night_status_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.project} night of {self.date}"


class NightShare(models.Model):
    """One tier's share of one night: its limits, and what it has reserved and
    used, on the four dimensions (those the tier does not budget stay zero).

    Admission reserves here with one conditional UPDATE of this row alone
    (``nights.shares.reserve``); a replay's settlement gives its reservation
    back here and charges what it spent (``tiers.charges``).
    """

    night = models.ForeignKey(Night, on_delete=models.CASCADE, related_name="shares")
    tier = models.CharField(max_length=16, choices=SHARE_TIER_CHOICES)
    limit_replays = models.PositiveIntegerField(default=0)
    limit_sandbox_seconds = models.PositiveBigIntegerField(default=0)
    limit_tokens = models.PositiveBigIntegerField(default=0)
    limit_cost_usd = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    reserved_replays = models.PositiveIntegerField(default=0)
    reserved_sandbox_seconds = models.PositiveBigIntegerField(default=0)
    reserved_tokens = models.PositiveBigIntegerField(default=0)
    reserved_cost_usd = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    used_replays = models.PositiveIntegerField(default=0)
    used_sandbox_seconds = models.PositiveBigIntegerField(default=0)
    used_tokens = models.PositiveBigIntegerField(default=0)
    used_cost_usd = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    # Candidates of this tier the share could not take at the latest admission.
    deferred = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["night", "tier"]
        constraints = [
            # One share per tier: reserve and settle find their row by
            # (night, tier); the index also serves a night's shares (the
            # budgets page, the nightly command).
            models.UniqueConstraint(
                fields=["night", "tier"], name="nightshare_unique_tier"
            ),
            choices_check("tier", SHARE_TIER_CHOICES, "nightshare_tier_valid"),
            # Admission reserves with a conditional UPDATE; this is the backstop
            # that makes an overspend impossible even for a buggy caller.
            models.CheckConstraint(
                condition=(
                    Q(reserved_replays__lte=models.F("limit_replays"))
                    & Q(reserved_sandbox_seconds__lte=models.F("limit_sandbox_seconds"))
                    & Q(reserved_tokens__lte=models.F("limit_tokens"))
                    & Q(reserved_cost_usd__lte=models.F("limit_cost_usd"))
                ),
                name="nightshare_reserved_within_limits",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tier} share of {self.night}"

    def amounts(self, kind: str) -> Amounts:
        """The share's ``limit``, ``reserved`` or ``used`` amounts."""
        return Amounts(
            getattr(self, f"{kind}_replays"),
            getattr(self, f"{kind}_sandbox_seconds"),
            getattr(self, f"{kind}_tokens"),
            getattr(self, f"{kind}_cost_usd"),
        )


class NightCounts(models.Model):
    """The counts of one night's finished replays, as the dashboard reads them."""

    date = models.DateField()
    model = models.CharField(max_length=200, blank=True)
    # Code runs and rollouts are counted apart: their verdicts rest on
    # different evidence (tests on trees, a verifier's reward).
    source = models.CharField(max_length=16, choices=RunSource, default=RunSource.CODE)
    # Tape replays and live (agentic) replays are counted apart: a tape
    # replay's model answers are fixed, so its drift is the environment's.
    tier = models.CharField(max_length=16, choices=Tier, default=Tier.AGENTIC)
    attempted = models.PositiveIntegerField(default=0)
    identical = models.PositiveIntegerField(default=0)
    equivalent = models.PositiveIntegerField(default=0)
    divergent = models.PositiveIntegerField(default=0)
    inconclusive = models.PositiveIntegerField(default=0)
    by_reason = models.JSONField(default=dict, blank=True)
    # Human decisions on this night's replays, per automated verdict.
    confirmed = models.JSONField(default=dict, blank=True)
    overturned = models.JSONField(default=dict, blank=True)
    # Runs deferred by the budget; kept on the row with model "".
    deferred = models.PositiveIntegerField(default=0)
    computed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True

    @property
    def reached(self) -> int:
        return self.attempted - self.inconclusive


def verdicts_add_up(name: str) -> models.CheckConstraint:
    return models.CheckConstraint(
        condition=Q(
            attempted=models.F("identical")
            + models.F("equivalent")
            + models.F("divergent")
            + models.F("inconclusive")
        ),
        name=name,
    )


class Rollup(NightCounts):
    """One night of one project, model, source and tier, counted once for the
    dashboard.

    Written when a night closes and recomputable for any range; the trends
    dashboard reads only these rows, never the replays.
    """

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="rollups"
    )

    class Meta:
        ordering = ["date", "project", "model", "source", "tier"]
        constraints = [
            models.UniqueConstraint(
                fields=["date", "project", "model", "source", "tier"],
                name="rollup_unique_night_model_tier",
            ),
            choices_check("source", RunSource, "rollup_source_valid"),
            choices_check("tier", Tier, "rollup_tier_valid"),
            verdicts_add_up("rollup_verdicts_add_up"),
        ]
        indexes = [
            # The dashboard of one project over a date range: its sums, its
            # version and its models, read from the index alone. A project's
            # rows lie one per night across the table (each night's close
            # appends every project's rows), so reading them from the table
            # costs a page per row. The copy costs as much disk as the table.
            models.Index(
                fields=["project", "date"],
                include=[
                    "model",
                    "source",
                    "tier",
                    "attempted",
                    "identical",
                    "equivalent",
                    "divergent",
                    "inconclusive",
                    "deferred",
                    "by_reason",
                    "confirmed",
                    "overturned",
                    "id",
                    "computed_at",
                ],
                name="rollup_project_date_sums",
            ),
            # The version of an all-projects dashboard (a count and two maxima
            # over a date range, by model and source), from the index alone.
            models.Index(
                fields=["date"],
                include=["model", "source", "tier", "id", "computed_at"],
                name="rollup_date_version",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project} {self.model or 'all models'} {self.date}"


class RollupTotal(NightCounts):
    """One night of every project together, per model, source and tier.

    The sums of the night's Rollup rows, rewritten with them
    (``reviews.trends.rollups``): the all-projects dashboard reads a few rows a night
    here instead of one per project and model there.
    """

    class Meta:
        ordering = ["date", "model", "source", "tier"]
        constraints = [
            models.UniqueConstraint(
                fields=["date", "model", "source", "tier"],
                name="rolluptotal_unique_night_model_tier",
            ),
            choices_check("source", RunSource, "rolluptotal_source_valid"),
            choices_check("tier", Tier, "rolluptotal_tier_valid"),
            verdicts_add_up("rolluptotal_verdicts_add_up"),
        ]

    def __str__(self) -> str:
        return f"all projects {self.model or 'all models'} {self.date}"


class RollupRequestManager(models.Manager["RollupRequest"]):
    def owe(self, *, project_id: int, day: date) -> bool:
        """Write the night's request unless it is there; True when this call
        wrote it.

        One statement (``ON CONFLICT DO NOTHING``, PostgreSQL and SQLite
        alike) where ``get_or_create`` takes a read, a savepoint and a write:
        it runs after every reviewer's decision.
        """
        q = connection.ops.quote_name
        table, project, night = (
            q(self.model._meta.db_table),
            q("project_id"),
            q("date"),
        )
        with connection.cursor() as cursor:
            cursor.execute(
                # Names from the model's own options, quoted; values bound.
                f"INSERT INTO {table} ({project}, {night}, {q('requested_at')}) "  # noqa: S608
                f"VALUES (%s, %s, %s) ON CONFLICT ({project}, {night}) DO NOTHING "
                f"RETURNING {q('id')}",
                [project_id, day, timezone.now()],
            )
            return cursor.fetchone() is not None


class RollupRequest(models.Model):
    """A night of a project whose rollup is owed: a reviewer decided on one of
    its replays since it was last counted.

    One row per project and night, however many decisions: the first decision
    writes it and sends the task that recounts the night, the rest find it
    and send nothing (``reviews.trends.rollups.rollup_request``).
    """

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="rollup_requests"
    )
    date = models.DateField()
    requested_at = models.DateTimeField(default=timezone.now)

    objects = RollupRequestManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "date"], name="rolluprequest_unique_night"
            ),
        ]
        indexes = [
            # The sweep: requests whose task has not run for a while, oldest first.
            models.Index(fields=["requested_at"], name="rolluprequest_requested"),
        ]

    def __str__(self) -> str:
        return f"{self.project} {self.date} (owed since {self.requested_at})"
