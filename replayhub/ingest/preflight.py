"""Preflight, the free tier: can a recorded run ever reach a verdict?

For each run, :func:`replayhub.provenance.resolve_provenance` reconstructs the
input state from the project repository; the snapshot is stored on the run and
the run is marked ``ready`` or ``unreproducible`` (no original commit, original
not in the repository, no base at all) with the reason. An unreproducible run is
never admitted to a night, so no budget is spent on it.

Preflight costs a few git processes per run, so it is a step of its own, never
part of storing records: the importer stays fast whatever the repository, and a
run whose repository cannot be read stays ``pending`` to be tried again.
Provenance is resolved on a few threads (git runs in child processes) and runs
with the same inputs share one resolution.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from replayhub.gitops import GitError
from replayhub.history import History
from replayhub.models import Preflight, Project, Run
from replayhub.provenance import Provenance, resolve_provenance

CHUNK = 200
THREADS = 4
ERROR_LIMIT = 20


@dataclass
class PreflightResult:
    ready: int = 0
    unreproducible: int = 0
    # Left pending: the repository could not be read.
    failed: int = 0
    # Pending runs of the projects after this preflight (preflight_pending only).
    pending: int | None = None
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        counts = {
            "ready": self.ready,
            "unreproducible": self.unreproducible,
            "failed": self.failed,
        }
        if self.pending is not None:
            counts["pending"] = self.pending
        return counts

    def add_error(self, message: str) -> None:
        if message not in self.errors and len(self.errors) < ERROR_LIMIT:
            self.errors.append(message)


def preflight_runs(*, run_ids: Iterable[int]) -> PreflightResult:
    """Preflight the given runs, whatever their current state (a rerun refreshes)."""
    result = PreflightResult()
    with ThreadPoolExecutor(THREADS) as pool:
        for chunk in _chunks(iter(run_ids), CHUNK):
            _preflight_chunk(chunk, result, pool)
    return result


def preflight_pending(
    *,
    project_ids: Iterable[int],
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PreflightResult:
    """Preflight the pending runs of some projects, oldest first, at most ``limit``.

    Runs whose repository cannot be read stay pending and are skipped, so a
    broken repository never makes this loop forever. ``progress`` is called
    after each chunk with the runs done and the runs there were to do.
    """
    project_ids = list(project_ids)
    pending = Run.objects.filter(
        project_id__in=project_ids, preflight=Preflight.PENDING
    )
    result = PreflightResult()
    total = 0
    if progress is not None:
        total = pending.count()
        if limit is not None:
            total = min(limit, total)
    last = 0
    done = 0
    with ThreadPoolExecutor(THREADS) as pool:
        while limit is None or done < limit:
            size = CHUNK if limit is None else min(CHUNK, limit - done)
            ids = list(
                pending.filter(pk__gt=last)
                .order_by("pk")
                .values_list("pk", flat=True)[:size]
            )
            if not ids:
                break
            _preflight_chunk(ids, result, pool)
            last = ids[-1]
            done += len(ids)
            if progress is not None:
                progress(done, total)
    result.pending = pending.count()
    return result


def _chunks(ids: Iterator[int], size: int) -> Iterator[list[int]]:
    while chunk := list(islice(ids, size)):
        yield chunk


def _preflight_chunk(
    ids: list[int], result: PreflightResult, pool: ThreadPoolExecutor
) -> None:
    runs = list(
        Run.objects.filter(pk__in=ids)
        .select_related("project")
        .defer("prompt", "output", "raw", "usage")
    )
    by_project: dict[int, list[Run]] = {}
    for run in runs:
        by_project.setdefault(run.project_id, []).append(run)
    done: list[Run] = []
    for project_runs in by_project.values():
        project = project_runs[0].project
        try:
            branch = project.default_branch or _head_branch(project)
        except GitError as error:
            result.failed += len(project_runs)
            result.add_error(f"{project.slug}: {error}")
            continue
        futures: dict[tuple, Future[Provenance]] = {}
        keyed: list[tuple[Run, tuple]] = []
        for run in project_runs:
            arguments = _arguments(project, run, branch)
            key = tuple(arguments.values())
            if key not in futures:
                futures[key] = pool.submit(resolve_provenance, **arguments)
            keyed.append((run, key))
        for run, key in keyed:
            try:
                provenance = futures[key].result()
            except GitError as error:
                result.failed += 1
                result.add_error(f"{project.slug}: {error}")
                continue
            if provenance.reproducible:
                run.preflight = Preflight.READY
                run.preflight_reason = ""
                result.ready += 1
            else:
                run.preflight = Preflight.UNREPRODUCIBLE
                run.preflight_reason = provenance.not_reproducible_reason
                result.unreproducible += 1
            run.provenance = provenance.to_dict()
            done.append(run)
    Run.objects.bulk_update(done, ["preflight", "preflight_reason", "provenance"])


def _head_branch(project: Project) -> str | None:
    """The repository's HEAD branch, looked up once per project instead of per run.

    None when HEAD is detached: resolve_provenance finds that itself and says so.
    """
    with History(project.repo_path) as history:
        return history.head_branch()


def _arguments(project: Project, run: Run, branch: str | None) -> dict[str, Any]:
    return {
        "repo_path": project.repo_path,
        "original_commit": run.original_commit or None,
        "recorded_base": run.base_sha or None,
        "default_branch": branch,
        "image": run.sandbox_image or None,
        "recorded_config_sha256": run.sandbox_config_sha256 or None,
        "project_config_sha256": project.sandbox_config_sha256 or None,
        "test_command": shlex.join(project.test_command) or None,
    }
