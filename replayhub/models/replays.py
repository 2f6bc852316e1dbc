"""Replays, their state machine, and what they found: comparisons and test runs."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection, connections, models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Q
from django.utils import timezone

from replayhub.lib.boundedjson import StoredDecoder
from replayhub.models.projects import Project, Run, choices_check
from replayhub.verdicts import Verdict


class Tier(models.TextChoices):
    PREFLIGHT = "preflight", "Preflight"
    TEXT = "text", "Text"
    AGENTIC = "agentic", "Agentic"
    # Agentic, the model's answers served from the original's tape.
    TAPE = "tape", "Tape"


class ReplayStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    CANCELLED = "cancelled", "Cancelled"


class Phase(models.TextChoices):
    QUEUED = "queued", "Queued"
    PROVISIONING = "provisioning", "Provisioning"
    AGENT = "agent", "Agent"
    CAPTURE = "capture", "Capture"
    TESTS_ORIGINAL = "tests_original", "Tests on original"
    TESTS_REPLAY = "tests_replay", "Tests on replay"
    TESTS_REFERENCE = "tests_reference", "Tests on reference"
    VERDICT = "verdict", "Verdict"
    DONE = "done", "Done"


# A verdict column's choices, built from the rule modules' one ``Verdict``.
VERDICT_CHOICES = [(verdict.value, verdict.label) for verdict in Verdict]


class ReviewBand(models.IntegerChoices):
    """Queue priority, lower first: where a human learns the most."""

    # A divergent replay of a run whose replays also reproduced it: an agent
    # right only some of the time teaches a reviewer most (docs/replicates.md).
    SOMETIMES_DIVERGES = 0, "Sometimes diverges"
    # An equivalent verdict: a code run's tree differs but passes the
    # project's tests as the original's does, or a rollout's completion
    # differs but its verifier passes both.
    PASSED_DIFF_DIVERGED = 1, "Tests or verifier passed, diff diverged"
    DIVERGENT = 2, "Divergent"
    INCONCLUSIVE_EXHAUSTED = 3, "Inconclusive, retries exhausted"
    # Decided once; a second reviewer (anyone but the first) decides again.
    NEEDS_SECOND_REVIEW = 4, "Needs second review"

    @classmethod
    def for_verdict(cls, verdict: str, retries_exhausted: bool) -> int | None:
        """The band a fresh verdict queues in; None when no human is needed.

        Identical reproductions need no review, and an inconclusive one waits
        for its retry until the retries are used up.
        """
        if verdict == Verdict.EQUIVALENT:
            return cls.PASSED_DIFF_DIVERGED
        if verdict == Verdict.DIVERGENT:
            return cls.DIVERGENT
        if verdict == Verdict.INCONCLUSIVE and retries_exhausted:
            return cls.INCONCLUSIVE_EXHAUSTED
        return None


class Trigger(models.TextChoices):
    SCHEDULER = "scheduler", "Nightly scheduler"
    COMMAND = "command", "Command line"
    RERUN = "rerun", "Reviewer rerun"
    RETRY = "retry", "Automatic retry"
    NOW = "now", "Replay now"
    TAPE = "tape", "Replay from tape"


def lease_deadline(now=None):
    """When a worker's lease taken or renewed at ``now`` runs out."""
    return (now or timezone.now()) + timedelta(seconds=settings.REPLAYHUB_LEASE_SECONDS)


_CLAIM_STATEMENTS: dict[str, tuple[str, list[models.Field]]] = {}

# How far ahead of the claiming host's clock a replay's ``enqueued_at`` may be
# and the replay still be claimed (see ``ReplayQuerySet.claim``).
CLAIM_SLACK = timedelta(seconds=5)


def _claim_statement(db: BaseDatabaseWrapper) -> tuple[str, list[models.Field]]:
    """``UPDATE … SET <claim fields> WHERE id = %s AND status = %s AND
    (enqueued_at IS NULL OR enqueued_at <= %s)`` for a backend, and the fields
    its SET parameters belong to, in order. Names come from the model; every
    value is a parameter."""
    if db.vendor in _CLAIM_STATEMENTS:
        return _CLAIM_STATEMENTS[db.vendor]
    meta = Replay._meta
    quote = db.ops.quote_name
    by_name = {f.name: f for f in meta.concrete_fields}
    fields = [
        by_name[name]
        for name in ("status", "phase", "lease_owner", "lease_expires_at", "started_at")
    ]
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    sent = quote(by_name["enqueued_at"].column)
    statement = (
        f"UPDATE {quote(meta.db_table)} SET {assignments} "  # noqa: S608
        f"WHERE {quote(by_name['id'].column)} = %s "
        f"AND {quote(by_name['status'].column)} = %s "
        f"AND ({sent} IS NULL OR {sent} <= %s)"
    )
    _CLAIM_STATEMENTS[db.vendor] = (statement, fields)
    return statement, fields


