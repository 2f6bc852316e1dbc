"""What the test gate remembers across replays: tests that flip, and the
original tree's result, which need not be computed again.

Reads happen while a replay executes; writes happen when it finishes, in the
transaction that stores its verdict.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable

from django.db import connection
from django.utils import timezone

from replayhub.models import CachedResult, Project, TestRecord
from replayhub.testgate.gate import Attempt, GateResult

# Test ids are kept to this many characters in the flake memory.
MAX_ID_CHARS = 500


def cache_key(project: Project, *, tree: str, image: str, environment: str = "") -> str:
    """The digest of everything an original tree's test result depends on."""
    config: dict[str, object] = {
        "tree": tree,
        "test_command": list(project.test_command),
        "image": image,
        "runner": project.runner,
        "sandbox_config_sha256": project.sandbox_config_sha256,
        "test_time_limit": project.test_time_limit,
        "memory_limit_mb": project.memory_limit_mb,
        "max_processes": project.max_processes,
        "max_output_bytes": project.max_output_bytes,
    }
    if environment:
        config["environment"] = environment
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def cached_original(project: Project, key: str) -> Attempt | None:
    row = CachedResult.objects.filter(project=project, key=key).first()
    if row is None:
        return None
    try:
        return Attempt.from_dict(row.attempt)
    except (TypeError, ValueError):
        return None  # stored by an older shape of Attempt: run it again


def known_flaky(project: Project, test_ids: Iterable[str]) -> set[str]:
    """Those of ``test_ids`` seen both passing and failing on one tree."""
    wanted = {test_id[:MAX_ID_CHARS] for test_id in test_ids}
    if not wanted:
        return set()
    return set(
        TestRecord.objects.filter(
            project=project, test_id__in=wanted, passed__gt=0, failed__gt=0
        ).values_list("test_id", flat=True)
    )


def remember(
    *,
    project: Project,
    replay_id: int,
    gate: GateResult,
    trees: dict[str, str],
    key: str,
) -> None:
    """Count every test outcome of the gate per tree, and keep the original's
    result for reuse when it did not flip. Cached attempts are not counted again."""
    _record_outcomes(project, gate, trees)
    original = [a for a in gate.of("original") if not a.cached]
    if not original or not key:
        return
    outcomes = {(a.ran, a.passed) for a in original}
    if len(outcomes) == 1 and original[0].ran:
        CachedResult.objects.get_or_create(
            project=project,
            key=key,
            defaults={
                "tree_sha": trees["original"],
                "attempt": original[0].to_dict(),
                "replay_id": replay_id,
            },
        )


# Only the original's code is the project's own: a test that flips on a tree a
# replay wrote says something about that replay, never about the test, and must
# not excuse a later replay's failure as "known flaky".
REMEMBERED_TREES = ("original",)


def _record_outcomes(project: Project, gate: GateResult, trees: dict[str, str]) -> None:
    counts: Counter[tuple[str, str, bool]] = Counter()
    for attempt in gate.attempts:
        if attempt.cached or not attempt.cases or attempt.tree not in trees:
            continue
        if attempt.tree not in REMEMBERED_TREES:
            continue
        for case in attempt.cases:
            if case.outcome in ("passed", "failed", "error"):
                counts[
                    (
                        trees[attempt.tree],
                        case.id[:MAX_ID_CHARS],
                        case.outcome == "passed",
                    )
                ] += 1
    rows: dict[tuple[str, str], list[int]] = {}
    for (tree, test_id, passed), n in counts.items():
        row = rows.setdefault((tree, test_id), [0, 0])
        row[0 if passed else 1] += n
    if not rows:
        return
    table = TestRecord._meta.db_table
    now = timezone.now()
    # One statement per row, adding to what earlier replays counted; the
    # conflict clause is the same on PostgreSQL and SQLite.
    sql = (
        f"INSERT INTO {table} "  # noqa: S608 - the table name comes from the model
        "(project_id, tree_sha, test_id, passed, failed, replays, last_seen) "
        "VALUES (%s, %s, %s, %s, %s, 1, %s) "
        "ON CONFLICT (project_id, tree_sha, test_id) DO UPDATE SET "
        f"passed = {table}.passed + excluded.passed, "
        f"failed = {table}.failed + excluded.failed, "
        f"replays = {table}.replays + 1, last_seen = excluded.last_seen"
    )
    with connection.cursor() as cursor:
        cursor.executemany(
            sql,
            [
                (project.pk, tree, test_id, passed, failed, now)
                for (tree, test_id), (passed, failed) in sorted(rows.items())
            ],
        )
