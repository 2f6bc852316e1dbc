"""Preflight, the free tier: can a recorded run ever reach a verdict?

For each run, :func:`replayhub.replay.provenance.resolve_provenance` reconstructs the
input state from the project repository; the snapshot is stored on the run and
the run is marked ``ready`` or ``unreproducible`` (no original commit, original
not in the repository, no base at all) with the reason. An unreproducible run is
never admitted to a night, so no budget is spent on it.

Preflight reads the repository, so it is a step of its own, never part of
storing records: the importer stays fast whatever the repository, and a run
whose repository cannot be read stays ``pending`` to be tried again. Runs are
taken in chunks; each project's runs of a chunk are resolved together by
:mod:`replayhub.replay.provenance_batch` (one ``cat-file`` per project for the whole
preflight, one ``rev-list`` per chunk), and runs with the same inputs share one
resolution. ``batched=False`` resolves every run on its own instead (a few git
processes each, on a few threads): the reference the batched way must match.

A project on a remote is read from this host's mirror, fetched before its
runs are resolved. That fetch is a worker's job, never a request's: a
request leaves such a project's runs pending with the reason
:data:`FETCH_WAIT` (:func:`preflight_defer`) and a worker preflights them.
"""

from __future__ import annotations

import json
import queue
import shlex
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Exists, OuterRef
from django.db.models.fields.json import KeyTextTransform

from replayhub.git.history import History
from replayhub.git.mirrors import RepoUnreachable, is_remote
from replayhub.git.scratch import GitError
from replayhub.models import Preflight, Project, Run, RunPatch
from replayhub.replay.provenance import Provenance, resolve_provenance
from replayhub.replay.provenance_batch import BatchHistory, batch_passes, resolve_batch

CHUNK = 2000
STORE_ROWS = 500
THREADS = 4
ERROR_LIMIT = 20
# The reason a run waits pending while its project's remote is fetched.
FETCH_WAIT = "Waiting for a worker to fetch the repository."


@dataclass
class PreflightResult:
    ready: int = 0
    unreproducible: int = 0
    # Left pending: the repository could not be read.
    failed: int = 0
    # Pending runs of the projects after this preflight (preflight_pending only).
    pending: int | None = None
    # Of those, the runs left for a worker to fetch their remote first.
    deferred: int | None = None
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        counts = {
            "ready": self.ready,
            "unreproducible": self.unreproducible,
            "failed": self.failed,
        }
        if self.pending is not None:
            counts["pending"] = self.pending
        if self.deferred is not None:
            counts["deferred"] = self.deferred
        return counts

    def add_error(self, message: str) -> None:
        if message not in self.errors and len(self.errors) < ERROR_LIMIT:
            self.errors.append(message)


class _Resolvers:
    """How a preflight resolves each project's runs: batched or one by one.

    Batched, one BatchHistory per project lives as long as the preflight (its
    cat-file serves every chunk), and a thread of its own makes a chunk's git
    passes while the chunk before is resolved; one by one, a few threads
    share the work.
    """

    def __init__(self, batched: bool) -> None:
        self.batched = batched
        self.pool = ThreadPoolExecutor(1 if batched else THREADS)
        self.histories: dict[int, BatchHistory] = {}
        self.repositories: dict[int, Path | RepoUnreachable] = {}
        self.storer = _Storer() if batched and _Storer.usable() else None

    def __enter__(self) -> _Resolvers:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        try:
            if self.storer is not None:
                self.storer.close(wait=error is None)
        finally:
            # Passes still being made use the histories: they end first.
            self.pool.shutdown()
            for history in self.histories.values():
                history.close()

    def store(self, runs: list[tuple[int, str, str, Any]]) -> None:
        if self.storer is not None:
            self.storer.put(runs)
        else:
            _store(runs)

    def repository(self, project: Project) -> Path:
        """The project's repository on this host; a mirror is fetched once per
        preflight, before its first chunk, so records naming commits pushed
        since are found. Raises RepoUnreachable (for every chunk) when the
        remote could not be read."""
        if project.pk not in self.repositories:
            try:
                self.repositories[project.pk] = project.repository(refresh=True)
            except RepoUnreachable as error:
                self.repositories[project.pk] = error
        found = self.repositories[project.pk]
        if isinstance(found, RepoUnreachable):
            raise found
        return found

    def start(
        self,
        project: Project,
        repo: Path,
        branch: str | None,
        requests: list[dict[str, Any]],
    ) -> Callable[[], list[Provenance | GitError]]:
        """Start resolving ``requests`` (without ``repo_path``); the callable
        returned gives each request's provenance, or the GitError that kept it
        from one."""
        if not self.batched:
            futures = [
                self.pool.submit(resolve_provenance, repo_path=repo, **r)
                for r in requests
            ]
            return lambda: [_outcome(future) for future in futures]
        try:
            if project.pk not in self.histories:
                self.histories[project.pk] = BatchHistory(repo)
        except GitError as error:
            failed: list[Provenance | GitError] = [error] * len(requests)
            return lambda: failed
        history = self.histories[project.pk]
        passes = self.pool.submit(
            batch_passes, history, requests, default_branch=branch
        )
        return lambda: resolve_batch(
            history, requests, default_branch=branch, passes=passes.result
        )


