"""Which paths are test paths, and which changed code could decide a test run itself.

A replay's change is judged by running the *original's* test files against it (a
reference tree), so the replay cannot rewrite the tests. Its non-test code still
runs during that test run, though, and could report its own success: exit 0 at
import after printing a passing summary, or write the JUnit report the test gate
reads. :func:`find_interference` looks for that statically. It is a tripwire, not
a proof: it never executes anything, reads each file once with bounded,
backtracking-safe patterns, and code that builds its exit dynamically gets past
it. Everything here is pure and stdlib-only.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from replayhub.lib.globs import glob_match

# Globs relative to the repository root; ``**`` crosses directories, so
# ``**/tests/**`` also covers ``tests/**`` at the root (see globs.glob_match).
DEFAULT_TEST_PATHS: tuple[str, ...] = (
    # Test directories at any depth: nested packages in a monorepo
    # (packages/api/tests/), Maven's src/test/, Jest's __tests__/, Go's testdata/
    # fixtures, and snapshot files a runner compares against.
    "**/tests/**",
    "**/test/**",
    "**/spec/**",
    "**/__tests__/**",
    "**/testdata/**",
    "**/__snapshots__/**",
    # Test files by name, wherever they live.
    "**/test_*.py",
    "**/*_test.py",
    "**/tests.py",
    "**/*_test.go",
    "**/*.test.*",
    "**/*.spec.*",
    # Python runner configuration: conftest.py runs inside pytest, and these
    # files choose plugins, options and which tests are collected. setup.cfg and
    # pyproject.toml are counted whole, although only a section configures the
    # runner: a reference tree then takes the original's copy, which may undo a
    # packaging change but can never let the replay reconfigure its own judge.
    # Nested copies count too, since pytest reads the ones nearest its arguments.
    "**/conftest.py",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/tox.ini",
    "**/setup.cfg",
    "**/pyproject.toml",
    "**/noxfile.py",
    # JavaScript runner configuration. package.json is counted whole for the same
    # reason as pyproject.toml: its "scripts" hold the test command itself. Vitest
    # falls back to vite.config.* when it has no config of its own.
    "**/package.json",
    "**/jest.config.*",
    "**/jest.setup.*",
    "**/vitest.config.*",
    "**/vitest.workspace.*",
    "**/vite.config.*",
    "**/.mocharc*",
    "**/karma.conf.*",
    # Build files that commonly define the test command (``make test``).
    "**/Makefile",
    "**/makefile",
    "**/GNUmakefile",
    "**/*.mk",
    "**/justfile",
    "**/Justfile",
)

# What find_interference reads of one file. Code files longer than this are
# reported as too large rather than half-checked: padding past the cap must not
# hide an exit. Data files are scanned up to the cap only, since they cannot run.
MAX_SCAN_CHARS = 2 * 1024 * 1024
MAX_HITS = 50
MAX_EXCERPT = 200
MAX_NAMED = 5

PROCESS_EXIT_AT_IMPORT = "process_exit_at_import"
UNPARSEABLE_PYTHON = "unparseable_python"
JUNIT_PATH = "junit_path"
RUNNER_SUMMARY = "runner_summary"
TOO_LARGE = "too_large"

KIND_TEXT = {
    PROCESS_EXIT_AT_IMPORT: "exits the process when loaded",
    UNPARSEABLE_PYTHON: "does not parse and calls a process exit",
    JUNIT_PATH: "names the JUnit report path",
    RUNNER_SUMMARY: "imitates a test runner's summary",
    TOO_LARGE: "is too large to examine in full",
}


def is_test_path(path: str, patterns: Sequence[str]) -> bool:
    """Whether ``path`` matches one of the globs; a malformed glob raises ValueError."""
    return any(glob_match(path, pattern) for pattern in patterns)


@dataclass(frozen=True)
class TestChanges:
    """Test files the replay added, changed and deleted relative to the original."""

    __test__ = False  # not a pytest test class, whatever the collection settings

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.added or self.changed or self.deleted)

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "changed": list(self.changed),
            "deleted": list(self.deleted),
        }

    def summary(self) -> str:
        if not self.any:
            return "no test file differs from the original's"
        parts: list[str] = []
        for verb, paths, tail in (
            ("deleted", self.deleted, ""),
            ("changed", self.changed, " the original has"),
            ("added", self.added, ""),
        ):
            if paths:
                noun = "" if parts else " test file" + "s" * (len(paths) > 1)
                parts.append(f"{verb} {len(paths)}{noun}{tail}")
        named = [*self.deleted, *self.changed, *self.added]
        listed = ", ".join(named[:MAX_NAMED]) + ", …" * (len(named) > MAX_NAMED)
        return f"the replay {_join(parts)} ({listed})"


def test_changes(
    original: Mapping[str, str], replay: Mapping[str, str], patterns: Sequence[str]
) -> TestChanges:
    """Compare two trees' test files, given as ``path -> blob sha``.

    Paths outside ``patterns`` are ignored, so whole-tree listings may be passed.
    """
    before = {p: sha for p, sha in original.items() if is_test_path(p, patterns)}
    after = {p: sha for p, sha in replay.items() if is_test_path(p, patterns)}
    return TestChanges(
        added=tuple(sorted(after.keys() - before.keys())),
        changed=tuple(
            sorted(p for p in after.keys() & before.keys() if after[p] != before[p])
        ),
        deleted=tuple(sorted(before.keys() - after.keys())),
    )


test_changes.__test__ = False  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Interference:
    """One finding: ``line`` is 1-based, ``excerpt`` the source around it."""

    path: str
    line: int
    kind: str
    excerpt: str


def interference_summary(hits: Sequence[Interference]) -> str:
    """One sentence naming at most five of ``hits``, for a verdict reason."""
    if not hits:
        return "No non-test file the replay changed could report the test run's result."
    named = [f"{h.path} line {h.line} {KIND_TEXT.get(h.kind, h.kind)}" for h in hits]
    if len(named) > MAX_NAMED:
        named = [*named[:MAX_NAMED], f"{len(hits) - MAX_NAMED} more"]
    return (
        "Non-test code the replay changed could report the test run's result "
        f"itself: {_join(named, sep='; ')}."
    )


def find_interference(
    files: Mapping[str, str], *, junit_variable: str = "REPLAYHUB_JUNIT_XML"
) -> list[Interference]:
    """Code in ``files`` (non-test path -> its new text) that could fake a test run.

    At most MAX_HITS hits, ordered by path, line and kind; one per kind and line.
    """
    variable = f"{re.escape(junit_variable)}|" if junit_variable else ""
    junit = re.compile(rf"{variable}(?i:\bjunit[\w.-]{{0,40}}\.xml\b)")
    hits: list[Interference] = []
    for path in sorted(files):
        found: dict[tuple[int, str], Interference] = {}
        for hit in _scan(path, files[path], junit):
            found.setdefault((hit.line, hit.kind), hit)
            if len(found) >= MAX_HITS:
                break
        hits.extend(sorted(found.values(), key=lambda h: (h.line, h.kind)))
        if len(hits) >= MAX_HITS:
            break
    return hits[:MAX_HITS]


def _join(parts: Sequence[str], sep: str = ", ") -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return f"{sep.join(parts[:-1])} and {parts[-1]}"


# --- one file ---------------------------------------------------------------------

_JS_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")
_PYTHON_SHEBANG = re.compile(r"#![^\n]{0,100}python")


def _scan(path: str, text: str, junit: re.Pattern[str]) -> Iterator[Interference]:
    name = path.rsplit("/", 1)[-1]
    python = name.endswith((".py", ".pyw")) or (
        "." not in name and _PYTHON_SHEBANG.match(text) is not None
    )
    code = python or name.endswith((*_JS_SUFFIXES, ".go"))
    if len(text) > MAX_SCAN_CHARS:
        text = text[:MAX_SCAN_CHARS]
        if code:  # padding past the cap must not hide an exit
            line = text.count("\n") + 1
            read = f"only the first {MAX_SCAN_CHARS} characters were read"
            yield Interference(path, line, TOO_LARGE, read)
    for offset, line in _first_per_line(junit, text):
        yield _hit(path, text, offset, JUNIT_PATH, line)
    if python:
        yield from _scan_python(path, text)
        return
    if name.endswith(_JS_SUFFIXES):
        for offset, line in _first_per_line(_JS_EXIT, text):
            yield _hit(path, text, offset, PROCESS_EXIT_AT_IMPORT, line)
    elif name.endswith(".go"):
        yield from _scan_go(path, text)
    for offset, line in _first_per_line(_SUMMARY, text):
        yield _hit(path, text, offset, RUNNER_SUMMARY, line)


def _first_per_line(
    pattern: re.Pattern[str], text: str, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, int]]:
    """``(offset, line)`` of the first match on each line that has one.

    Lines are counted from the start of ``text`` as matches are found. Skipping to
    the next line after a match keeps a line packed with matches from costing a
    count each.
    """
    end = len(text) if end is None else end
    line, counted, position = 1, 0, start
    while (match := pattern.search(text, position, end)) is not None:
        line += text.count("\n", counted, match.start())
        counted = match.start()
        yield match.start(), line
        position = text.find("\n", match.end(), end) + 1
        if position == 0:
            return


def _hit(
    path: str, text: str, offset: int, kind: str, line: int | None = None
) -> Interference:
    if line is None:
        line = text.count("\n", 0, offset) + 1
    half = MAX_EXCERPT // 2
    start = text.rfind("\n", max(0, offset - half), offset) + 1 or max(0, offset - half)
    end = text.find("\n", offset, start + MAX_EXCERPT)
    excerpt = text[start : start + MAX_EXCERPT if end < 0 else end].strip()
    return Interference(path, line, kind, excerpt)


# --- runner summaries -------------------------------------------------------------

# A count: digits (never entered mid-run, which keeps every search linear on a
# megabyte of digits) or a format placeholder: {n}, ${n}, %d.
_N = r"(?:(?<![\w.])\d+|\$?\{[^{}\n]{0,40}\}|%[-#0 +]{0,5}\d{0,5}[dis])"
_SECONDS = (
    r"(?:\d+(?:\.\d+)?|\$?\{[^{}\n]{0,40}\}|%[-#0 +]{0,5}\d{0,5}(?:\.\d{1,5})?[dfgs])"
    r"s\b"
)
_SUMMARY = re.compile(
    "|".join(
        (
            rf"= {_N} passed",  # pytest's closing bar: "==== 3 passed in 0.1s ===="
            rf"{_N} passed\b[^\n]{{0,120}}? in {_SECONDS}",  # "3 passed, 1 warning in"
            rf"\bRan {_N} tests?\b",  # unittest
            # go test, per package; at a line's start or a string's
            rf"(?:^|(?<=['\"`])|(?<=\\n))ok[ \t]+\S+[ \t]+(?:\(cached\)|{_SECONDS})",
            r"--- PASS: ",  # go test -v
            r"\btest result: ok\.",  # cargo test
            rf"\bTests:[ \t]+{_N} passed",  # jest
            rf"\bTest Files[ \t]+{_N} passed",  # vitest
            rf"{_N} passing \(",  # mocha
        )
    ),
    re.MULTILINE,
)
# unittest's closing "OK" line. Alone, "OK" is an everyday string (an HTTP reason,
# a health check), so it counts only inside a literal with other non-blank lines.
_UNITTEST_OK = re.compile(r"^OK(?: \([^)\n]{0,80}\))?$", re.MULTILINE)


def _summary_in_literal(value: str) -> re.Match[str] | None:
    if (match := _SUMMARY.search(value)) is not None:
        return match
    ok = _UNITTEST_OK.search(value)
    return ok if ok and value.replace(ok.group(), "", 1).strip() else None


# --- JavaScript and Go ------------------------------------------------------------

# Top-level scope cannot be told without a JS parser, so any exit call counts.
_JS_EXIT = re.compile(
    r"\bprocess\s*(?:\.\s*(?:exit|reallyExit)|\[\s*(['\"`])(?:exit|reallyExit)\1\s*\])"
    r"\s*\("
)
_GO_INIT = re.compile(r"^func[ \t]+init[ \t]*\([ \t]*\)[ \t]*\{", re.MULTILINE)
_GO_EXIT = re.compile(r"\b\w+\s*\.\s*Exit\s*\(")  # os.Exit, syscall.Exit, aliases
# Comments, strings and runes are consumed whole, unterminated ones to the end of
# their line or of the text, so braces inside them never count and no token is
# ever scanned twice.
_GO_TOKEN = re.compile(
    r"//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)|`[^`]*`?|[{}]"
    r"|\"[^\"\\\n]*(?:\\.[^\"\\\n]*)*\"?|'[^'\\\n]*(?:\\.[^'\\\n]*)*'?"
)


def _scan_go(path: str, text: str) -> Iterator[Interference]:
    position = 0
    while (init := _GO_INIT.search(text, position)) is not None:
        end = _go_block_end(text, init.end())
        for offset, line in _first_per_line(_GO_EXIT, text, init.end(), end):
            yield _hit(path, text, offset, PROCESS_EXIT_AT_IMPORT, line)
        position = end


def _go_block_end(text: str, position: int) -> int:
    """The offset of the brace closing the block opened just before ``position``."""
    depth = 1
    for token in _GO_TOKEN.finditer(text, position):
        if token.group() in "{}":
            depth += 1 if token.group() == "{" else -1
            if depth == 0:
                return token.start()
    return len(text)


# --- Python -----------------------------------------------------------------------

# ast.parse takes seconds and hundreds of MB per MB of dense code; a longer module
# is only searched for the words of an exit.
MAX_PARSE_CHARS = 256 * 1024
_EXITS = frozenset({"os._exit", "sys.exit", "builtins.exit", "builtins.quit"})
_BUILTINS = frozenset({"exit", "quit", "SystemExit", "getattr", "__import__"})
_STAR_NAMES = {"os": ("_exit", "kill", "getpid"), "sys": ("exit",)}
_TEXTUAL_EXIT = re.compile(r"\b(?:_exit|exit|quit|SystemExit)\b|\bkill\s*\(")
_FunctionDef = ast.FunctionDef | ast.AsyncFunctionDef


def _scan_python(path: str, text: str) -> Iterator[Interference]:
    tree, kind = None, TOO_LARGE
    if len(text) <= MAX_PARSE_CHARS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escapes and the like
                tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            kind = UNPARSEABLE_PYTHON
    if tree is None:
        if (match := _TEXTUAL_EXIT.search(text)) is not None:
            yield _hit(path, text, match.start(), kind)
        for offset, line in _first_per_line(_SUMMARY, text):
            yield _hit(path, text, offset, RUNNER_SUMMARY, line)
        return
    lines = text.split("\n")
    for kind, found in (
        (PROCESS_EXIT_AT_IMPORT, _ImportTime(tree).exits()),
        (RUNNER_SUMMARY, _summaries(tree)),
    ):
        first: dict[int, int] = {}
        for line, column in sorted(found):
            first.setdefault(line, column)
        for line, column in list(first.items())[:MAX_HITS]:
            source = lines[line - 1] if line <= len(lines) else ""
            start = max(0, min(column, len(source) - MAX_EXCERPT))
            excerpt = source[start : start + MAX_EXCERPT].strip()
            yield Interference(path, line, kind, excerpt)


def _summaries(tree: ast.Module) -> Iterator[tuple[int, int]]:
    """``(line, column)`` of string literals that read like a runner's summary."""
    in_fstring: set[int] = set()
    for node in ast.walk(tree):  # iterative: a deep tree cannot exhaust the stack
        if isinstance(node, ast.JoinedStr):
            # Each interpolation stands in as a count: f"{n} passed in {t:.2f}s".
            value = "".join(
                str(part.value) if isinstance(part, ast.Constant) else "{}"
                for part in node.values
            )
            in_fstring.update(id(part) for part in node.values)
        elif isinstance(node, ast.Constant) and id(node) not in in_fstring:
            if isinstance(node.value, bytes):
                value = node.value.decode("latin-1")
            elif isinstance(node.value, str):
                value = node.value
            else:
                continue
        else:
            continue
        if (match := _summary_in_literal(value)) is not None:
            end_line = node.end_lineno or node.lineno
            if end_line == node.lineno:
                yield node.lineno, node.col_offset
            else:
                line = node.lineno + value.count("\n", 0, match.start())
                yield min(line, end_line), 0