class ReplayQuerySet(models.QuerySet):
    """Reads, and every change of a replay's state.

    A replay moves queued → running → finished (or cancelled), and a finished
    one may sit in the review queue until a human decides. Each transition is
    one conditional UPDATE that names the state it starts from and returns
    whether it happened, so two workers, a worker and the reaper, or two
    reviewers can race on a row and exactly one wins.
    """

    def finished(self):
        return self.filter(status=ReplayStatus.FINISHED)

    def awaiting_review(self):
        return self.filter(review_band__isnull=False)

    def in_queue_order(self):
        return self.order_by("review_band", "-finished_at", "-id")

    def lease_expired(self, now=None):
        now = now or timezone.now()
        return self.filter(status=ReplayStatus.RUNNING, lease_expires_at__lt=now)

    def queue_for_runs(self, run_ids: list[int], **values) -> None:
        """Queue one replay per run, every row with the same ``values``.

        One ``INSERT … SELECT`` per 5,000 runs, numbering attempts in the
        database: a night admits thousands of runs, and ``bulk_create`` spends
        most of a second per 10,000 instances in Python alone. The column list
        is made from the model, so a new field takes its default here as it
        would through the ORM.
        """
        table = self.model._meta.db_table
        runs = Run._meta.db_table
        columns, sql_values, params = [], [], []
        for f in self.model._meta.concrete_fields:
            if f.primary_key:
                continue
            columns.append(connection.ops.quote_name(f.column))
            if f.name == "run":
                sql_values.append("r.id")
            elif f.name == "project":
                sql_values.append("r.project_id")
            elif f.name == "attempt":
                count = f"SELECT COUNT(*) FROM {table} p WHERE p.run_id = r.id"  # noqa: S608
                sql_values.append(f"({count}) + 1")
            else:
                value = values.pop(f.attname, values.pop(f.name, f.get_default()))
                if isinstance(value, models.Model):
                    value = value.pk
                sql_values.append("%s")
                params.append(f.get_db_prep_save(value, connection))
        if values:
            raise TypeError(f"Replay has no fields {sorted(values)}")
        # Table and column names come from the model; every value is a parameter.
        prefix = (
            f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608
            f"SELECT {', '.join(sql_values)} FROM {runs} r WHERE r.id IN "
        )
        with connection.cursor() as cursor:
            # Chunks keep the parameter count under every backend's limit.
            for start in range(0, len(run_ids), 5000):
                chunk = run_ids[start : start + 5000]
                placeholders = "(" + ", ".join(["%s"] * len(chunk)) + ")"
                cursor.execute(prefix + placeholders, [*params, *chunk])

    def _leased(self, pk: int, owner: str):
        return self.filter(pk=pk, status=ReplayStatus.RUNNING, lease_owner=owner)

    def requeue(self, pk: int, *, sent_before, now) -> bool:
        """Queued, and its message handed to the broker before ``sent_before``:
        mark it sent again at ``now`` (at most once per period)."""
        return bool(
            self.filter(
                pk=pk, status=ReplayStatus.QUEUED, enqueued_at__lt=sent_before
            ).update(enqueued_at=now)
        )

    def release(self, pk: int, *, owner: str, due_at, evidence: dict) -> bool:
        """Running and leased to ``owner`` → queued again, with no verdict,
        its night and reservation kept, to be claimed once its message falls
        due at ``due_at`` (``enqueued_at``: the orphan sweep counts from
        then). ``evidence`` holds what its earlier tries left."""
        return bool(
            self._leased(pk, owner).update(
                status=ReplayStatus.QUEUED,
                phase=Phase.QUEUED,
                lease_owner="",
                lease_expires_at=None,
                started_at=None,
                enqueued_at=due_at,
                evidence=evidence,
            )
        )

    def claim(self, pk: int, *, owner: str, now=None) -> bool:
        """Queued → running, leased to ``owner``.

        Every task message claims (twice when the broker delivers it twice), so
        this is the one transition on a worker's hot path. It is the same
        conditional UPDATE as the others, with its statement made once per
        database backend: building it through the ORM on each call cost three
        times the Python time of executing it, and with many workers on few
        cores that is what bounded the claims per second
        (``benchmarks/claims.py``).

        A replay sent back to wait (``release``) is claimed only once it is
        due: a duplicate message that comes earlier (a night's dispatch sent
        again, the sweep) claims nothing, and the message sent with the
        back-off's countdown is still on its way. ``CLAIM_SLACK`` allows for
        clocks a little apart between the host that sent and the one that
        claims.
        """
        now = now or timezone.now()
        db = connections[self.db]
        statement, fields = _claim_statement(db)
        values = {
            "status": ReplayStatus.RUNNING,
            "phase": Phase.PROVISIONING,
            "lease_owner": owner,
            "lease_expires_at": lease_deadline(now),
            "started_at": now,
        }
        params = [f.get_db_prep_save(values[f.name], db) for f in fields]
        enqueued = self.model._meta.get_field("enqueued_at")
        # As QuerySet.update: an error here leaves the caller's transaction
        # marked for rollback.
        with transaction.mark_for_rollback_on_error(self.db), db.cursor() as cursor:
            due = enqueued.get_db_prep_save(now + CLAIM_SLACK, db)
            cursor.execute(statement, [*params, pk, ReplayStatus.QUEUED.value, due])
            return cursor.rowcount == 1

    def heartbeat(self, pk: int, *, owner: str, phase: str | None = None) -> bool:
        """Renew ``owner``'s lease (and record the phase); False once it is lost."""
        fields: dict = {"lease_expires_at": lease_deadline()}
        if phase:
            fields["phase"] = phase
        return bool(self._leased(pk, owner).update(**fields))

    def finish(self, pk: int, *, owner: str, expired_before=None, **result) -> bool:
        """Running and leased to ``owner`` → finished with ``result`` (the verdict,
        its evidence, usage, review band).

        The lease reaper passes ``expired_before``: a heartbeat that renewed the
        lease in the meantime wins over it.
        """
        rows = self._leased(pk, owner)
        if expired_before is not None:
            rows = rows.filter(lease_expires_at__lt=expired_before)
        return bool(
            rows.update(
                status=ReplayStatus.FINISHED,
                phase=Phase.DONE,
                lease_owner="",
                lease_expires_at=None,
                finished_at=timezone.now(),
                **result,
            )
        )

    def cancel(self, pk: int, *, owner: str) -> bool:
        """Running and leased to ``owner`` → cancelled, with no verdict."""
        return bool(
            self._leased(pk, owner).update(
                status=ReplayStatus.CANCELLED,
                phase=Phase.DONE,
                lease_owner="",
                lease_expires_at=None,
                finished_at=timezone.now(),
            )
        )

    def settle(self, pk: int, *, night_id: int) -> bool:
        """Mark the replay's cost as settled on ``night_id``; once per replay."""
        return bool(
            self.filter(pk=pk, settled=False).update(settled=True, night_id=night_id)
        )

    def enter_review_band(self, pk: int, band: int) -> bool:
        """Put a finished replay (back) in the review queue, in ``band``."""
        return bool(
            self.filter(pk=pk, status=ReplayStatus.FINISHED).update(review_band=band)
        )

    def leave_review_queue(self, pk: int) -> bool:
        """Take a replay out of the review queue (``review_band`` is the flag)."""
        return bool(
            self.filter(pk=pk, review_band__isnull=False).update(review_band=None)
        )

    def band_sometimes_divergent(self, run_id: int) -> int:
        """Move the run's divergent replays waiting in the divergent band to
        the band of runs that sometimes diverge, when the run has replicates
        and one of its live replays reproduced it; how many moved."""
        live = self.filter(
            run_id=run_id, status=ReplayStatus.FINISHED, tier=Tier.AGENTIC
        )
        if not (
            self.filter(run_id=run_id, replicate=True).exists()
            and live.filter(
                verdict__in=[Verdict.IDENTICAL, Verdict.EQUIVALENT]
            ).exists()
        ):
            return 0
        return live.filter(
            verdict=Verdict.DIVERGENT, review_band=ReviewBand.DIVERGENT
        ).update(review_band=ReviewBand.SOMETIMES_DIVERGES)

    def return_to_review_queue(self, pk: int, *, band: int) -> bool:
        """Put a finished replay back in the review queue (a decision taken back)."""
        return bool(
            self.filter(
                pk=pk, status=ReplayStatus.FINISHED, review_band__isnull=True
            ).update(review_band=band)
        )


