"""The domain's models: projects, recorded runs, their replays and what the replays
found, the nights that budget them, how runs come in, and the seeds of rollouts."""

from __future__ import annotations

from replayhub.models.evidence import CachedResult, TestRecord
from replayhub.models.gateway import (
    EgressAttempt,
    ModelCall,
    Provider,
    ProviderKind,
    Tape,
)
from replayhub.models.ingest import (
    ImportFormat,
    ImportJob,
    ImportStatus,
    IngestToken,
    IngestTokenQuerySet,
)
from replayhub.models.nights import (
    Budget,
    Night,
    NightStatus,
    Rollup,
    RollupRequest,
    RollupTotal,
)
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
    "CachedResult",
    "Comparison",
    "EgressAttempt",
    "FollowSource",
    "FollowedFile",
    "ImportFormat",
    "ImportJob",
    "ImportStatus",
    "IngestToken",
    "IngestTokenQuerySet",
    "MinIsolation",
    "ModelCall",
    "Night",
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
    "WorkerCheck",
    "lease_deadline",
]
