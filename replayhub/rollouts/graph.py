"""A rollout's message graph as branches: each leaf's root-to-leaf path, in
leaf order. One branch is a linear conversation; more mean the context was
restarted (a compaction) or another conversation ran beside it (a subagent)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class _Linked(Protocol):
    @property
    def parent(self) -> int | None: ...


def leaves(nodes: Sequence[_Linked]) -> list[int]:
    """Indices of the nodes no node names as its parent, in index order."""
    has_child = {node.parent for node in nodes if node.parent is not None}
    return [i for i in range(len(nodes)) if i not in has_child]


def branches(nodes: Sequence[_Linked]) -> list[list[int]]:
    """Each leaf's path from its root, as node indices."""
    paths = []
    for leaf in leaves(nodes):
        path = []
        index: int | None = leaf
        while index is not None:
            path.append(index)
            index = nodes[index].parent
        path.reverse()
        paths.append(path)
    return paths