class _Storer:
    """Writes the chunks' outcomes on threads of their own (a connection each)
    while the next chunks are resolved. Writing a chunk costs the database
    about what resolving it costs Python, so two chunks are written side by
    side; one more waits at most. An error in a thread surfaces at the next
    chunk or at the end."""

    THREADS = 2

    @staticmethod
    def usable() -> bool:
        # Inside a transaction another connection would not see its rows.
        return connection.vendor == "postgresql" and not connection.in_atomic_block

    def __init__(self) -> None:
        self.queue: queue.Queue[list | None] = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        self.threads = [
            threading.Thread(
                target=self._run, name="replayhub-preflight-store", daemon=True
            )
            for _ in range(self.THREADS)
        ]
        for thread in self.threads:
            thread.start()

    def _run(self) -> None:
        try:
            while (runs := self.queue.get()) is not None:
                if self.error is None:
                    try:
                        _store(runs)
                    except BaseException as error:  # handed to the caller
                        self.error = error
        finally:
            connection.close()

    def put(self, runs: list[tuple[int, str, str, Any]]) -> None:
        if self.error is not None:
            self.close(wait=True)
        self.queue.put(runs)

    def close(self, *, wait: bool) -> None:
        running = [thread for thread in self.threads if thread.is_alive()]
        for _ in running:
            self.queue.put(None)
        for thread in running:
            thread.join()
        if wait and self.error is not None:
            error, self.error = self.error, None
            raise error


def _outcome(future: Future[Provenance]) -> Provenance | GitError:
    try:
        return future.result()
    except GitError as error:
        return error


def preflight_runs(*, run_ids: Iterable[int], batched: bool = True) -> PreflightResult:
    """Preflight the given runs, whatever their current state (a rerun refreshes)."""
    result = PreflightResult()

    def chunks() -> Iterator[list[_Row]]:
        for chunk in _chunks(iter(run_ids), CHUNK):
            rows = _with_inferred(Run.objects.filter(pk__in=chunk)).values_list(
                *_Row._fields
            )
            yield [_Row(*values) for values in rows]

    with _Resolvers(batched) as resolvers:
        for _ in _preflight_chunks(chunks(), result, resolvers):
            pass
    return result


