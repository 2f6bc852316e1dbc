"""The hunk classes of a comparison: both sides of each differing file, from git.

Everything is read from the ReplayHub-owned scratch git dir through its
``git`` method (pinned environment, ``--git-dir``), never from a workspace.
Reads are bounded three ways, since a replay's files are the agent's: at most
:data:`hunks.MAX_FILES` files, :data:`hunks.MAX_BYTES` a side, and
:data:`READ_BUDGET` bytes in all. A file past any bound is substantive.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any, Protocol

from replayhub.git import hunks

# Bytes read per comparison, both sides of every file together. Parsing Python
# costs about a second per MiB, so this bounds the classifier's time too.
READ_BUDGET = 8 * 1024 * 1024

_ABSENT = "000000"
_REGULAR = frozenset({"100644", "100755"})
_HEADER_SLACK = 128


class GitDir(Protocol):
    """What this module needs of :class:`replayhub.git.scratch.Scratch`."""

    def git(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]: ...


@dataclass(frozen=True)
class Change:
    """One path whose entry differs between two trees (``git diff --raw``)."""

    path: str
    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str

    @property
    def comparable(self) -> bool:
        """Both sides are regular files of the same mode.

        A file on one side only, a mode change, a symlink (its blob is the
        target) or a submodule is substantive without reading anything.
        """
        return self.old_mode == self.new_mode and self.old_mode in _REGULAR


def hunk_classes(
    scratch: GitDir,
    original_tree: str,
    replay_tree: str,
    *,
    limit: int = hunks.MAX_FILES,
    blob_cap: int = hunks.MAX_BYTES,
    budget: int = READ_BUDGET,
) -> dict[str, str]:
    """Path → class for every path that differs between the two trees, sorted.

    Two git commands (``cat-file --batch-check`` for the sizes, then
    ``cat-file --batch`` for the blobs within the bounds) besides the listing.
    """
    changes = differing(scratch, original_tree, replay_tree)
    candidates = [n for n, c in enumerate(changes[:limit]) if c.comparable]
    sizes = _sizes(
        scratch,
        {sha for n in candidates for sha in (changes[n].old_sha, changes[n].new_sha)},
    )
    chosen: set[int] = set()
    wanted: set[str] = set()
    spent = 0
    for n in candidates:
        needed = {changes[n].old_sha, changes[n].new_sha} - wanted
        # A blob git does not list as one counts as too large: it is not read.
        cost = [sizes.get(sha, blob_cap + 1) for sha in needed]
        if any(size > blob_cap for size in cost):
            continue
        if spent + sum(cost) > budget:
            continue
        spent += sum(cost)
        wanted |= needed
        chosen.add(n)
    contents = _contents(scratch, {sha: sizes[sha] for sha in wanted})
    classes = hunks.classify_all(
        (
            changes[n].path,
            contents.get(changes[n].old_sha),
            contents.get(changes[n].new_sha),
        )
        for n in sorted(chosen)
    )
    for n, change in enumerate(changes):
        if n not in chosen:
            classes[change.path] = hunks.merge(
                classes.get(change.path), hunks.SUBSTANTIVE
            )
    return dict(sorted(classes.items()))


def differing(scratch: GitDir, old_tree: str, new_tree: str) -> list[Change]:
    """The entries that differ between two trees, without rename detection."""
    out = scratch.git(
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--raw",
        "--no-abbrev",
        "-z",
        old_tree,
        new_tree,
    ).stdout
    # -z: ":<old mode> <new mode> <old sha> <new sha> <status>\0<path>\0" each.
    fields = out.split(b"\0")
    changes = []
    for meta, raw_path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.lstrip(b":").decode("ascii").split()
        if len(parts) < 5:
            continue
        old_mode, new_mode, old_sha, new_sha = parts[:4]
        changes.append(
            Change(
                path=raw_path.decode("utf-8", errors="replace"),
                old_mode=old_mode,
                new_mode=new_mode,
                old_sha=old_sha,
                new_sha=new_sha,
            )
        )
    return changes


def _sizes(scratch: GitDir, shas: set[str]) -> dict[str, int]:
    """Size of each blob that exists; a missing object is left out."""
    if not shas:
        return {}
    out = scratch.git(
        "cat-file",
        "--batch-check",
        input="".join(f"{s}\n" for s in sorted(shas)).encode(),
    ).stdout
    sizes = {}
    for line in out.decode("ascii", errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "blob" and parts[2].isdigit():
            sizes[parts[0]] = int(parts[2])
    return sizes


def _contents(scratch: GitDir, sizes: dict[str, int]) -> dict[str, bytes]:
    """The blobs of known sizes, in one ``cat-file --batch`` capped by their sum."""
    if not sizes:
        return {}
    ordered = sorted(sizes)
    out = scratch.git(
        "cat-file",
        "--batch",
        input="".join(f"{sha}\n" for sha in ordered).encode(),
        output_cap=sum(sizes.values()) + _HEADER_SLACK * len(ordered),
    ).stdout
    # In the order asked, each object is "<sha> blob <size>\n<content>\n".
    contents = {}
    position = 0
    while position < len(out):
        end = out.index(b"\n", position)
        header = out[position:end].decode("ascii", errors="replace").split()
        position = end + 1
        if len(header) != 3 or not header[2].isdigit():
            continue  # "<sha> missing": nothing follows the header
        size = int(header[2])
        contents[header[0]] = out[position : position + size]
        position += size + 1
    return contents
