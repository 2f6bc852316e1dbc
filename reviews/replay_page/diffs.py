"""Unified diffs from git, split per file and numbered for display.

Pure functions over text. Everything here is untrusted agent output: it is only
ever split and classified, and the templates escape it on the way out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from replayhub.git import hunks

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_GIT_HEADER = re.compile(r"^diff --git (.+)$")

ADD = "add"
DEL = "del"
CONTEXT = "ctx"
HUNK = "hunk"
NOTE = "note"  # "\ No newline at end of file"


@dataclass(frozen=True)
class DiffLine:
    kind: str
    old: int | None
    new: int | None
    text: str


@dataclass
class FileDiff:
    """One file's part of a unified diff.

    ``path`` is the path after the change (the path before it for a deletion).
    ``header`` keeps git's extended header lines (mode, rename, index) as text.
    """

    path: str
    old_path: str
    status: str = "modified"  # added, deleted, renamed, modified
    binary: bool = False
    header: list[str] = field(default_factory=list)
    lines: list[DiffLine] = field(default_factory=list)
    additions: int = 0
    deletions: int = 0

    @property
    def size(self) -> int:
        """Lines to render: what decides whether a file is shown inline."""
        return len(self.lines)


def split_files(diff: str) -> list[FileDiff]:
    """Split ``git diff`` output into files at each ``diff --git`` header.

    Text before the first header (or a plain unified diff without any) becomes
    one file of its own, so nothing in the input is silently dropped. A diff
    cut short by a size cap parses up to where it stops.
    """
    files: list[FileDiff] = []
    current: FileDiff | None = None
    old_no = new_no = old_left = new_left = 0
    # Only "\n" ends a line: str.splitlines would also split inside a line at a
    # form feed or a lone carriage return the agent wrote into a file.
    for raw in diff.removesuffix("\n").split("\n") if diff else ():
        header = _GIT_HEADER.match(raw)
        if header:
            old_path, new_path = _header_paths(header.group(1))
            current = FileDiff(path=new_path, old_path=old_path)
            files.append(current)
            old_left = new_left = 0
            continue
        in_hunk = old_left > 0 or new_left > 0
        if current is None or (
            not in_hunk and raw.startswith("--- ") and current.lines
        ):
            # No git header: a plain unified diff, one ``---`` line per file.
            current = FileDiff(path="", old_path="")
            files.append(current)
        hunk = _HUNK.match(raw)
        if hunk:
            old_no, new_no = int(hunk.group(1)), int(hunk.group(3))
            old_left = int(hunk.group(2) or 1)
            new_left = int(hunk.group(4) or 1)
            current.lines.append(DiffLine(HUNK, None, None, raw))
            continue
        if raw.startswith("\\"):
            current.lines.append(DiffLine(NOTE, None, None, raw))
            continue
        if not in_hunk:
            _read_header_line(current, raw)
            continue
        if raw.startswith("+"):
            current.lines.append(DiffLine(ADD, None, new_no, raw[1:]))
            current.additions += 1
            new_no += 1
            new_left -= 1
        elif raw.startswith("-"):
            current.lines.append(DiffLine(DEL, old_no, None, raw[1:]))
            current.deletions += 1
            old_no += 1
            old_left -= 1
        else:
            # A context line starts with a space; an empty line is a context line
            # whose trailing space was stripped on the way.
            current.lines.append(DiffLine(CONTEXT, old_no, new_no, raw[1:]))
            old_no += 1
            new_no += 1
            old_left -= 1
            new_left -= 1
    for item in files:
        if not item.path:
            item.path = item.old_path
    return files


def _read_header_line(current: FileDiff, raw: str) -> None:
    if raw.startswith("--- "):
        path = _strip_prefix(raw[4:], "a/")
        if path != "/dev/null":
            current.old_path = path
        else:
            current.status = "added"
        if not current.path and path != "/dev/null":
            current.path = path
        return
    if raw.startswith("+++ "):
        path = _strip_prefix(raw[4:], "b/")
        if path == "/dev/null":
            current.status = "deleted"
            current.path = current.old_path
        else:
            current.path = path
        return
    if raw.startswith("new file mode"):
        current.status = "added"
    elif raw.startswith("deleted file mode"):
        current.status = "deleted"
    elif raw.startswith("rename from "):
        current.status = "renamed"
        current.old_path = _unquote(raw[len("rename from ") :])
    elif raw.startswith("rename to "):
        current.status = "renamed"
        current.path = _unquote(raw[len("rename to ") :])
    elif raw.startswith("Binary files ") or raw == "GIT binary patch":
        current.binary = True
    current.header.append(raw)


def _strip_prefix(path: str, prefix: str) -> str:
    # git appends a tab after a path containing spaces in ---/+++ lines.
    path = _unquote(path.rstrip("\t"))
    return path[len(prefix) :] if path.startswith(prefix) else path


def _header_paths(rest: str) -> tuple[str, str]:
    """The two paths of ``diff --git a/X b/Y``, quoted or not.

    Unquoted paths may contain spaces, so the split is only a first guess; the
    ``---``/``+++`` and rename lines that follow correct it.
    """
    if rest.startswith('"'):
        first, tail = _read_quoted(rest)
        second = tail.strip()
        second = _read_quoted(second)[0] if second.startswith('"') else second
    else:
        # For an unchanged name "a/P b/P" the midpoint split is exact.
        half = len(rest) // 2
        if rest[half : half + 1] == " " and rest[2:half] == rest[half + 3 :]:
            first, second = rest[:half], rest[half + 1 :]
        else:
            first, _, second = rest.partition(" b/")
            second = "b/" + second
        if second.startswith('"'):
            second = _read_quoted(second)[0]
    return _drop(first, "a/"), _drop(second, "b/")


def _drop(path: str, prefix: str) -> str:
    return path[len(prefix) :] if path.startswith(prefix) else path


def _unquote(path: str) -> str:
    return _read_quoted(path)[0] if path.startswith('"') else path


_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "a": "\a", "b": "\b"}


def _read_quoted(text: str) -> tuple[str, str]:
    """Decode one C-quoted git path at the start of ``text``; return it and the rest."""
    out = bytearray()
    i = 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return out.decode("utf-8", errors="replace"), text[i + 1 :]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "01234567" and re.fullmatch(r"[0-7]{3}", text[i + 1 : i + 4]):
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
            out += _ESCAPES.get(nxt, nxt).encode()
            i += 2
            continue
        out += ch.encode()
        i += 1
    return out.decode("utf-8", errors="replace"), ""


def pair_by_path(
    left: list[FileDiff], right: list[FileDiff]
) -> list[tuple[str, int | None, int | None]]:
    """Pair two changes' files by path for a side-by-side view.

    Returns ``(path, index in left, index in right)`` in the order the paths
    first appear (left first); a side that did not touch the path has None.
    """
    rows: dict[str, list[int | None]] = {}
    for index, item in enumerate(left):
        rows.setdefault(item.path, [None, None])[0] = index
    for index, item in enumerate(right):
        rows.setdefault(item.path, [None, None])[1] = index
    return [(path, pair[0], pair[1]) for path, pair in rows.items()]


# What a reviewer reads for each noise class of ``replayhub.git.hunks``, and its
# tooltip. Substantive files carry no badge: they are the ones to read.
HUNK_LABELS = {
    hunks.WHITESPACE: (
        "whitespace only",
        "Equal once whitespace, line endings and blank lines are ignored.",
    ),
    hunks.REORDERED: ("reordered lines", "The same lines in another order."),
    hunks.PYTHON_EQUIVALENT: (
        "same Python AST",
        "Same syntax tree: only comments, docstrings or layout differ.",
    ),
}


@dataclass(frozen=True)
class ShownFile:
    """A file of the diff-of-diffs with its hunk class ("" when unknown)."""

    index: int  # position in the whole diff, which loads the file on demand
    file: FileDiff
    hunk_class: str = ""
    label: str = ""
    title: str = ""


@dataclass(frozen=True)
class HunkView:
    """The diff-of-diffs' files to show, and the counts over every class.

    The counts cover every differing path that was classified, including any
    the stored diff lost to its size cap.
    """

    files: list[ShownFile]
    total: int
    substantive: int
    noise: int
    hidden: int


def hunk_view(
    files: list[FileDiff], classes: Mapping[str, str], *, hide_noise: bool
) -> HunkView:
    """Label each file by its path's class; leave noise out when asked.

    A file whose path has no class (a comparison stored before classes
    existed, a name that decoded differently) is always shown.
    """
    shown = []
    hidden = 0
    for index, item in enumerate(files):
        found = classes.get(item.path, "")
        if found in hunks.NOISE and hide_noise:
            hidden += 1
            continue
        label, title = HUNK_LABELS.get(found, ("", ""))
        shown.append(
            ShownFile(
                index=index,
                file=item,
                hunk_class=found if found in hunks.CLASSES else "",
                label=label,
                title=title,
            )
        )
    noise = sum(1 for found in classes.values() if found in hunks.NOISE)
    return HunkView(
        files=shown,
        total=len(classes),
        substantive=len(classes) - noise,
        noise=noise,
        hidden=hidden,
    )
