"""A replay's in-toto Statement v1, built from its stored values. Pure.

The stored values are JSON that an agent's run partly reported, so every
field is read with its expected type and a bound; a missing or odd value
reads as null, never as an error. The predicate holds only what the verdict
rests on and is stored; money is left out (the replay API shows it only to
those allowed to see money).

:func:`canonical` is the one serialisation: sorted keys, no spaces, ASCII
only, no NaN. The same stored replay therefore always gives the same bytes,
and with Ed25519 (deterministic) the same signature.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://replayhub.dev/attestation/replay/v1"

# Stored text is cut to this many characters (a reason, a check's detail).
TEXT_LIMIT = 2000
# At most this many entries of a stored list or mapping (checks, usage keys).
ITEMS_LIMIT = 100

_GIT_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class StoredReplay:
    """A finished replay's stored values, as plain data.

    ``replay`` holds its columns (id, run, project, external_id, attempt,
    tier, trigger, verdict, reason_code, reason, finished_at as ISO text,
    tokens, sandbox_seconds); ``evidence``, ``provenance`` and ``usage`` are
    its JSON columns as stored; ``image_digest`` the ``sha256:`` digest the
    provenance's image is pinned to ("" for a floating tag); ``tests`` its
    test outcomes' columns; ``comparison`` the comparison's columns, if there
    is one; ``tape`` the tape's counts and exchange digests, if one was kept.
    """

    replay: Mapping[str, Any]
    original_commit: str = ""
    record_sha256: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)
    usage: Mapping[str, Any] = field(default_factory=dict)
    image_digest: str = ""
    tests: Sequence[Mapping[str, Any]] = ()
    comparison: Mapping[str, Any] | None = None
    tape: Mapping[str, Any] | None = None


def canonical(value: Any) -> bytes:
    """``value`` as compact JSON with sorted keys, ASCII only."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def statement(stored: StoredReplay, *, version: str) -> dict[str, Any]:
    """The in-toto Statement v1 of ``stored``, attested by ReplayHub
    ``version``.

    Its subjects are the original commit (``gitCommit``) and the replay's
    result tree (``gitTree``), each when stored as a full sha; a replay with
    neither (a rollout's) names its run's record by its sha256 instead, since
    a statement needs a subject.
    """
    subjects = []
    if _GIT_SHA.fullmatch(stored.original_commit):
        subjects.append(
            {"name": "original-commit", "digest": {"gitCommit": stored.original_commit}}
        )
    replay_tree = _text((stored.comparison or {}).get("replay_tree"))
    if replay_tree and _GIT_SHA.fullmatch(replay_tree):
        subjects.append({"name": "replay-tree", "digest": {"gitTree": replay_tree}})
    if not subjects and _SHA256.fullmatch(stored.record_sha256):
        subjects.append(
            {"name": "run-record", "digest": {"sha256": stored.record_sha256}}
        )
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate(stored, version=version),
    }


def predicate(stored: StoredReplay, *, version: str) -> dict[str, Any]:
    """What the verdict rests on, each part named for where it is stored."""
    replay, evidence, provenance = stored.replay, stored.evidence, stored.provenance
    agent = _mapping(evidence.get("agent"))
    environment = _mapping(evidence.get("environment"))
    base = _mapping(provenance.get("base"))
    return {
        "replay": {
            "id": _int(replay.get("id")),
            "run": _int(replay.get("run")),
            "project": _text(replay.get("project")),
            "external_id": _text(replay.get("external_id")),
            "attempt": _int(replay.get("attempt")),
            "tier": _text(replay.get("tier")),
            "trigger": _text(replay.get("trigger")),
            "finished_at": _text(replay.get("finished_at")),
        },
        "verdict": _text(replay.get("verdict")),
        "reason_code": _text(replay.get("reason_code")),
        "reason": _text(replay.get("reason")),
        "checks": [
            {
                key: _text(check.get(key))
                for key in ("name", "outcome", "evidence_class", "detail")
            }
            for check in _mappings(evidence.get("checks"))
        ],
        "original_commit": _text(stored.original_commit),
        "base": {
            "sha": _text(base.get("sha")),
            "source": _text(base.get("source")),
            "trusted": _bool(base.get("trusted")),
            "confirmed": _bool(base.get("confirmed")),
            "recorded": _text(provenance.get("recorded_base")),
        },
        "sandbox": {
            "runner": _text(agent.get("runner")),
            "isolation": _text(agent.get("isolation")),
            "limit_backend": _text(agent.get("limit_backend")),
            "image": _text(provenance.get("image")),
            "image_digest": stored.image_digest or None,
            "image_pinned": _bool(provenance.get("image_pinned")),
            # The sandbox config the run recorded, and the project's the replay
            # ran under: they differ when the config drifted.
            "recorded_config_sha256": _text(provenance.get("sandbox_config_sha256")),
            "project_config_sha256": _text(provenance.get("project_config_sha256")),
        },
        "environment": {
            "key": _text(environment.get("key")),
            "cached": _bool(environment.get("cached")),
        }
        if environment
        else None,
        "tape": _tape(replay, evidence, stored.tape),
        "comparison": _comparison(stored.comparison),
        "tests": [_outcome(outcome) for outcome in stored.tests[:ITEMS_LIMIT]],
        "test_changes": _text(_mapping(evidence.get("test_changes")).get("summary")),
        "usage": _usage(stored.usage, replay),
        "replayhub": {"version": version},
    }


