"""Allowed-path and test-path globs: relative to the repository root, ``**``
crossing directories. Pure: no git, no Django."""

from __future__ import annotations

import re
from functools import lru_cache


def glob_match(path: str, pattern: str) -> bool:
    """Whether a repository-relative path matches an allowed-path glob.

    Globs are anchored at the repository root. ``*``, ``?`` and ``[...]`` never
    cross ``/``; a ``**`` segment spans any number of directories (``src/**``:
    everything under ``src/``; ``**/*.py``: any ``.py`` at any depth, the root
    included; ``a/**/b``: ``a/b``, ``a/x/b``, ...). A trailing ``/`` means
    everything under that directory; a leading ``/`` or ``./`` is ignored.
    ``fnmatch`` lets ``*`` cross ``/`` and Python 3.11's ``PurePath.match``
    neither anchors nor understands ``**``, hence the translation here.
    """
    return compile_glob(pattern).fullmatch(path) is not None


@lru_cache(maxsize=1024)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """The regular expression for an allowed-path glob; ValueError if malformed."""
    if pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.lstrip("/")
    if not pattern:
        raise ValueError("an empty glob matches nothing")
    if pattern.endswith("/"):
        pattern += "**"
    segments = pattern.split("/")
    parts: list[str] = []
    for position, segment in enumerate(segments):
        last = position == len(segments) - 1
        if segment == "**":
            if not last:
                parts.append("(?:[^/]+/)*")
            elif position == 0:
                parts.append(".+")
            else:
                parts.append("[^/].*")
        else:
            parts.append(_translate_segment(segment))
            if not last:
                parts.append("/")
    try:
        return re.compile("".join(parts), re.DOTALL)
    except re.error as error:
        raise ValueError(f"malformed glob {pattern!r}: {error}") from None


def _translate_segment(segment: str) -> str:
    out: list[str] = []
    i, n = 0, len(segment)
    while i < n:
        char = segment[i]
        i += 1
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\" and i < n:
            out.append(re.escape(segment[i]))
            i += 1
        elif char == "[":
            end = i
            if end < n and segment[end] in "!^":
                end += 1
            if end < n and segment[end] == "]":
                end += 1
            end = segment.find("]", end)
            if end < 0:
                out.append(re.escape(char))
                continue
            body = segment[i:end]
            i = end + 1
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            escaped = "".join(c if c == "-" else re.escape(c) for c in body)
            # A bracket expression never matches the separator.
            out.append(f"[^/{escaped}]" if negate else f"(?!/)[{escaped}]")
        else:
            out.append(re.escape(char))
    return "".join(out)


# The globs of one list whose problems one refusal names.
MOST_SHOWN = 5


def glob_list_problem(value: object) -> str:
    """Why ``value`` is not a list of valid globs ("" when it is): each bad
    glob's problem, the first ``MOST_SHOWN`` of them."""
    if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
        return 'Give a list of globs, such as ["src/**", "tests/**"].'
    problems = []
    for glob in value:
        if problem := _outside_problem(glob):
            problems.append(f"{glob!r} {problem}")
            continue
        try:
            compile_glob(glob)
        except ValueError as error:
            problems.append(f"{glob!r} is not a valid glob: {error}")
    # Every glob's problem at once (the first few), not one per attempt.
    shown = problems[:MOST_SHOWN]
    if len(problems) > MOST_SHOWN:
        shown.append(f"and {len(problems) - MOST_SHOWN} more.")
    return " ".join(shown)


def _outside_problem(glob: str) -> str:
    """Why ``glob`` can never name a file of the repository ("" when it can):
    paths are relative to its top, inside it."""
    if glob.startswith("/"):
        return "is absolute: give a path from the repository's top, such as 'src/**'."
    if ".." in glob.split("/"):
        return "leaves the repository ('..'): paths stay inside it."
    for segment in glob.split("/"):
        if segment.count("[") > segment.count("]"):
            return "has a '[' that is never closed."
    return ""