class Replay(models.Model):
    """One reproduction attempt of a Run."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="replays")
    # Copied from the run so the queue can filter without a join.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="replays"
    )
    tier = models.CharField(max_length=16, choices=Tier, default=Tier.AGENTIC)
    status = models.CharField(
        max_length=16, choices=ReplayStatus, default=ReplayStatus.QUEUED
    )
    phase = models.CharField(max_length=16, choices=Phase, default=Phase.QUEUED)
    attempt = models.PositiveSmallIntegerField(default=1)
    trigger = models.CharField(max_length=16, choices=Trigger, default=Trigger.COMMAND)
    # One more sample of the run's reproducibility, admitted on the night's
    # replicate share (``nights.replicate_tier``); its tier says how it ran.
    replicate = models.BooleanField(default=False)
    # The seed a rollout replay starts from; null for a code run's replay.
    seed = models.ForeignKey(
        "Seed",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="replays",
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    verdict = models.CharField(max_length=16, choices=VERDICT_CHOICES, blank=True)
    reason_code = models.CharField(max_length=32, blank=True)
    reason = models.TextField(blank=True)
    # Holds what an agent or a harness wrote (a rollout's completion): one
    # stored before reads were bounded reads as refused if too deep.
    evidence = models.JSONField(default=dict, blank=True, decoder=StoredDecoder)
    provenance = models.JSONField(default=dict, blank=True)
    agent_exit_code = models.IntegerField(null=True, blank=True)
    agent_output = models.TextField(blank=True)
    agent_output_truncated = models.BooleanField(default=False)
    usage = models.JSONField(default=dict, blank=True)
    tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    sandbox_seconds = models.FloatField(default=0)
    # Worker lease: a replay is running only while its lease is fresh.
    lease_owner = models.CharField(max_length=255, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    review_band = models.PositiveSmallIntegerField(
        choices=ReviewBand, null=True, blank=True
    )
    # Budget: the night that admitted this replay, what it reserved there, the
    # caps it was started with, and whether its actual cost was settled.
    night = models.ForeignKey(
        "Night",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replays",
    )
    reservation = models.JSONField(default=dict, blank=True)
    caps = models.JSONField(default=dict, blank=True)
    settled = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    # When a message for it was last handed to the broker; a queued replay
    # whose message is long gone (a broker restart) is sent again.
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ReplayQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            choices_check("tier", Tier, "replay_tier_valid"),
            choices_check("status", ReplayStatus, "replay_status_valid"),
            choices_check("phase", Phase, "replay_phase_valid"),
            choices_check("trigger", Trigger, "replay_trigger_valid"),
            choices_check(
                "verdict", VERDICT_CHOICES, "replay_verdict_valid", blank=True
            ),
            models.CheckConstraint(
                condition=Q(review_band__isnull=True)
                | Q(review_band__in=ReviewBand.values),
                name="replay_review_band_valid",
            ),
            # A finished replay always carries a verdict and a reason; a verdict
            # never appears on an unfinished one.
            models.CheckConstraint(
                condition=(
                    Q(status="finished") & ~Q(verdict="") & ~Q(reason="")
                    | ~Q(status="finished") & Q(verdict="")
                ),
                name="replay_verdict_iff_finished",
            ),
            models.CheckConstraint(
                condition=Q(attempt__gte=1), name="replay_attempt_positive"
            ),
        ]
        indexes = [
            # The review queue: band order, newest first, only queued rows.
            models.Index(
                "review_band",
                models.F("finished_at").desc(),
                models.F("id").desc(),
                name="replay_review_queue",
                condition=Q(review_band__isnull=False),
            ),
            # The lease reaper: running replays whose lease expired.
            models.Index(
                fields=["lease_expires_at"],
                name="replay_running_lease",
                condition=Q(status="running"),
            ),
            # Earlier replays of a run on the detail page; attempt numbering.
            models.Index(fields=["run", "-created_at"], name="replay_run_recent"),
            # Filtering a project's replays by verdict (queue filters, trends).
            models.Index(fields=["project", "verdict"], name="replay_project_verdict"),
            # The queue's verdict filter, newest first, across projects.
            models.Index(
                "verdict",
                models.F("finished_at").desc(),
                models.F("id").desc(),
                name="replay_verdict_recent",
            ),
            # The running list and "is a replay of this run in flight?".
            models.Index(
                fields=["run", "status"],
                name="replay_active",
                condition=Q(status__in=["queued", "running"]),
            ),
            # Rollups: a project's replays finished in a time range.
            models.Index(
                fields=["project", "finished_at"], name="replay_project_finished"
            ),
        ]

    def __str__(self) -> str:
        return f"replay {self.pk} of {self.run}"


class Comparison(models.Model):
    """The git-level answer. Large texts are capped; list views defer them."""

    replay = models.OneToOneField(
        Replay, on_delete=models.CASCADE, related_name="comparison"
    )
    identical = models.BooleanField()
    original_tree = models.CharField(max_length=64)
    replay_tree = models.CharField(max_length=64)
    diff_of_diffs = models.TextField(blank=True)
    diffstat = models.TextField(blank=True)
    files_changed = models.PositiveIntegerField(default=0)
    insertions = models.PositiveIntegerField(default=0)
    deletions = models.PositiveIntegerField(default=0)
    differing_paths = models.JSONField(default=list, blank=True)
    original_patch = models.TextField(blank=True)
    replay_patch = models.TextField(blank=True)
    replay_paths = models.JSONField(default=list, blank=True)
    disallowed_paths = models.JSONField(default=list, blank=True)
    truncated = models.BooleanField(default=False)
    # Path -> hunk class (replayhub.git.hunks) of each path in ``differing_paths``.
    hunk_classes = models.JSONField(default=dict, blank=True)
    # How many of them are substantive, stored so the queue needs no JSON per
    # row; null for comparisons made before the classes existed.
    substantive_files = models.PositiveIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return f"comparison for replay {self.replay_id}"


class TreeKind(models.TextChoices):
    ORIGINAL = "original", "Original"
    REPLAY = "replay", "Replay"
    # The replay's tree with every test path taken from the original.
    REFERENCE = "reference", "Reference"
    BASE = "base", "Base"


class TestOutcome(models.Model):
    """One run of the project's test command on one tree."""

    replay = models.ForeignKey(
        Replay, on_delete=models.CASCADE, related_name="test_outcomes"
    )
    tree = models.CharField(max_length=16, choices=TreeKind)
    attempt = models.PositiveSmallIntegerField(default=1)
    ran = models.BooleanField()
    passed = models.BooleanField(null=True)
    exit_code = models.IntegerField(null=True, blank=True)
    tests_executed = models.PositiveIntegerField(null=True, blank=True)
    tests_failed = models.PositiveIntegerField(null=True, blank=True)
    timed_out = models.BooleanField(default=False)
    output_tail = models.TextField(blank=True)
    output_truncated = models.BooleanField(default=False)
    duration_s = models.FloatField(default=0)
    # Per test: [id, outcome, duration or null, failure excerpt]; null when the
    # run reported no test ids.
    cases = models.JSONField(null=True, blank=True)
    # Taken from an earlier run of the same tree under the same configuration.
    cached = models.BooleanField(default=False)

    class Meta:
        ordering = ["tree", "attempt"]
        constraints = [
            choices_check("tree", TreeKind, "testoutcome_tree_valid"),
            models.UniqueConstraint(
                fields=["replay", "tree", "attempt"], name="testoutcome_unique_attempt"
            ),
            models.CheckConstraint(
                condition=Q(ran=True) | Q(passed__isnull=True),
                name="testoutcome_no_result_without_run",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tree} #{self.attempt} of replay {self.replay_id}"


class WorkerCheck(models.Model):
    """A round trip through the broker: the web process asks, a worker answers."""

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    requested_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=255, blank=True)
    # How that worker's default sandbox enforces memory and process caps
    # ("cgroup-v2", "rlimit", …), or why it has none.
    sandbox = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-requested_at"]

    def __str__(self) -> str:
        return f"worker check {self.pk}"

    @property
    def latency_seconds(self) -> float | None:
        if self.answered_at is None:
            return None
        return (self.answered_at - self.requested_at).total_seconds()
