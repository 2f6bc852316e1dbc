"""The domain's models: projects, recorded runs, their replays and what the replays
found, the nights that budget them, and how runs come in."""

from __future__ import annotations

from .evidence import CachedResult, TestRecord
from .gateway import EgressAttempt, ModelCall, Provider, ProviderKind
from .ingest import ImportJob, ImportStatus, IngestToken, IngestTokenQuerySet
from .nights import Budget, Night, NightStatus, Rollup
from .projects import Preflight, Project, Run, Runner
from .replays import (
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
    Verdict,
    WorkerCheck,
    lease_deadline,
)

__all__ = [
    "Budget",
    "CachedResult",
    "Comparison",
    "EgressAttempt",
    "ImportJob",
    "ImportStatus",
    "IngestToken",
    "IngestTokenQuerySet",
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
    "Rollup",
    "Run",
    "Runner",
    "TestOutcome",
    "TestRecord",
    "Tier",
    "TreeKind",
    "Trigger",
    "Verdict",
    "WorkerCheck",
    "lease_deadline",
]
