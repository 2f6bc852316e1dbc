"""The replay's test files against the original's, built in the host-owned git dir.

A replay's own tests are code the replay wrote, so they cannot judge it. When
the replay's result tree differs from the original's in any test path, the
*reference tree* is built: the replay's tree with every test path taken from
the original (added, changed and deleted to match it). The original's tests
then run on the replay's code. Everything here reads and writes through the
scratch git dir with a private index, never through the agent's workspace.

The replay's changes to everything else are read too, for code that could
report a test run's success itself (``testgate.paths.find_interference``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from replayhub.git.scratch import Scratch
from replayhub.testgate.paths import (
    Interference,
    TestChanges,
    find_interference,
    is_test_path,
    test_changes,
)

# The non-test files of a change read for interference, how much of each,
# and of all of them (what is read is held in memory whole).
MAX_SCANNED_FILES = 500
MAX_SCANNED_BYTES = 2 * 1024 * 1024
MAX_SCANNED_TOTAL = 32 * 1024 * 1024


class TreeEntry(NamedTuple):
    mode: str
    sha: str


@dataclass(frozen=True)
class TestPlan:
    """What the test gate needs to know about the replay's test files."""

    __test__ = False

    changes: TestChanges = field(default_factory=TestChanges)
    # None when no test path differs: the replay tree is its own reference.
    reference_tree: str | None = None
    interference: tuple[Interference, ...] = ()


def tree_entries(scratch: Scratch, tree: str) -> dict[str, TreeEntry]:
    """Every file of ``tree`` (blobs, links, submodules) by path."""
    out = scratch.git("ls-tree", "-r", "-z", "--full-tree", tree).stdout
    entries = {}
    for record in filter(None, out.split(b"\0")):
        meta, _, raw_path = record.partition(b"\t")
        mode, _kind, sha = meta.decode().split()
        entries[raw_path.decode("utf-8", "surrogateescape")] = TreeEntry(mode, sha)
    return entries


def plan_tests(
    scratch: Scratch,
    *,
    original_tree: str,
    replay_tree: str,
    replay_paths: list[str],
    patterns: list[str],
) -> TestPlan:
    """Compare the two trees' test paths, build the reference tree when they
    differ, and scan the replay's other changes for interference."""
    original = tree_entries(scratch, original_tree)
    replay = tree_entries(scratch, replay_tree)
    original_tests = {p: e for p, e in original.items() if is_test_path(p, patterns)}
    replay_tests = {p: e for p, e in replay.items() if is_test_path(p, patterns)}
    changes = test_changes(
        {p: f"{e.mode} {e.sha}" for p, e in original_tests.items()},
        {p: f"{e.mode} {e.sha}" for p, e in replay_tests.items()},
        patterns,
    )
    reference = None
    if changes.any:
        reference = build_reference(
            scratch,
            replay_tree=replay_tree,
            take=original_tests,
            drop=sorted(replay_tests.keys() - original_tests.keys()),
        )
    scanned = [
        path
        for path in replay_paths
        if path in replay and not is_test_path(path, patterns)
    ]
    return TestPlan(
        changes=changes,
        reference_tree=reference,
        interference=tuple(
            _interference(scratch, scanned, replay=replay, original=original)
        ),
    )


def build_reference(
    scratch: Scratch, *, replay_tree: str, take: dict[str, TreeEntry], drop: list[str]
) -> str:
    """``replay_tree`` with the entries of ``take`` set and the paths ``drop``
    removed; the new tree's sha."""
    index = scratch.root / "reference.index"
    index.unlink(missing_ok=True)
    try:
        scratch.git("read-tree", replay_tree, index_file=index)
        lines = [f"{e.mode} {e.sha}\t{p}" for p, e in take.items()]
        # Mode 0 removes the path from the index.
        lines += [f"0 {'0' * 40}\t{p}" for p in drop]
        data = "".join(f"{line}\0" for line in lines).encode("utf-8", "surrogateescape")
        scratch.git("update-index", "-z", "--index-info", index_file=index, input=data)
        return scratch.git("write-tree", index_file=index).stdout.decode().strip()
    finally:
        Path(index).unlink(missing_ok=True)


def _interference(
    scratch: Scratch,
    paths: list[str],
    *,
    replay: dict[str, TreeEntry],
    original: dict[str, TreeEntry],
) -> list[Interference]:
    """Hits in the replay's versions of ``paths`` that the original's versions of
    the same files do not have (the project's own code is not the replay's)."""
    paths = [p for p in paths if replay[p].mode.startswith("100")][:MAX_SCANNED_FILES]
    if not paths:
        return []
    new = _texts(scratch, {p: replay[p].sha for p in paths})
    old_paths = {p: original[p].sha for p in paths if p in original}
    old = _texts(scratch, old_paths)
    already = {
        (h.path, h.kind, h.excerpt.strip()) for h in find_interference(old) if old
    }
    return [
        hit
        for hit in find_interference(new)
        if (hit.path, hit.kind, hit.excerpt.strip()) not in already
    ]


def _texts(scratch: Scratch, blobs: dict[str, str]) -> dict[str, str]:
    """The text of each blob (``path -> sha``); binary and oversize blobs are left
    out. Sizes are asked first, so a huge blob is never read."""
    if not blobs:
        return {}
    request = "".join(f"{sha}\n" for sha in blobs.values()).encode()
    sizes = {}
    for line in scratch.git("cat-file", "--batch-check", input=request).stdout.split(
        b"\n"
    ):
        parts = line.split()
        if len(parts) == 3 and parts[1] == b"blob":
            sizes[parts[0].decode()] = int(parts[2])
    wanted = []
    total = 0
    for path, sha in blobs.items():
        size = sizes.get(sha, MAX_SCANNED_BYTES + 1)
        if size <= MAX_SCANNED_BYTES and total + size <= MAX_SCANNED_TOTAL:
            wanted.append((path, sha))
            total += size
    if not wanted:
        return {}
    out = scratch.git(
        "cat-file",
        "--batch",
        input="".join(f"{sha}\n" for _, sha in wanted).encode(),
        output_cap=sum(sizes[sha] + 100 for _, sha in wanted),
    ).stdout
    texts: dict[str, str] = {}
    position = 0
    for path, sha in wanted:
        position = out.index(b"\n", position) + 1  # "<sha> blob <size>"
        data = out[position : position + sizes[sha]]
        position += sizes[sha] + 1
        if b"\0" not in data[:8000]:
            texts[path] = data.decode("utf-8", "replace")
    return texts
