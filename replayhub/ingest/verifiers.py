"""Storing rollouts: each accepted record becomes a Run (``source="rollout"``,
the trace id as its external id) with its seeds, in batches, each batch in
one transaction.

A record is accepted when it is a source rollout (not a replay's output),
its reward is inside the project's window, and it has at least one seed under
the project's rules; otherwise it is counted in ``skipped`` by reason. Rollouts go
only into a project with rollout settings (a harness command): into another,
the import is refused in one line (``rollout_settings_problem``) before a
line is read. The same record again is a duplicate, the same trace id with
other content a conflict, as for native runs: reported, never written over.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction

from replayhub.ingest.importer import REPORT_LIMIT, ImportSummary
from replayhub.ingest.native import RecordError, canonical_json
from replayhub.lib.files import NotRegular
from replayhub.models import Preflight, Project, Run, RunSource, Seed
from replayhub.rollouts.graph import branches
from replayhub.rollouts.index import Already, Loaded, LoadReport, load, read_lines
from replayhub.rollouts.seeds import SeedDraft, SeedRules, derive, is_replay_output
from replayhub.rollouts.trace import Trace, content_text

BATCH_SIZE = 200
_ATTEMPTS = 3
# The reasons ``skipped`` always lists, zero or not.
SKIP_REASONS = ("replayed", "source_reward", "no_seed", "empty", "overlong")


@dataclass
class RolloutSummary(ImportSummary):
    """An import summary with what rollouts add: ``skipped`` counts records
    left out by reason (``overlong`` counts seeds), ``seeds`` the seeds
    stored, ``files`` what each file's index did."""

    # A plain dict, every reason present: a template reads it as it reads
    # the summary stored on an upload job.
    skipped: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(SKIP_REASONS, 0)
    )
    seeds: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)
    # Files named to import that were not read (a link, a FIFO).
    unread: int = 0

    @property
    def complete(self) -> bool:
        return super().complete and not self.unread

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + count

    def add_invalid_in(self, path: Path | None, line: int, error: str) -> None:
        self.invalid_total += 1
        if len(self.invalid) < REPORT_LIMIT:
            entry: dict[str, Any] = {"line": line, "error": error}
            if path is not None:
                entry["file"] = str(path)
            self.invalid.append(entry)

    @property
    def files_problems(self) -> list[dict[str, Any]]:
        """Files whose index was not used or that shrank or were replaced."""
        return [f for f in self.files if "problem" in f or "index_problem" in f]

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "skipped": dict(self.skipped),
            "seeds": self.seeds,
            "files": self.files,
        }


@dataclass(slots=True)
class Accepted:
    line: int
    trace: Trace
    value: Any
    seeds: list[SeedDraft]
    sha256: str


class RolloutStore:
    """Judges loaded records against a project's rules and stores the
    accepted ones in batches. ``store`` takes an extra step to run inside
    each batch's transaction (follow mode moves its offset there)."""

    def __init__(self, project: Project, summary: RolloutSummary) -> None:
        self.project = project
        self.rules = SeedRules.of(project)
        self.summary = summary
        self.path: Path | None = None

    def already(self) -> Already:
        project = self.project

        def stored(ids: list[str]) -> set[str]:
            return set(
                Run.objects.filter(project=project, external_id__in=ids).values_list(
                    "external_id", flat=True
                )
            )

        return stored

    def judge(self, loaded: Loaded) -> Accepted | None:
        """The record to store, or None (counted as invalid or skipped)."""
        summary = self.summary
        trace = loaded.trace
        if trace is None:
            summary.add_invalid_in(self.path, loaded.number, loaded.error)
            return None
        if is_replay_output(trace, self.rules.verification_turn):
            summary.skip("replayed")
            return None
        if not trace.nodes:
            summary.skip("empty")
            return None
        if not self.rules.reward_allowed(trace.reward):
            summary.skip("source_reward")
            return None
        seeds, overlong = derive(trace, self.rules)
        summary.skip("overlong", overlong)
        if not seeds:
            summary.skip("no_seed")
            return None
        try:
            text = canonical_json(loaded.value)
            digest = hashlib.sha256(text.encode()).hexdigest()
        except (ValueError, RecordError):
            text = "\\u0000"
        if "\\u0000" in text:
            # NUL, a lone surrogate, a number too large: PostgreSQL stores none.
            summary.add_invalid_in(
                self.path, loaded.number, "contains text the database cannot store"
            )
            return None
        return Accepted(loaded.number, trace, loaded.value, seeds, digest)

    def store(
        self, batch: list[Accepted], *, inside: Callable[[], None] | None = None
    ) -> None:
        """Store a batch in one transaction (with ``inside``, run last in it).

        A batch that collides with a concurrent import of the same trace ids
        is rolled back and classified again against what that import stored.
        """
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with transaction.atomic():
                    fresh, duplicates, conflicts = self._classify(batch)
                    seeds = self._write(fresh)
                    if inside is not None:
                        inside()
            except IntegrityError:
                if attempt == _ATTEMPTS:
                    raise
                continue
            summary = self.summary
            summary.imported += len(fresh)
            summary.duplicates += duplicates
            summary.seeds += seeds
            for item in conflicts:
                summary.add_conflict(item.line, self.project.slug, item.trace.id)
            summary.project_ids.add(self.project.pk)
            return

    def _classify(
        self, batch: list[Accepted]
    ) -> tuple[list[Accepted], int, list[Accepted]]:
        ids = [item.trace.id for item in batch]
        stored = dict(
            Run.objects.filter(project=self.project, external_id__in=ids).values_list(
                "external_id", "record_sha256"
            )
        )
        fresh, conflicts, duplicates = [], [], 0
        for item in batch:
            digest = stored.get(item.trace.id)
            if digest is None:
                stored[item.trace.id] = item.sha256
                fresh.append(item)
            elif digest == item.sha256:
                duplicates += 1
            else:
                conflicts.append(item)
        return fresh, duplicates, conflicts

    def _write(self, fresh: list[Accepted]) -> int:
        if not fresh:
            return 0
        runs = Run.objects.bulk_create([self._run(item) for item in fresh])
        seeds = [
            Seed(
                run=run,
                number=draft.number,
                key=draft.key,
                kind=draft.kind,
                anchor=draft.anchor,
                anchor_node=draft.anchor_node,
                branch=draft.branch,
                messages=draft.messages,
                continuation=draft.continuation,
                original_completion=draft.original_completion,
                token_count=draft.token_count,
                snapshot=draft.snapshot,
            )
            for run, item in zip(runs, fresh, strict=True)
            for draft in item.seeds
        ]
        Seed.objects.bulk_create(seeds)
        return len(seeds)

    def _run(self, item: Accepted) -> Run:
        trace, value = item.trace, item.value
        task = value.get("task") or {}
        fields = task.get("data") if trace.version is not None else task
        image = fields.get("image") if isinstance(fields, dict) else None
        return Run(
            project=self.project,
            external_id=trace.id,
            source=RunSource.ROLLOUT,
            reward=trace.reward,
            title=(trace.task_name or "")[:500],
            prompt=_prompt_text(trace.prompt),
            model=_model(value)[:200],
            sandbox_image=image if isinstance(image, str) and len(image) <= 512 else "",
            started_at=_started(value),
            output=_final_answer(trace),
            usage=trace.usage,
            raw=value,
            record_sha256=item.sha256,
            # Nothing to check in git: a rollout can be replayed once it has seeds.
            preflight=Preflight.READY,
        )


