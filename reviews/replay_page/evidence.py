"""A replay's evidence as the replay page reads it: typed, read once.

``Replay.evidence`` is stored JSON, and much of it was reported by the
sandboxed agent's run (its paths, its usage, its egress): any key may be
missing or hold another type than the one written. :func:`read_evidence`
reads it once into :class:`ReplayEvidence`, where each field has the type the
page expects and an empty value when the stored one is missing or of another
type, so an odd record shows less on the page, never a 500. The values inside
lists and mappings stay as stored; the templates render them escaped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ReplayEvidence:
    """The parts of a replay's evidence the replay page shows."""

    # The verdict's checks, each a mapping (name, outcome, evidence_class,
    # detail); entries that are not mappings are left out.
    checks: list[dict[str, Any]] = field(default_factory=list)
    # The agent's exit, duration, caps and isolation.
    agent: dict[str, Any] = field(default_factory=dict)
    # Paths the agent left that git cannot store (the first ones), and how
    # many there were.
    unstorable: list[Any] = field(default_factory=list)
    unstorable_count: int = 0
    nested_repositories: list[Any] = field(default_factory=list)
    # The agents' own files left out of both trees, by side.
    ignored_paths: dict[str, Any] = field(default_factory=dict)
    # The replay's environment: its key, whether it was cached, its inputs.
    environment: dict[str, Any] = field(default_factory=dict)
    warnings: list[Any] = field(default_factory=list)
    # Test files the original added, changed or deleted, and their summary.
    test_changes: dict[str, Any] = field(default_factory=dict)
    # Egress attempts counted by phase, host and outcome, and their total.
    egress_counts: list[Any] = field(default_factory=list)
    egress_total: int | None = None
    refused_calls: dict[str, Any] = field(default_factory=dict)
    # What the agent said it used (executor-supplied, never used for budgets).
    usage_reported: dict[str, Any] = field(default_factory=dict)
    # Signs the agent reached for the harness or the tests.
    interference: list[Any] = field(default_factory=list)
    # The tape a tape replay played: its source, the rules applied, the call
    # it went live from, and where it left the tape.
    tape: dict[str, Any] = field(default_factory=dict)
    # A rollout's replay: its rewards, threshold and completion.
    rollout: dict[str, Any] = field(default_factory=dict)

    @property
    def model_warning(self) -> str:
        """The failed model check's detail, or "" when the model check passed
        or was not made."""
        for check in self.checks:
            if check.get("name") == "model called" and check.get("outcome") == "fail":
                detail = check.get("detail", "")
                return detail if isinstance(detail, str) else ""
        return ""

    @property
    def tape_origin(self) -> str:
        """Where the tape played came from, as the conversation's heading says
        it; "" for a replay that played none."""
        source = self.tape.get("source")
        return f"played from {source}" if self.tape and source is not None else ""

    @property
    def tape_divergence(self) -> dict[str, Any] | None:
        """Where the agent left the tape (call, detail, diff), if it did."""
        found = self.tape.get("divergence")
        return found if isinstance(found, dict) and found else None


def read_evidence(raw: object) -> ReplayEvidence:
    """``Replay.evidence`` read as the page shows it; anything that is not a
    mapping reads as no evidence."""
    evidence = raw if isinstance(raw, dict) else {}
    return ReplayEvidence(
        checks=[c for c in _list(evidence, "checks") if isinstance(c, dict)],
        agent=_dict(evidence, "agent"),
        unstorable=_list(evidence, "unstorable_paths"),
        unstorable_count=_count(evidence, "unstorable_count") or 0,
        nested_repositories=_list(evidence, "nested_repositories"),
        ignored_paths=_dict(evidence, "ignored_paths"),
        environment=_dict(evidence, "environment"),
        warnings=_list(evidence, "warnings"),
        test_changes=_dict(evidence, "test_changes"),
        egress_counts=_list(evidence, "egress_counts"),
        egress_total=_count(evidence, "egress_total"),
        refused_calls=_dict(evidence, "refused_calls"),
        usage_reported=_dict(evidence, "usage_reported"),
        interference=_list(evidence, "interference"),
        tape=_dict(evidence, "tape"),
        rollout=_dict(evidence, "rollout"),
    )


def _list(evidence: dict, key: str) -> list[Any]:
    value = evidence.get(key)
    return value if isinstance(value, list) else []


def _dict(evidence: dict, key: str) -> dict[str, Any]:
    value = evidence.get(key)
    return value if isinstance(value, dict) else {}


def _count(evidence: dict, key: str) -> int | None:
    value = evidence.get(key)
    # JSON's true and false are ints to Python, and no count.
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
