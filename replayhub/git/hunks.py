"""Classes of difference between two versions of one file, for the diff-of-diffs.

Pure functions over bytes. Both versions are untrusted (a replay's files are
whatever its agent wrote), so every input is capped and nothing here is worse
than linear in its size, apart from Python's own parser on a file under the cap.

For each file that differs between the original and the replay result tree, the
first rule that holds names its class:

``whitespace``
    The files are equal once each line's runs of whitespace are collapsed to
    one space, leading and trailing whitespace is dropped and blank lines are
    ignored: line endings (CRLF against LF), trailing spaces, tabs against
    spaces, re-indentation and re-wrapping of blank lines. Where indentation is
    syntax, it counts: in YAML and Makefiles the leading whitespace of each line
    is kept as it is, and Python (``.py``, ``.pyi``) is whitespace only when
    its syntax tree is also unchanged, docstrings included.
``python_equivalent``
    Python files that both parse and whose syntax trees
    (``ast.dump(..., include_attributes=False)``) are equal once module, class
    and function docstrings are dropped. Comments never reach the tree.
``reordered``
    The same multiset of non-blank lines, stripped (only trailing whitespace is
    stripped where indentation is syntax), in another order.
``substantive``
    Anything else: a file on one side only, binary content (a NUL byte),
    a side over :data:`MAX_BYTES`, text that is not UTF-8, Python that does not
    parse (or nests too deep to compare).

Whitespace inside string literals of other languages is collapsed like any
other, as ``git diff -b`` does; the classes are hints that let a reviewer skip
files, and the diff itself is always one click away.
"""

from __future__ import annotations

import ast
import warnings
from collections import Counter
from collections.abc import Iterable

WHITESPACE = "whitespace"
REORDERED = "reordered"
PYTHON_EQUIVALENT = "python_equivalent"
SUBSTANTIVE = "substantive"
CLASSES = (SUBSTANTIVE, WHITESPACE, PYTHON_EQUIVALENT, REORDERED)
NOISE = frozenset({WHITESPACE, REORDERED, PYTHON_EQUIVALENT})

# A side larger than this is substantive without being read: a hostile replay
# must not make the classifier slow (parsing 1 MiB of Python takes about a
# second).
MAX_BYTES = 1024 * 1024
# Files classified per comparison; any beyond are substantive.
MAX_FILES = 2000

_PYTHON_SUFFIXES = (".py", ".pyi")
_INDENTED_SUFFIXES = (".yaml", ".yml", ".mk")
_INDENTED_NAMES = frozenset({"Makefile", "makefile", "GNUmakefile"})


def classify(path: str, original: bytes | None, replay: bytes | None) -> str:
    """The class of the difference between two versions of the file at ``path``.

    ``None`` means the file does not exist on that side. Meant for files that
    differ: two equal texts come out as ``whitespace``. A change of file mode
    or type (executable bit, symlink) is not visible here; the caller decides
    those are substantive.
    """
    if original is None or replay is None:
        return SUBSTANTIVE
    if len(original) > MAX_BYTES or len(replay) > MAX_BYTES:
        return SUBSTANTIVE
    if b"\0" in original or b"\0" in replay:
        return SUBSTANTIVE
    try:
        old, new = original.decode("utf-8"), replay.decode("utf-8")
    except UnicodeDecodeError:
        return SUBSTANTIVE
    name = path.rpartition("/")[2]
    if name.endswith(_PYTHON_SUFFIXES):
        return _classify_python(old, new)
    indented = name in _INDENTED_NAMES or name.endswith(_INDENTED_SUFFIXES)
    if _collapsed(old, keep_indent=indented) == _collapsed(new, keep_indent=indented):
        return WHITESPACE
    if _reordered(old, new, keep_indent=indented):
        return REORDERED
    return SUBSTANTIVE


def classify_all(
    files: Iterable[tuple[str, bytes | None, bytes | None]],
    *,
    limit: int = MAX_FILES,
) -> dict[str, str]:
    """Classify ``(path, original, replay)`` triples; keys come out sorted.

    Only the first ``limit`` files are read; the rest are substantive. A path
    given twice is substantive unless both agree.
    """
    classes: dict[str, str] = {}
    for position, (path, original, replay) in enumerate(files):
        found = classify(path, original, replay) if position < limit else SUBSTANTIVE
        classes[path] = merge(classes.get(path), found)
    return dict(sorted(classes.items()))


def merge(previous: str | None, found: str) -> str:
    """One class for a path seen twice (two raw names can decode alike)."""
    if previous is None or previous == found:
        return found
    return SUBSTANTIVE


def count_substantive(classes: dict[str, str]) -> int:
    return sum(1 for found in classes.values() if found not in NOISE)


def _collapsed(text: str, *, keep_indent: bool) -> list[str]:
    lines = []
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        collapsed = " ".join(words)
        if keep_indent:
            collapsed = line[: len(line) - len(line.lstrip())] + collapsed
        lines.append(collapsed)
    return lines


def _stripped(text: str, *, keep_indent: bool) -> list[str]:
    lines = (
        line.rstrip() if keep_indent else line.strip() for line in text.splitlines()
    )
    return [line for line in lines if line]


def _reordered(old: str, new: str, *, keep_indent: bool) -> bool:
    before = _stripped(old, keep_indent=keep_indent)
    after = _stripped(new, keep_indent=keep_indent)
    # The same lines in the same order differ inside a line (whitespace within
    # a string literal, say): that is not a reordering.
    return before != after and Counter(before) == Counter(after)


def _classify_python(old: str, new: str) -> str:
    before, after = _parse(old), _parse(new)
    if before is None or after is None:
        return SUBSTANTIVE
    try:
        if _collapsed(old, keep_indent=False) == _collapsed(
            new, keep_indent=False
        ) and _dump(before) == _dump(after):
            return WHITESPACE
        if _dump(_without_docstrings(before)) == _dump(_without_docstrings(after)):
            return PYTHON_EQUIVALENT
    except RecursionError:
        # ast.dump recurses; a tree nested deeper than the interpreter allows
        # cannot be compared, so it is not called noise.
        return SUBSTANTIVE
    if _reordered(old, new, keep_indent=True):
        return REORDERED
    return SUBSTANTIVE


def _parse(source: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            # Invalid escape sequences and the like are the agent's to hear about.
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # MemoryError: CPython's parser reports a stack overflow on deeply
        # nested input (a long run of unary minus) as one.
        return None


def _dump(tree: ast.AST) -> str:
    return ast.dump(tree, include_attributes=False)


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _without_docstrings(tree: ast.Module) -> ast.Module:
    """``tree`` with each module, class and function docstring removed, in place."""
    # ast.walk is iterative, so a deep tree cannot overflow the stack here.
    for node in list(ast.walk(tree)):
        if not isinstance(node, _DOCUMENTED):
            continue
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:]
    return tree
