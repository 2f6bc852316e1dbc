"""Following a training run's growing output: ``rollouts/step_*/…_rollouts*.jsonl``.

Each pass looks at every matching file, in natural order (``step_9`` before
``step_10``). A file whose size, modification time and inode are those of
the last pass is not opened. One that grew is read from the byte after the
last whole line imported; a partial trailing line (a record still being
written) is left for the next pass. The offset moves forward in the same
transaction as the runs of the lines before it, and only from the value this
pass read (a conditional UPDATE): a crash between batches or a second worker
on the same source never imports a line twice.

A file that shrank below its offset, whose inode changed (replaced) or whose
first bytes changed (rewritten) is reported, then read again from its start:
what it holds now is imported, the rollouts already stored count as
duplicates.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from django.db import IntegrityError
from django.utils import timezone

from replayhub.ingest.verifiers import (
    BATCH_SIZE,
    Accepted,
    RolloutStore,
    RolloutSummary,
    merge_report,
)
from replayhub.lib.files import inside, open_regular
from replayhub.models import FollowedFile, FollowSource
from replayhub.rollouts.index import LoadReport, load

# ``train_rollouts_<env>.jsonl`` and prime-rl's ``train_rollouts.jsonl`` /
# ``eval_rollouts.jsonl``; never an index beside them.
RECORD_FILES = "*_rollouts*.jsonl"
INDEX_FILES = "index_*"
# The bytes of a file's start that tell a rewritten file from a grown one.
HEAD_BYTES = 4096


class _Lost(Exception):
    """Another pass moved the file's offset first: this batch is not stored."""


def natural_key(path: str) -> tuple:
    """Embedded numbers compare as numbers: ``step_9`` sorts before ``step_10``."""
    return tuple(
        int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)
    )


def expand(pattern: str, skipped: list[str] | None = None) -> list[str]:
    """The record files of a directory (every ``*_rollouts*.jsonl`` under it,
    indexes left out)
    or a glob, in natural order. Links are never followed: one in the tree,
    or a match that resolves outside the glob's fixed directory, is left out
    and named in ``skipped``."""
    skipped = [] if skipped is None else skipped
    if os.path.isdir(pattern) and not os.path.islink(pattern):
        found = list(_walk(pattern, skipped))
    else:
        found = matching(pattern, skipped)
    return sorted(set(found), key=natural_key)


def matching(pattern: str, skipped: list[str]) -> list[str]:
    """The regular files a glob matches; a link, or a match whose real path
    is outside the glob's fixed directory, goes in ``skipped`` instead."""
    root = _fixed_part(pattern)
    found = []
    for path in glob.glob(pattern, recursive=True):
        if os.path.islink(path) or not inside(path, root):
            skipped.append(path)
        elif os.path.isfile(path):
            found.append(path)
    return found


def _fixed_part(pattern: str) -> str:
    """The directory a glob cannot leave: its components before the first
    wildcard."""
    parts = []
    for part in pattern.split(os.sep):
        if glob.has_magic(part):
            break
        parts.append(part)
    return os.sep.join(parts) or "."


def _walk(directory: str, skipped: list[str]):
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_symlink():
                if is_record_file(entry.name) or entry.is_dir():
                    skipped.append(entry.path)
            elif entry.is_dir(follow_symlinks=False):
                yield from _walk(entry.path, skipped)
            elif entry.is_file(follow_symlinks=False) and is_record_file(entry.name):
                yield entry.path


def is_record_file(name: str) -> bool:
    return fnmatch.fnmatch(name, RECORD_FILES) and not fnmatch.fnmatch(
        name, INDEX_FILES
    )


def nothing_to_follow(pattern: str) -> str:
    """The one-line notice for a followed directory or glob with no record
    file (yet): a typo'd path is otherwise indistinguishable from a run that
    has not written its first step."""
    if os.path.isdir(pattern):
        return f"no record file ({RECORD_FILES}) under this directory yet"
    return "the glob matches no file yet"


@dataclass
class _Seen:
    size: int
    mtime_ns: int
    inode: int


