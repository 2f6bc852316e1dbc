"""What the agent left behind, taken in within its caps.

Everything here meets state the agent shaped: its checkout's size, its file
count, names git refuses, nested repositories. Each ends in a decision that
names the agent's doing (``cap_fired`` naming the file or disk cap), never
in an exception that would make ReplayHub look at fault.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from pathlib import Path

from replayhub.git.scratch import GitError, Scratch, require_sha
from replayhub.lib.globs import glob_match
from replayhub.models import Project
from replayhub.replay.capture import (
    LISTED,
    Captured,
    TooManyFiles,
    capture_workspace,
)
from replayhub.sandbox.watchdog import disk_usage
from replayhub.verdicts import Facts, Reason, Ruling, decide


def inconclusive(reason: Reason, detail: str, **facts) -> Ruling:
    return decide(Facts(harness_failure=reason, harness_detail=detail, **facts))


def file_cap_fired(detail: str, base_facts: dict) -> Ruling:
    """What the agent wrote is too large to capture, compare or test."""
    return inconclusive(Reason.CAP_FIRED, detail, cap_detail="max_files", **base_facts)


def disk_cap_fired(detail: str, base_facts: dict) -> Ruling:
    return inconclusive(Reason.CAP_FIRED, detail, cap_detail="disk", **base_facts)


def disk_bytes(project: Project) -> int:
    return project.max_disk_mb * 1024 * 1024


def grew_too_large(error: GitError) -> bool:
    """Whether git failed on the size of a tree rather than on a fault of its
    own: it ran past its timeout or printed more than it may (``git``
    says so in the message)."""
    message = str(error)
    return " timed out after " in message or " printed more than " in message


def count_files(scratch: Scratch, tree: str) -> int:
    """The entries (files, links, submodules) of ``tree``.

    Read from the header of a private index made from the tree (signature,
    version, entry count: the same in every index version), so no file name is
    listed: a tree of a million files is counted as fast as git can read it.
    """
    index = scratch.root / f"count-{uuid.uuid4().hex}.index"
    try:
        scratch.git("read-tree", require_sha(tree), index_file=index)
        with index.open("rb") as handle:
            header = handle.read(12)
    finally:
        index.unlink(missing_ok=True)
    if len(header) < 12 or header[:4] != b"DIRC":
        raise GitError(f"git read-tree wrote no index for {tree}")
    return int(struct.unpack(">I", header[8:12])[0])


def tree_bytes(scratch: Scratch, tree: str) -> int:
    """What checking ``tree`` out writes: the sum of its blobs' sizes."""
    out = scratch.git("ls-tree", "-r", "-l", "-z", require_sha(tree)).stdout
    total = 0
    for record in filter(None, out.split(b"\0")):
        size = record.partition(b"\t")[0].split()[-1]
        if size.isdigit():
            total += int(size)
    return total


def capture(
    *,
    scratch: Scratch,
    workspace: Path,
    written: Iterable[Path],
    project: Project,
    owner: tuple[int, int] | None,
    base_facts: dict,
) -> Captured | Ruling:
    """The agent's checkout as a tree, or the decision that ends the replay.

    ``written`` is everything the agent could write (the checkout included),
    measured against the disk cap before anything is copied from it.
    """
    cap = disk_bytes(project)
    used, _ = disk_usage(written, stop_bytes=cap)
    if used > cap:
        return disk_cap_fired(
            f"the agent left more than {used / 1024**2:,.0f} MiB, over the disk "
            f"cap of {project.max_disk_mb:,} MiB",
            base_facts,
        )
    max_files = project.max_files
    try:
        captured = capture_workspace(
            scratch,
            workspace,
            user=owner,
            max_files=max_files,
            ignored=project.ignored_in_force,
            kept=project.test_paths,
        )
    except TooManyFiles:
        return file_cap_fired(
            f"the agent left more than {max_files:,} files in its checkout",
            base_facts,
        )
    except GitError as exc:
        # Within the file and disk caps, and with no name git refuses left
        # for it to refuse, a failing capture is ReplayHub's.
        return inconclusive(
            Reason.HARNESS_ERROR,
            f"the change could not be captured: {exc}",
            **base_facts,
        )
    captured.disk_bytes = used
    return captured


def counted(
    scratch: Scratch, tree: str, project: Project, base_facts: dict
) -> int | Ruling:
    """The files of the captured ``tree``, or the file cap's decision.

    Checked before anything reads the tree whole: a compare, a checkout and a
    test run take time in proportion to its files.
    """
    max_files = project.max_files
    try:
        files = count_files(scratch, tree)
    except GitError as exc:
        if grew_too_large(exc):
            return file_cap_fired(
                f"counting the files the agent left failed ({exc}); the cap is "
                f"{max_files:,}",
                base_facts,
            )
        raise
    if files > max_files:
        return file_cap_fired(
            f"the agent left {files:,} files in its checkout, over the cap of "
            f"{max_files:,}",
            base_facts,
        )
    return files


def too_large_to_check_out(
    scratch: Scratch, trees: dict[str, str], project: Project, base_facts: dict
) -> Ruling | None:
    """The disk cap, before a tree the agent shaped is copied for its tests."""
    cap = disk_bytes(project)
    for name in ("replay", "reference"):
        if name in trees and (size := tree_bytes(scratch, trees[name])) > cap:
            return disk_cap_fired(
                f"checking out the {name} tree for its tests would write "
                f"{size / 1024**2:,.0f} MiB, over the disk cap of "
                f"{project.max_disk_mb:,} MiB",
                base_facts,
            )
    return None


def unstorable_summary(captured: Captured) -> str:
    """One line naming what git could not store ("" when it stored it all)."""
    if not captured.unstorable_count:
        return ""
    named = ", ".join(captured.unstorable[:5])
    more = captured.unstorable_count - min(5, len(captured.unstorable))
    return named + (f" and {more:,} more" if more > 0 else "")


def disallowed(
    compared: Iterable[str], unstorable: Iterable[str], globs: Iterable[str]
) -> tuple[str, ...]:
    """The disallowed paths, counting those git could not store: the agent
    wrote them all the same."""
    patterns = [g for g in globs if g]
    extra = (
        [p for p in unstorable if not any(glob_match(p, g) for g in patterns)]
        if patterns
        else []
    )
    return tuple(sorted({*compared, *extra}))


def ignored_evidence(
    *, original: list[str], replay: list[str], replay_count: int
) -> dict:
    """The agents' own files left out of each tree, as the evidence lists them:
    the first ``LISTED`` paths of a side and how many it had; a side with
    none is not named."""
    sides = {"original": (original, len(original)), "replay": (replay, replay_count)}
    return {
        name: {"paths": sorted(paths)[:LISTED], "count": count}
        for name, (paths, count) in sides.items()
        if count
    }
