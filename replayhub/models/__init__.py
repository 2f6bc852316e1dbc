"""The domain's models: projects, recorded runs, their replays and what the
replays found, the nights that budget them, how runs come in, and the seeds
of rollouts. A module per group of tables, all reached as
``replayhub.models``; the people's tables are ``reviews.models``.

- projects: ``Project`` (its repository, a path or a URL; commands as argv
  lists; allowed, test and ignored path globs; the runner; per-replay caps;
  flake reruns; the evidence floor; the agentic opt-in; setup and rollout
  settings) and ``Run`` (the recorded original: ``raw`` keeps the record
  less its prompt and output, which their own columns keep verbatim, and
  ``Run.record`` puts it back together exactly).
- replays: ``Replay`` (tier, status, phase, attempt, trigger, verdict with
  reason code and reason, evidence, the provenance snapshot, the worker's
  lease, usage, caps, timings, the review band) and ``ReplayQuerySet``,
  which owns every state change, one conditional UPDATE per transition
  (claim, heartbeat, finish, cancel, requeue, the review band's moves);
  ``Comparison``, ``TestOutcome``, ``WorkerCheck``.
- nights: ``Budget`` (a project's nightly window, its limits per tier and
  its tier policy), ``Night`` (one window: per tier, its limits, what is
  reserved, what is used and what was deferred), ``Rollup`` and
  ``RollupTotal`` (the trends' counts per night), ``RollupRequest`` (a
  night owed a recount).
- evidence: ``TestRecord`` (tests that flip) and ``CachedResult`` (the
  original tree's result, reused); see ``replayhub.testgate``.
- gateway: ``Provider``, ``ModelCall``, ``EgressAttempt``, ``Tape``; see
  ``replayhub.gateway``.
- patches: ``RunPatch`` (an imported run's original when it came as a
  patch: applied at the base by each replay, never written to the
  project's repository).
- heartbeats: ``Heartbeat`` (when the beat's periodic job last ran).
- ingest: ``ImportJob`` (an upload a worker imports) and ``IngestToken``.
- rollouts: ``Seed``, ``FollowSource``, ``FollowedFile``.
- texttier: ``TextReplay`` and ``TextSuite``; see ``replayhub.texttier``.
- outbound: ``Forge`` (where a project's commits get statuses), ``Webhook``
  and ``Delivery`` (one message out, unique by its key, and its answer); see
  ``replayhub.outbound``.
- project_settings: no table, but the one table of a project's replay
  settings (``SETTINGS``: each ``Project`` field's option, group, label and
  bounds), which the commands, the project form and the budgets page are
  made from; ``replayhub.project_setup`` checks their values.

Invariants the database keeps: every status, verdict, tier and phase field
is a ``TextChoices`` with a named ``CheckConstraint``; a finished replay
always has a verdict and a non-empty reason, and an unfinished one never has
a verdict; a test outcome cannot pass without having run; a night never
reserves more than its limits, in any tier; a rollup's attempts equal its
four verdict counts; a run's external id is unique in its project. Each
index names, in a comment, the query it serves.

``Replay.review_band`` (0 divergent where the run's other replays
reproduced it, 1 equivalent, 2 divergent, 3 inconclusive with its retries
exhausted, 4 needs a second review; empty when not queued) is
written when the verdict is reached (``ReviewBand.for_verdict``) and cleared
by a decision. It is stored rather than computed so that the queue is one
scan of a partial index (``replay_review_queue``).

The wide text columns of runs, replays, comparisons and test outcomes use
lz4 compression on PostgreSQL when the server has it (migration 0007);
``replayhub.ingest`` has what that measured.
"""

from __future__ import annotations

from replayhub.models.evidence import CachedResult, TestRecord
from replayhub.models.gateway import (
    EgressAttempt,
    ModelCall,
    Provider,
    ProviderKind,
    Tape,
)
from replayhub.models.heartbeats import Heartbeat
from replayhub.models.ingest import (
    ImportFormat,
    ImportJob,
    ImportStatus,
    IngestToken,
    IngestTokenQuerySet,
)
from replayhub.models.nights import (
    Budget,
    BudgetShare,
    Night,
    NightShare,
    NightStatus,
    Rollup,
    RollupRequest,
    RollupTotal,
)
from replayhub.models.outbound import (
    Delivery,
    DeliveryQuerySet,
    DeliveryStatus,
    DeliveryTarget,
    Forge,
    ForgeKind,
    Webhook,
    WebhookFormat,
)
from replayhub.models.patches import RunPatch
from replayhub.models.projects import (
    MinIsolation,
    Preflight,
    Project,
    RolloutAnchor,
    RolloutMode,
    Run,
    RunnerKind,
    RunSource,
)
from replayhub.models.replays import (
    VERDICT_CHOICES,
    Comparison,
    Phase,
    Replay,
    ReplayQuerySet,
    ReplayStatus,
    ReviewBand,
    TestOutcome,
    Tier,
    TreeKind,
    Trigger,
    WorkerCheck,
    lease_deadline,
)
from replayhub.models.rollouts import (
    FollowedFile,
    FollowSource,
    Seed,
    SeedAnchor,
    SeedKind,
)
from replayhub.models.texttier import TextReplay, TextStatus, TextSuite, TextTrigger

__all__ = [
    "VERDICT_CHOICES",
    "Budget",
    "BudgetShare",
    "CachedResult",
    "Comparison",
    "Delivery",
    "DeliveryQuerySet",
    "DeliveryStatus",
    "DeliveryTarget",
    "EgressAttempt",
    "FollowSource",
    "FollowedFile",
    "Forge",
    "ForgeKind",
    "Heartbeat",
    "ImportFormat",
    "ImportJob",
    "ImportStatus",
    "IngestToken",
    "IngestTokenQuerySet",
    "MinIsolation",
    "ModelCall",
    "Night",
    "NightShare",
    "NightStatus",
    "Phase",
    "Preflight",
    "Project",
    "Provider",
    "ProviderKind",
    "Replay",
    "ReplayQuerySet",
    "ReplayStatus",
    "ReviewBand",
    "RolloutAnchor",
    "RolloutMode",
    "Rollup",
    "RollupRequest",
    "RollupTotal",
    "Run",
    "RunPatch",
    "RunSource",
    "RunnerKind",
    "Seed",
    "SeedAnchor",
    "SeedKind",
    "Tape",
    "TestOutcome",
    "TestRecord",
    "TextReplay",
    "TextStatus",
    "TextSuite",
    "TextTrigger",
    "Tier",
    "TreeKind",
    "Trigger",
    "Webhook",
    "WebhookFormat",
    "WorkerCheck",
    "lease_deadline",
]