def follow_pass(source: FollowSource) -> RolloutSummary:
    """One pass over a source's files; what it imported and found."""
    summary = RolloutSummary()
    store = RolloutStore(source.project, summary)
    # Plain tuples: a pass over an unchanged source builds no model instance.
    known = {
        path: (pk, size, mtime, inode)
        for pk, path, size, mtime, inode in source.files.values_list(
            "pk", "path", "size", "mtime_ns", "inode"
        )
    }
    skipped: list[str] = []
    names = expand(source.pattern, skipped)
    if not names:
        summary.files.append(
            {"file": source.pattern, "problem": nothing_to_follow(source.pattern)}
        )
    for name in names:
        try:
            stat = os.stat(name, follow_symlinks=False)
        except FileNotFoundError:
            continue
        seen = _Seen(stat.st_size, stat.st_mtime_ns, stat.st_ino)
        was = known.get(name)
        if was is not None and was[1:] == (seen.size, seen.mtime_ns, seen.inode):
            continue
        row = _row(source, name) if was is None else FollowedFile.objects.get(pk=was[0])
        _follow_file(store, row, Path(name), seen)
    for name in skipped:
        summary.files.append({"file": name, "problem": "a symbolic link: not followed"})
    source.last_summary = summary.to_dict()
    source.last_pass_at = timezone.now()
    source.save(update_fields=["last_summary", "last_pass_at"])
    return summary


def _row(source: FollowSource, name: str) -> FollowedFile:
    try:
        return FollowedFile.objects.get_or_create(source=source, path=name)[0]
    except IntegrityError:  # created by a concurrent pass in the meantime
        return FollowedFile.objects.get(source=source, path=name)


def _follow_file(
    store: RolloutStore, row: FollowedFile, path: Path, seen: _Seen
) -> None:
    summary = store.summary
    try:
        with open_regular(path) as stream:
            head = stream.read(HEAD_BYTES)
    except OSError as error:
        summary.files.append(
            {"file": str(path), "problem": error.strerror or str(error)}
        )
        return
    problem = _problem(row, seen, head)
    if problem:
        summary.files.append({"file": str(path), "problem": problem})
        moved = FollowedFile.objects.filter(pk=row.pk, offset=row.offset).update(
            offset=0,
            lines=0,
            head_sha256="",
            problem=problem,
            updated_at=timezone.now(),
        )
        if not moved:
            return  # another pass is at this file
        row.offset, row.lines = 0, 0
    state = {"offset": row.offset, "lines": row.lines}

    def advance(offset: int, lines: int) -> None:
        # Only forward, and only from the offset this pass read: a second
        # pass that got there first makes this batch roll back.
        if offset <= state["offset"]:
            return
        moved = FollowedFile.objects.filter(pk=row.pk, offset=state["offset"]).update(
            offset=offset,
            lines=lines,
            head_sha256=_digest(head[: min(offset, HEAD_BYTES)]),
            updated_at=timezone.now(),
        )
        if not moved:
            raise _Lost
        state["offset"], state["lines"] = offset, lines

    store.path = path
    report = LoadReport()
    batch: list[Accepted] = []
    end, lines = row.offset, row.lines
    try:
        for loaded in load(
            path,
            rules=store.rules,
            report=report,
            already=store.already(),
            start=row.offset,
            first_line=row.lines + 1,
            final=False,
        ):
            end = max(end, loaded.offset + loaded.length)
            lines = max(lines, loaded.number)
            if (item := store.judge(loaded)) is not None:
                batch.append(item)
            if len(batch) >= BATCH_SIZE:
                store.store(batch, inside=_step(advance, end, lines))
                batch = []
        # Rows the index skipped after the last line read are counted now:
        # the offset moves past them so that no later pass counts them again.
        end, lines = max(end, report.covered), max(lines, report.covered_lines)
        store.store(batch, inside=_step(advance, end, lines))
    except _Lost:
        summary.files.append({"file": str(path), "problem": "followed by another pass"})
        return
    merge_report(summary, path, report)
    FollowedFile.objects.filter(pk=row.pk, offset=state["offset"]).update(
        size=seen.size, mtime_ns=seen.mtime_ns, inode=seen.inode
    )


def _step(advance, end: int, lines: int):
    return lambda: advance(end, lines)


def _problem(row: FollowedFile, seen: _Seen, head: bytes) -> str:
    """Why the file is not the one read so far ("" when it only grew)."""
    if row.offset == 0:
        return ""
    if row.inode and seen.inode != row.inode:
        return "replaced: another file now has this name; read again from its start"
    if seen.size < row.offset:
        return (
            f"shrank from at least {row.offset:,} to {seen.size:,} bytes; read "
            "again from its start"
        )
    if row.head_sha256 and _digest(head[: min(row.offset, HEAD_BYTES)]) != (
        row.head_sha256
    ):
        return "rewritten: its first bytes changed; read again from its start"
    return ""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