class NoRolloutSettings(ValueError):
    """The project cannot replay rollouts: nothing is imported into it."""


def rollout_settings_problem(project: Project) -> str:
    """Why rollouts may not go into ``project`` ("" when they may): one
    without a harness command could never replay them."""
    if project.harness_command:
        return ""
    return (
        f"Project {project.slug} has no rollout settings: give it a harness "
        "command (Rollouts on its edit page, or project_edit "
        f"{project.slug} --harness-command CMD) before importing rollouts."
    )


def _check_settings(project: Project) -> None:
    if problem := rollout_settings_problem(project):
        raise NoRolloutSettings(problem)


def import_files(
    *,
    project: Project,
    paths: Iterable[Path],
    summary: RolloutSummary | None = None,
    progress: Callable[[int, ImportSummary], None] | None = None,
) -> RolloutSummary:
    """Import record files, each index-selected when it has an index;
    NoRolloutSettings when the project could not replay them."""
    _check_settings(project)
    summary = summary if summary is not None else RolloutSummary()
    store = RolloutStore(project, summary)
    lines = 0
    for path in paths:
        store.path = path
        report = LoadReport()
        batch: list[Accepted] = []
        try:
            for loaded in load(
                path, rules=store.rules, report=report, already=store.already()
            ):
                lines += 1
                if (item := store.judge(loaded)) is not None:
                    batch.append(item)
                if len(batch) >= BATCH_SIZE:
                    store.store(batch)
                    batch = []
                    if progress is not None:
                        progress(lines, summary)
        except NotRegular as error:
            # A link or a FIFO named among the files: said, and not read.
            summary.files.append({"file": str(path), "problem": error.strerror})
            summary.unread += 1
            continue
        store.store(batch)
        merge_report(summary, path, report)
    return summary


def import_chunks(
    *,
    project: Project,
    chunks: Iterable[bytes],
    progress: Callable[[int, ImportSummary], None] | None = None,
) -> RolloutSummary:
    """Import a stream (standard input, an upload, a request body): every line
    is read, as there is no index beside it; NoRolloutSettings when the
    project could not replay them."""
    _check_settings(project)
    summary = RolloutSummary()
    store = RolloutStore(project, summary)
    batch: list[Accepted] = []
    for loaded in read_lines(chunks):
        if (item := store.judge(loaded)) is not None:
            batch.append(item)
        if len(batch) >= BATCH_SIZE:
            store.store(batch)
            batch = []
            if progress is not None:
                progress(loaded.number, summary)
    store.store(batch)
    return summary


def merge_report(summary: RolloutSummary, path: Path, report: LoadReport) -> None:
    """Fold a file's index-side counts into the summary: a row whose trace is
    stored already is a duplicate, as it would be had its line been read."""
    skipped = Counter(report.skipped)
    summary.duplicates += skipped.pop("imported", 0)
    for reason, count in skipped.items():
        summary.skip(reason, count)
    entry: dict[str, Any] = {"file": str(path), "indexed": report.indexed}
    if report.index_problem:
        entry["index_problem"] = report.index_problem
    summary.files.append(entry)


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "\n\n".join(
            content_text(m.get("content")) for m in prompt if isinstance(m, dict)
        )
    return ""


def _final_answer(trace: Trace) -> str:
    paths = branches(trace.nodes)
    for index in reversed(paths[-1] if paths else []):
        node = trace.nodes[index]
        if node.sampled and node.role == "assistant":
            return content_text(node.message.get("content"))
    return ""


def _model(value: dict) -> str:
    for call in value.get("calls") or ():
        if isinstance(call, dict) and isinstance(call.get("model"), str):
            return call["model"]
    return ""


def _started(value: dict) -> datetime | None:
    timing = value.get("timing")
    start = timing.get("start") if isinstance(timing, dict) else None
    if isinstance(start, int | float) and 0 < start < 1e11:
        return datetime.fromtimestamp(start, tz=UTC)
    return None
