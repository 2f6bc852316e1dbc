"""Token-set Jaccard similarity between two texts: cheap and deterministic.

A token is a run of characters that are neither Unicode whitespace nor Unicode
punctuation (general category ``P*``), lower-cased. The similarity of two texts
is the size of the intersection of their token sets over the size of the
union; a text without tokens (empty, or whitespace and punctuation only) is
similar to nothing, itself included: 0.0. No Django import.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache


@lru_cache(maxsize=4096)
def _separates(char: str) -> bool:
    return char.isspace() or unicodedata.category(char).startswith("P")


def tokens(text: str) -> frozenset[str]:
    """The lower-cased tokens of ``text``, as a set."""
    found: set[str] = set()
    # str.split() cuts on Unicode whitespace in C; a word of letters and
    # digits only (the usual case) holds no punctuation and is a token whole.
    for word in text.lower().split():
        if word.isalnum():
            found.add(word)
            continue
        current: list[str] = []
        for char in word:
            if _separates(char):
                if current:
                    found.add("".join(current))
                    current = []
            else:
                current.append(char)
        if current:
            found.add("".join(current))
    return frozenset(found)


def jaccard(left: str, right: str) -> float:
    """Shared tokens over all tokens of the two texts; 0.0 when either has none."""
    a, b = tokens(left), tokens(right)
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)