def tape_digest(digests: Sequence[Any]) -> str:
    """One sha256 for a tape: of its exchanges' sha256s, one a line, in order."""
    lines = "".join(f"{_text(d) or ''}\n" for d in digests)
    return hashlib.sha256(lines.encode("utf-8", "replace")).hexdigest()


def _tape(
    replay: Mapping[str, Any],
    evidence: Mapping[str, Any],
    tape: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """The tape the replay played (tape tier) and the one it kept."""
    played = _mapping(evidence.get("tape"))
    if not played and tape is None:
        return None
    divergence = _mapping(played.get("divergence"))
    return {
        "tier": _text(replay.get("tier")),
        "source": _text(played.get("source")),
        "played": _int(played.get("played")),
        "served": _int(played.get("served")),
        "then_live": _bool(played.get("then_live")),
        "diverged_at_call": _int(divergence.get("call")) if divergence else None,
        "kept": None
        if tape is None
        else {
            "exchanges": _int(tape.get("exchanges")),
            "truncated": _bool(tape.get("truncated")),
            "exchange_digests_sha256": tape_digest(
                list(tape.get("digests") or [])[:100_000]
            ),
        },
    }


def _comparison(comparison: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if comparison is None:
        return None
    return {
        "identical": _bool(comparison.get("identical")),
        "original_tree": _text(comparison.get("original_tree")),
        "replay_tree": _text(comparison.get("replay_tree")),
        "files_changed": _int(comparison.get("files_changed")),
        "insertions": _int(comparison.get("insertions")),
        "deletions": _int(comparison.get("deletions")),
        "substantive_files": _int(comparison.get("substantive_files")),
    }


def _outcome(outcome: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "tree": _text(outcome.get("tree")),
        "attempt": _int(outcome.get("attempt")),
        "ran": _bool(outcome.get("ran")),
        "passed": _bool(outcome.get("passed")),
        "exit_code": _int(outcome.get("exit_code")),
        "tests_executed": _int(outcome.get("tests_executed")),
        "tests_failed": _int(outcome.get("tests_failed")),
        "timed_out": _bool(outcome.get("timed_out")),
        "cached": _bool(outcome.get("cached")),
    }


def _usage(usage: Mapping[str, Any], replay: Mapping[str, Any]) -> dict[str, Any]:
    """The gateway's measured usage, its counts only, and the sandbox time."""
    counts = {
        key: number
        for key, value in sorted(usage.items())[:ITEMS_LIMIT]
        if "cost" not in key and (number := _number(value)) is not None
    }
    return {
        "measured": counts,
        "tokens": _int(replay.get("tokens")),
        "sandbox_seconds": _number(replay.get("sandbox_seconds")),
    }


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    items = value if isinstance(value, list) else []
    return [item for item in items[:ITEMS_LIMIT] if isinstance(item, Mapping)]


def _text(value: Any) -> str | None:
    return value[:TEXT_LIMIT] if isinstance(value, str) and value else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    # JSON's true and false are ints to Python, and no count.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> int | float | None:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return _int(value)
