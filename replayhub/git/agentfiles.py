"""The agents' own files in a tree: chat logs, session state, caches.

Coding agents leave files of their own in a checkout (``.aider.chat.history.md``,
``.claude/``): not the change they made, and never the same twice. A project's
``ignored_paths`` name them. Both trees a replay compares are read with each
such path as it is at the base: the original's commit may hold its chat log,
the replay's checkout another, and neither makes the two differ. A path the
project's test paths name is never left out, so the test gate sees every test
file either tree has.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from replayhub.git.scratch import GitError, Scratch
from replayhub.lib.globs import glob_match


def left_out(path: str, ignored: Iterable[str], kept: Iterable[str] = ()) -> bool:
    """Whether ``path`` is an agent's own file: it matches an ignored glob and
    no kept one (the test paths)."""
    if not any(glob_match(path, g) for g in ignored if g):
        return False
    return not any(glob_match(path, g) for g in kept if g)


@dataclass
class AtBase:
    """A tree with the agents' files put back as the base has them."""

    tree: str
    # The paths put back (changed, added or removed against the base), sorted.
    paths: list[str] = field(default_factory=list)


def at_base(
    scratch: Scratch,
    *,
    tree: str,
    base: str,
    ignored: Iterable[str],
    kept: Iterable[str] = (),
) -> AtBase:
    """``tree`` (or a commit's tree) with every path :func:`left_out` as it is
    at ``base``: its entry restored where the base has one, removed where it
    has none. Only what differs from the base is read, so a tree that leaves
    the agents' files alone costs one ``diff-tree``. Raises ``GitError``.
    """
    tree = scratch.resolve_tree(tree)
    ignored = [g for g in ignored if g]
    if not ignored:
        return AtBase(tree)
    kept = [g for g in kept if g]
    base_tree = scratch.resolve_tree(base)
    raw = scratch.git(
        "diff-tree", "-r", "-z", "--no-renames", base_tree, tree
    ).stdout.split(b"\0")
    removals: list[bytes] = []
    restores: list[bytes] = []
    paths: list[str] = []
    # Raw records: ":<old mode> <new mode> <old sha> <new sha> <status>", then
    # the path; the old side is the base's entry.
    for meta, path in zip(raw[0::2], raw[1::2], strict=False):
        if not meta.startswith(b":"):
            raise GitError(f"git diff-tree printed an unexpected record {meta[:80]!r}")
        text = path.decode("utf-8", "surrogateescape")
        if not left_out(text, ignored, kept):
            continue
        old_mode, _, old_sha, _, _ = meta[1:].split(b" ")
        paths.append(text)
        if set(old_mode) == {ord("0")}:
            removals.append(b"0 " + b"0" * len(old_sha) + b"\t" + path + b"\0")
        else:
            restores.append(old_mode + b" " + old_sha + b"\t" + path + b"\0")
    if not paths:
        return AtBase(tree)
    index = scratch.root / f"at-base-{uuid.uuid4().hex}.index"
    try:
        scratch.git("read-tree", tree, index_file=index)
        # Removals first: a file restored where the tree has a directory of
        # the agent's files needs the directory gone.
        scratch.git(
            "update-index",
            "-z",
            "--index-info",
            index_file=index,
            input=b"".join(removals + restores),
        )
        put_back = scratch.git("write-tree", index_file=index).stdout.decode()
    finally:
        index.unlink(missing_ok=True)
    return AtBase(put_back.strip(), sorted(paths))
