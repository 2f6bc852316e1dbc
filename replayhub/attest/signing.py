"""A finished replay's attestation: its rows read into the statement, signed.

The statement is made from what is stored when it is asked for, so the same
replay gives the same envelope each time (the rows of a finished replay do
not change); a reviewer's later decision is not part of it: the attestation
is the automated ruling and what it rests on.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from replayhub.attest import dsse, statement
from replayhub.environments.images import image_digest
from replayhub.models import Comparison, Replay, ReplayStatus, Tape, TestOutcome

_OUTCOME_FIELDS = (
    "tree",
    "attempt",
    "ran",
    "passed",
    "exit_code",
    "tests_executed",
    "tests_failed",
    "timed_out",
    "cached",
)
_COMPARISON_FIELDS = (
    "identical",
    "original_tree",
    "replay_tree",
    "files_changed",
    "insertions",
    "deletions",
    "substantive_files",
)


def version() -> str:
    """The installed ReplayHub's version, as the statement names it."""
    try:
        return metadata.version("replayhub")
    except metadata.PackageNotFoundError:
        return "unknown"


def stored_replay(replay: Replay) -> statement.StoredReplay:
    """``replay``'s stored values as plain data (``replay.run`` and
    ``replay.project`` are read; select them with it)."""
    comparison = (
        Comparison.objects.filter(replay=replay).values(*_COMPARISON_FIELDS).first()
    )
    tape = (
        Tape.objects.filter(replay=replay)
        .values("exchanges", "truncated", "digests")
        .first()
    )
    provenance = _mapping(replay.provenance)
    image = provenance.get("image")
    tests = list(
        TestOutcome.objects.filter(replay=replay)
        .order_by("tree", "attempt")
        .values(*_OUTCOME_FIELDS)
    )
    return statement.StoredReplay(
        replay={
            "id": replay.pk,
            "run": replay.run_id,
            "project": replay.project.slug,
            "external_id": replay.run.external_id,
            "attempt": replay.attempt,
            "tier": replay.tier,
            "trigger": replay.trigger,
            "verdict": replay.verdict,
            "reason_code": replay.reason_code,
            "reason": replay.reason,
            "finished_at": replay.finished_at.isoformat()
            if replay.finished_at
            else None,
            "tokens": replay.tokens,
            # A float column, though an unsaved row may hold the int default.
            "sandbox_seconds": float(replay.sandbox_seconds),
        },
        original_commit=replay.run.original_commit,
        record_sha256=replay.run.record_sha256,
        evidence=_mapping(replay.evidence),
        provenance=provenance,
        usage=_mapping(replay.usage),
        image_digest=image_digest(image if isinstance(image, str) else None),
        tests=tests,
        comparison=comparison,
        tape=tape,
    )


def replay_statement(replay: Replay) -> dict[str, Any]:
    """The in-toto Statement of a finished replay."""
    if replay.status != ReplayStatus.FINISHED:
        raise ValueError(f"replay {replay.pk} has not finished")
    return statement.statement(stored_replay(replay), version=version())


def replay_envelope(replay: Replay, key: Ed25519PrivateKey) -> dict[str, Any]:
    """The DSSE envelope of a finished replay's statement, signed by ``key``."""
    return dsse.sign(replay_statement(replay), key)


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