class _ImportTime:
    """Process exits that run while a module is imported, seen through static aliases.

    Import time is everything outside function and lambda bodies and outside an
    ``if __name__ == "__main__":`` block: module-level ``if``/``try``/``with``/
    ``for`` blocks, class bodies, decorators and default values all run then. A
    call then to a module-level function that exits (directly or through other
    module-level functions) counts, and so does an exit registered with
    ``atexit``; methods reached by instantiating a class are not followed. An exit
    with a constant failure status (``sys.exit(1)``, ``sys.exit("needs X")``)
    cannot report success and is left alone.
    """

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.names: dict[str, str] = {}  # local name -> what it was imported as
        self.exiting: set[str] = set()
        assignments: list[ast.Assign] = []
        for node in ast.walk(tree):  # imports anywhere: an over-approximation
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".", 1)[0]
                    self.names[alias.asname or top] = (
                        alias.asname and alias.name
                    ) or top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    star = alias.name == "*"
                    for name in _STAR_NAMES.get(node.module, ()) if star else ():
                        self.names[name] = f"{node.module}.{name}"
                    if not star:
                        local = alias.asname or alias.name
                        self.names[local] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Assign):
                assignments.append(node)
        methods = {
            id(statement)
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            for statement in node.body
        }
        defined = [
            node
            for node in _import_time_nodes(tree)
            if isinstance(node, _FunctionDef | ast.ClassDef) and id(node) not in methods
        ]
        self.defined = {node.name for node in defined}  # these shadow builtins
        for _ in range(2):  # two rounds settle chains such as e = sys.exit; f = e
            for assign in assignments:
                if (resolved := self._resolve(assign.value)) is not None:
                    for target in assign.targets:
                        if isinstance(target, ast.Name):
                            self.names[target.id] = resolved
        self._find_exiting([n for n in defined if isinstance(n, _FunctionDef)])

    def exits(self) -> Iterator[tuple[int, int]]:
        for node in _import_time_nodes(self.tree):
            if isinstance(node, _FunctionDef):
                for decorator in node.decorator_list:
                    applied = self._resolve(decorator)
                    if (
                        applied in _EXITS
                        or (applied == "atexit.register" and node.name in self.exiting)
                        or (
                            isinstance(decorator, ast.Name)
                            and decorator.id in self.exiting
                        )
                    ):
                        yield decorator.lineno, decorator.col_offset
            elif self._exits_here(node, follow_calls=True):
                yield getattr(node, "lineno", 0), getattr(node, "col_offset", 0)

    def _find_exiting(
        self, functions: list[ast.FunctionDef | ast.AsyncFunctionDef]
    ) -> None:
        callers: dict[str, set[str]] = {}
        for function in functions:
            for node in _walk_all(function.body):
                if self._exits_here(node, follow_calls=False):
                    self.exiting.add(function.name)
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    callers.setdefault(node.func.id, set()).add(function.name)
        pending = list(self.exiting)
        while pending:  # whatever calls an exiting function exits too
            for caller in callers.pop(pending.pop(), set()) - self.exiting:
                self.exiting.add(caller)
                pending.append(caller)

    def _exits_here(self, node: ast.AST, *, follow_calls: bool) -> bool:
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            failure = isinstance(node.exc, ast.Call) and _fails(node.exc)
            return self._resolve(raised) == "builtins.SystemExit" and not failure
        if not isinstance(node, ast.Call):
            return False
        called = self._resolve(node.func)
        if called in _EXITS:
            return not _fails(node)
        if called == "os.kill" and node.args:
            target = node.args[0]
            if isinstance(target, ast.Constant) and target.value == 0:
                return True  # signals the process group, this process included
            getpid = isinstance(target, ast.Call) and self._resolve(target.func)
            return getpid == "os.getpid"
        if called == "atexit.register" and node.args:
            # An exit run at interpreter exit replaces the runner's exit status
            # after the runner has printed its real result.
            handler = node.args[0]
            if isinstance(handler, ast.Lambda):
                inner = ast.walk(handler.body)
                return any(self._exits_here(n, follow_calls=True) for n in inner)
            return self._resolve(handler) in _EXITS or (
                isinstance(handler, ast.Name) and handler.id in self.exiting
            )
        name = node.func.id if isinstance(node.func, ast.Name) else None
        return follow_calls and name in self.exiting

    def _resolve(self, node: ast.AST, depth: int = 0) -> str | None:
        """The dotted name an expression statically refers to, if it can be told."""
        if depth > 20:
            return None
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.names[node.id]
            if node.id in _BUILTINS and node.id not in self.defined:
                return f"builtins.{node.id}"
        elif isinstance(node, ast.Attribute):
            base = self._resolve(node.value, depth + 1)
            return f"{base}.{node.attr}" if base else None
        elif isinstance(node, ast.Call) and node.args:
            # getattr(sys, "exit"), __import__("os"), importlib.import_module("os")
            called = self._resolve(node.func, depth + 1)
            last = node.args[-1]
            if not (isinstance(last, ast.Constant) and isinstance(last.value, str)):
                return None
            if called == "builtins.getattr" and len(node.args) == 2:
                base = self._resolve(node.args[0], depth + 1)
                return f"{base}.{last.value}" if base else None
            if called in ("builtins.__import__", "importlib.import_module"):
                return last.value
        return None