def preflight_pending(
    *,
    project_ids: Iterable[int],
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    batched: bool = True,
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

    def chunks() -> Iterator[list[_Row]]:
        # Read by id past the last chunk read, not by state: the chunk before
        # may not be stored yet when the next is read.
        last, read = 0, 0
        while limit is None or read < limit:
            size = CHUNK if limit is None else min(CHUNK, limit - read)
            rows = [
                _Row(*values)
                for values in _with_inferred(pending.filter(pk__gt=last))
                .order_by("pk")
                .values_list(*_Row._fields)[:size]
            ]
            if not rows:
                return
            yield rows
            last = rows[-1].pk
            read += len(rows)

    done = 0
    with _Resolvers(batched) as resolvers:
        for finished in _preflight_chunks(chunks(), result, resolvers):
            done += finished
            if progress is not None:
                progress(done, total)
    result.pending = pending.count()
    return result


def remote_projects(project_ids: Iterable[int]) -> set[int]:
    """The projects of ``project_ids`` whose repository is on a remote: their
    preflight fetches it first."""
    paths = Project.objects.filter(pk__in=list(project_ids)).values_list(
        "pk", "repo_path"
    )
    return {pk for pk, path in paths if is_remote(path)}


def preflight_defer(*, project_ids: Iterable[int]) -> int:
    """Leave the pending runs of ``project_ids`` (projects on a remote) for a
    worker, saying why they wait; how many there are."""
    return Run.objects.filter(
        project_id__in=list(project_ids), preflight=Preflight.PENDING
    ).update(preflight_reason=FETCH_WAIT)


def _chunks(ids: Iterator[int], size: int) -> Iterator[list[int]]:
    while chunk := list(islice(ids, size)):
        yield chunk


class _Row(NamedTuple):
    """What preflight reads of a run: its inputs, not its texts."""

    pk: int
    project_id: int
    original_commit: str
    base_sha: str
    sandbox_image: str
    sandbox_config_sha256: str
    # The record's ``inferred`` and ``import_notes`` as JSON text (or None):
    # fields a transcript import worked out rather than read.
    inferred: str | None
    import_notes: str | None
    # Whether the original is a patch stored with the run (``RunPatch``).
    patched: bool


def _with_inferred(runs):
    """``runs`` with the record keys preflight reads out of ``raw``, and
    whether each has a patch for its original."""
    return runs.annotate(
        inferred=KeyTextTransform("inferred", "raw"),
        import_notes=KeyTextTransform("import_notes", "raw"),
        patched=Exists(RunPatch.objects.filter(run=OuterRef("pk"))),
    )


def _preflight_chunks(
    chunks: Iterator[list[_Row]], result: PreflightResult, resolvers: _Resolvers
) -> Iterator[int]:
    """Preflight each chunk; yields the runs of each as it is done.

    A chunk's resolution is started (its git passes made on the resolvers'
    thread) before the chunk ahead of it is finished, so git works on one
    chunk while Python resolves the other.
    """
    ahead: Callable[[], int] | None = None
    for rows in chunks:
        started = _start_chunk(rows, result, resolvers)
        if ahead is not None:
            yield ahead()
        ahead = started
    if ahead is not None:
        yield ahead()


def _start_chunk(
    rows: list[_Row], result: PreflightResult, resolvers: _Resolvers
) -> Callable[[], int]:
    """Start resolving a chunk; the callable returned finishes it (stores the
    outcomes, counts them in ``result``) and returns its number of runs."""
    projects = Project.objects.in_bulk({row.project_id for row in rows})
    by_project: dict[int, list[_Row]] = {}
    for row in rows:
        by_project.setdefault(row.project_id, []).append(row)
    started = []
    for project_id, project_rows in by_project.items():
        project = projects[project_id]
        try:
            repo = resolvers.repository(project)
            branch = project.default_branch or _head_branch(repo)
        except RepoUnreachable as error:
            # Left pending, to be tried again once the remote answers; the
            # run's page says why.
            result.failed += len(project_rows)
            result.add_error(
                f"{project.slug}: the repository could not be fetched ({error})"
            )
            Run.objects.filter(
                pk__in=[row.pk for row in project_rows], preflight=Preflight.PENDING
            ).update(
                preflight_reason=f"The repository could not be fetched: {error.line}"
            )
            continue
        except GitError as error:
            result.failed += len(project_rows)
            result.add_error(f"{project.slug}: {error}")
            continue
        # Runs with the same inputs share one resolution.
        requests: dict[tuple, dict[str, Any]] = {}
        common = _project_arguments(project, branch)
        for row in project_rows:
            key = row[2:]
            if key not in requests:
                requests[key] = _arguments(common, row)
        answers = resolvers.start(project, repo, branch, list(requests.values()))
        started.append((project, project_rows, list(requests), answers))

    def finish() -> int:
        done: list[tuple[int, str, str, Any]] = []
        for project, project_rows, keys, answers in started:
            _collect(project, project_rows, keys, answers(), result, done)
        resolvers.store(done)
        return len(rows)

    return finish


def _collect(
    project: Project,
    rows: list[_Row],
    keys: list[tuple],
    answers: list[Provenance | GitError],
    result: PreflightResult,
    done: list[tuple[int, str, str, Any]],
) -> None:
    """Count each run's outcome and add what it stores to ``done``."""
    # What each distinct resolution stores, worked out once for all its runs.
    stored: dict[tuple, tuple[str, str, Any] | GitError] = {}
    for key, provenance in zip(keys, answers, strict=True):
        if isinstance(provenance, GitError):
            stored[key] = provenance
        elif provenance.reproducible:
            stored[key] = (Preflight.READY, "", provenance.to_dict())
        else:
            reason = provenance.not_reproducible_reason
            stored[key] = (Preflight.UNREPRODUCIBLE, reason, provenance.to_dict())
    for row in rows:
        outcome = stored[row[2:]]
        if isinstance(outcome, GitError):
            result.failed += 1
            result.add_error(f"{project.slug}: {outcome}")
            continue
        if outcome[0] == Preflight.READY:
            result.ready += 1
        else:
            result.unreproducible += 1
        done.append((row.pk, *outcome))


def _store(runs: list[tuple[int, str, str, Any]]) -> None:
    """Write each ``(id, preflight, reason, provenance)`` with few statements.

    ``bulk_update`` builds a CASE expression per field and row, which costs
    more than resolving the provenance. On PostgreSQL the rows go as one JSON
    document joined on the id (one statement, one parameter); elsewhere as a
    VALUES list a few hundred rows at a time.
    """
    table = connection.ops.quote_name(Run._meta.db_table)
    encoder = Run._meta.get_field("provenance").encoder
    update = (
        f"UPDATE {table} SET preflight = v.preflight, preflight_reason = v.reason, "  # noqa: S608 -- names from the model
        "provenance = v.provenance{cast} FROM {rows} WHERE {table}.id = v.id"
    )
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            rows = [
                {"id": pk, "preflight": state, "reason": reason, "provenance": p}
                for pk, state, reason, p in runs
            ]
            cursor.execute(
                update.format(
                    cast="",
                    table=table,
                    rows="jsonb_to_recordset(%s::jsonb) AS v (id bigint, "
                    "preflight text, reason text, provenance jsonb)",
                ),
                [json.dumps(rows, cls=encoder)],
            )
            return
        for start in range(0, len(runs), STORE_ROWS):
            part = runs[start : start + STORE_ROWS]
            values = ", ".join(["(%s, %s, %s, %s)"] * len(part))
            params: list[Any] = []
            for pk, state, reason, provenance in part:
                params += [pk, state, reason, json.dumps(provenance, cls=encoder)]
            cursor.execute(
                f"WITH v (id, preflight, reason, provenance) AS (VALUES {values}) "
                + update.format(cast="", table=table, rows="v"),
                params,
            )


def _head_branch(repo: Path) -> str | None:
    """The repository's HEAD branch, looked up once per project instead of per run.

    None when HEAD is detached: resolve_provenance finds that itself and says so.
    """
    with History(repo) as history:
        return history.head_branch()


def _project_arguments(project: Project, branch: str | None) -> dict[str, Any]:
    """What every run of a project passes to resolve_provenance alike."""
    return {
        "default_branch": branch,
        "project_config_sha256": project.sandbox_config_sha256 or None,
        "test_command": shlex.join(project.test_command) or None,
    }


def _arguments(common: dict[str, Any], run: _Row) -> dict[str, Any]:
    """resolve_provenance's keyword arguments for a run, but the repository."""
    return {
        "original_commit": run.original_commit or None,
        "recorded_base": run.base_sha or None,
        "image": run.sandbox_image or None,
        "recorded_config_sha256": run.sandbox_config_sha256 or None,
        "inferred": run.inferred,
        "import_notes": run.import_notes,
        "patched": run.patched,
        **common,
    }