def _fails(call: ast.Call) -> bool:
    """Whether an exit call's status is a constant failure: 1, "message"."""
    status = call.args[0] if call.args else None
    return isinstance(status, ast.Constant) and bool(status.value)


def _is_main_guard(test: ast.expr, op: type[ast.cmpop]) -> bool:
    """``__name__ == "__main__"`` (op Eq) or ``!=`` (op NotEq), either way round."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    sides = (test.left, test.comparators[0])
    return (
        isinstance(test.ops[0], op)
        and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
        and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    )


def _import_time_nodes(tree: ast.Module) -> Iterator[ast.AST]:
    """Every node evaluated while the module is imported, iteratively.

    Function and lambda nodes are yielded with their decorators and defaults, not
    their bodies; a ``__main__`` block is left out.
    """
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _FunctionDef | ast.Lambda):
            stack.extend(node.args.defaults)
            stack.extend(d for d in node.args.kw_defaults if d is not None)
            if isinstance(node, _FunctionDef):
                stack.extend(node.decorator_list)
        elif isinstance(node, ast.If) and _is_main_guard(node.test, ast.Eq):
            stack.extend(node.orelse)
        elif isinstance(node, ast.If) and _is_main_guard(node.test, ast.NotEq):
            stack.extend(node.body)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _walk_all(body: list[ast.stmt]) -> Iterator[ast.AST]:
    for statement in body:
        yield from ast.walk(statement)
