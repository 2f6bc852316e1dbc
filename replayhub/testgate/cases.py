"""Which tests ran and how each one ended, in the test runner's own words.

The test gate compares a replay with its original test by test, reading a JUnit
XML report or the verbose output of pytest, unittest (and Django's runner), go
test, cargo test, jest or vitest. All of it comes from inside the sandbox and is
untrusted: the parsers are linear in the size of their input, never raise on
odd input, and keep at most ``MAX_CASES`` tests.

Outcomes are ``passed``, ``failed``, ``error`` or ``skipped``. An expected
failure counts as passed (pytest's XFAIL and XPASS, unittest's "expected
failure"), as it does for the runner's exit status; an unexpected success counts
as failed. Ids are comparable only between reports of the same kind: a JUnit id
and an id read from output name the same test differently.

When a report names a test more than once (a rerun, a teardown error after a
pass, pytest's short summary after its ``-v`` lines), the last outcome wins and
the test keeps the place where it was first named.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from replayhub.testgate.summary import MAX_JUNIT_BYTES, read_junit

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
FAILING = frozenset({FAILED, ERROR})

# Beyond this many distinct tests, new ids are ignored (the outcomes of those
# already kept are still updated), so hostile output cannot exhaust memory.
MAX_CASES = 50_000
MAX_MESSAGE = 2_000
# No runner writes a test line this long; longer lines are skipped unread. Ids
# longer than MAX_ID are dropped, not truncated, so two can never merge.
MAX_LINE = 4_096
MAX_ID = 1_024


@dataclass(frozen=True, slots=True)
class TestCase:
    __test__ = False  # not a pytest test class, whatever the collection rules

    id: str
    outcome: str  # "passed" | "failed" | "skipped" | "error"
    duration_s: float | None = None
    message: str = ""  # a failure's excerpt, at most MAX_MESSAGE characters


class _Cases:
    """Cases by id in first-seen order; the last report of an id wins."""

    def __init__(self) -> None:
        self.by_id: dict[str, TestCase] = {}
        self.seen = False  # whether any test was named, kept or not

    def add(
        self, id: str, outcome: str, duration: float | None = None, message: str = ""
    ) -> bool:
        self.seen = True
        if not id or len(id) > MAX_ID:
            return False
        if id not in self.by_id and len(self.by_id) >= MAX_CASES:
            return False
        message = message[:MAX_MESSAGE].strip() if outcome in FAILING else ""
        self.by_id[id] = TestCase(id, outcome, duration, message)
        return True

    def note(self, id: str, message: str) -> None:
        """Attach the excerpt of a failure reported after the test's outcome."""
        case = self.by_id.get(id)
        message = message[:MAX_MESSAGE].strip()
        if case is not None and case.outcome in FAILING and message:
            self.by_id[id] = TestCase(id, case.outcome, case.duration_s, message)


# JUnit XML


def parse_junit_cases(
    source: str | os.PathLike[str] | bytes, max_bytes: int = MAX_JUNIT_BYTES
) -> list[TestCase] | None:
    """The tests of a JUnit XML report, with their outcomes.

    ``source`` is read, and refused (None), exactly as by testsummary.parse_junit.
    A case's id is ``classname::name``; when ``classname`` is empty the case's
    ``file`` stands in for it, and when both are empty the id is the bare
    ``name`` (each part stripped of surrounding whitespace). A case with no name
    is dropped. The outcome is ``failed`` with a ``<failure>`` child, else
    ``error`` with an ``<error>``, else ``skipped`` with a ``<skipped>`` (or
    googletest's ``status="notrun"``), else ``passed``; pytest writes xfail as
    skipped. The message is the failure's ``message`` attribute, or its text.
    """
    root = read_junit(source, max_bytes)
    if root is None or _local_name(root.tag) not in {"testsuites", "testsuite"}:
        return None
    cases = _Cases()
    for element in root.iter():
        name = (element.get("name") or "").strip()
        if _local_name(element.tag) != "testcase" or not name:
            continue
        prefix = (element.get("classname") or "").strip()
        prefix = prefix or (element.get("file") or "").strip()
        children = {_local_name(child.tag): child for child in element}
        if element.get("status") == "notrun":
            children.setdefault("skipped", element)
        outcome = next((o for tag, o in _JUNIT_OUTCOMES if tag in children), PASSED)
        report = children.get("failure", children.get("error"))
        message = "" if report is None else report.get("message") or report.text or ""
        duration = _seconds(element.get("time") or "")
        cases.add(f"{prefix}::{name}" if prefix else name, outcome, duration, message)
    return list(cases.by_id.values())


def _local_name(tag: object) -> str:
    # Comments and processing instructions have a function as their tag.
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


_JUNIT_OUTCOMES = (("failure", FAILED), ("error", ERROR), ("skipped", SKIPPED))
_SECONDS = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,12})?")


def _seconds(text: str) -> float | None:
    # float() would also take "nan", "inf", "1e999" and "1_0".
    text = text.strip()
    return float(text) if _SECONDS.fullmatch(text) else None


# Verbose output


def parse_output_cases(text: str) -> list[TestCase] | None:
    """The tests named in a test run's verbose output, with their outcomes.

    Ids: pytest's node id (``-v``, ``-rA``, pytest-xdist); ``pkg.mod.Class.test``
    for unittest ``-v``, alike from Python 3.10 and 3.11+ (a failed subtest fails
    its test); ``package::TestX/sub`` for ``go test -v`` (the bare name without
    the package's ``ok``/``FAIL`` line); ``binary/src/lib.rs::mod::test`` and
    ``crate/doc::...`` for cargo test (the bare name before any ``Running``
    line); ``file > describe > test`` for jest ``--verbose``, and the same as
    vitest ``--reporter=verbose`` prints it. None when no runner's test line is
    found, so a summary without ids is told apart from a run of no tests
    (``[]``, from lines such as ``collected 0 items`` or ``running 0 tests``).
    """
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    reader = _OutputReader(text)
    start, size = 0, len(text)
    while start < size:
        if reader.block is not None:
            # A failure's report: a bounded prefix is read, the rest jumped over.
            found = reader.block[0].search(text, start)
            stop = size if found is None else found.start()
            reader.close_block(text[start : min(stop, start + _BLOCK_READ)])
            start = stop
            continue
        if reader.jest_file is None and reader.pending is None and not reader.rule:
            # Outside a runner's block only lines of the shapes in _CANDIDATE
            # matter: the regex engine skips the rest without any Python work.
            found = _CANDIDATE.search(text, start)
            if found is None:
                break
            start = found.start()
        elif (blank := _BLANKS.match(text, start)) is not None:
            start = blank.end()
            continue
        else:
            found = None
        end = text.find("\n", start)
        end = size if end < 0 else end
        if end - start <= MAX_LINE:
            line = text[start:end].rstrip()
            redraw = line.rfind("\r")
            if redraw >= 0:
                # A carriage return redraws the line: the terminal shows the end.
                line, found = line[redraw + 1 :], None
            reader.feed(line, found, start + max(redraw, 0))
        start = end + 1
    reader.flush_go("")
    return list(reader.cases.by_id.values()) if reader.cases.seen else None


# testsummary's pattern, plus the nF escapes (``ESC ( B``) that tput sgr0 and
# libtest's colours emit. Disjoint character classes keep the substitution linear.
_ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*\x07?|[ -/]+[0-~]|[@-Z\\-_])"
)
_BLANKS = re.compile(r"(?:[ \t\r]*\n)+")
# The line shapes each runner's parser reads, told apart by the group's name.
# Every alternative starts at a line start, and its quantifiers are possessive
# or stop at the line's end, so a search is linear in the text.
_PYTEST = r"(?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)"
_UNITTEST = r"\ \.\.\.\ (?:ok|FAIL|ERROR|skipped|expected\ failure|unexpected\ success)"
_CANDIDATE = re.compile(
    rf"""(?:^|\r)[ \t]*+(?=[\w\[=\-\u2713\u221a\u00d7\u2193\u25a1])(?:
    (?P<pytest>[^\s:]*+::[^\n]*?\ {_PYTEST}\b
      |(?:\[gw[0-9]++\]\ \[[^\]\n]*+\]\ )?{_PYTEST}\ [^\s:]*+(?:::|(?<=\.py)(?!\S)))
    |(?P<unittest>[\w.]++\ \([\w.]++\)(?:[^\n]*?{_UNITTEST}
      |\r?\n[^\n]*?{_UNITTEST}|[^\n]*?\ \.\.\.\ [^\n]*+\n[ \t]*+(?:ok|FAIL|ERROR)\r?$))
    |(?P<cargo>test\ [^\n]*?\ \.\.\.\ (?:ok|FAILED|ignored)|----\ [^\n]*?\ stdout\ ----
      |Running\ [^\n]*?[/\\]deps[/\\]|Doc-tests\ \S++\r?$)
    |(?P<go>---\ (?:PASS|FAIL|SKIP):\ \S|===\ (?:RUN|NAME|CONT)\ |ok\ \ \t|FAIL\t)
    |(?P<jest>(?:PASS|FAIL)\ [^\n]*+\n(?:[ \t]*+\r?\n)*+\ \ )
    |(?P<vitest>[\u2713\u221a\u00d7\u2193\u25a1]\ [^\n]*?\ >\ )
    |(?P<rule>={{20}})
    |(?P<none>running\ 0\ tests|collected\ 0\ items|Ran\ 0\ tests
      |testing:\ warning:\ no\ tests|No\ test(?:s|\ files)\ found))""",
    re.MULTILINE | re.VERBOSE,
)
_NO_TESTS = re.compile(
    r"running 0 tests|collected 0 items|Ran 0 tests in [0-9.]{1,20}s"
    r"|testing: warning: no tests to run|No tests found.*|No test files found.*"
)
# Where each kind of failure report ends. unittest's report ends at the next
# report's ===== rule, or at the ----- rule over "Ran N tests".
_UNITTEST_END = re.compile(r"^(?:={20}|-{20,}\r?\n(?:Ran |={20})|Ran )", re.M)
_CARGO_END = re.compile(r"^(?:---- |test result: |(?:failures|successes):\r?$)", re.M)
_GO_END = re.compile(r"^(?:[ \t]*(?:=== |--- )|ok  \t|FAIL\t|(?:PASS|FAIL)\r?$)", re.M)
_JEST_END = re.compile(r"^(?: ?[^\s]|[ \t]*\u25cf )", re.M)  # U+25CF, a dot
_VITEST_END = re.compile(r"^(?![ \t]*\u2192 )", re.M)  # U+2192, an arrow
_BLOCK_READ = 16 * MAX_MESSAGE
_BLOCK_LINES = 400

_PYTEST_WORDS = {"PASSED": PASSED, "XFAIL": PASSED, "XPASS": PASSED, "SKIPPED": SKIPPED}
_PYTEST_WORDS |= {"FAILED": FAILED, "ERROR": ERROR}
_UNITTEST_TEST = re.compile(r"([\w.]{1,500}) \(([\w.]{1,1000})\)( \(.*\))?")
_UNITTEST_WORDS = {"ok": PASSED, "FAIL": FAILED, "ERROR": ERROR, "skipped": SKIPPED}
_UNITTEST_WORDS |= {"expected failure": PASSED, "unexpected success": FAILED}
_UNITTEST_REPORT = {"FAIL": FAILED, "ERROR": ERROR, "UNEXPECTED SUCCESS": FAILED}
_CARGO_WORDS = {"ok": PASSED, "FAILED": FAILED, "ignored": SKIPPED}
_CARGO_SUFFIXES = (" - should panic", " - compile fail", " - compile")
_CARGO_BINARY_HASH = re.compile(r"-[0-9a-f]{16}$")
_GO_WORDS = {"PASS": PASSED, "FAIL": FAILED, "SKIP": SKIPPED}
_GO_DURATION = re.compile(r"\(([0-9]{1,9}\.[0-9]{1,9})s\)")
# Check marks (U+2713, and U+221A on Windows) and crosses (U+2715, and U+00D7 on
# Windows and in vitest); jest's circle and pencil (U+25CB, U+270E), followed by
# "skipped " and "todo ", and vitest's arrow and square (U+2193, U+25A1) mark
# skipped and todo tests.
_MARKS = {"\u2713": PASSED, "\u221a": PASSED, "\u00d7": FAILED}
_JEST_MARKS = {**_MARKS, "\u2715": FAILED, "\u25cb": SKIPPED, "\u270e": SKIPPED}
_JEST_WORDS = {"\u25cb": "skipped ", "\u270e": "todo "}
_JEST_SEPARATOR = " \u203a "  # how jest joins titles in its failure reports
_JEST_DURATION = re.compile(r" \(([0-9]{1,9}) ms\)$")
_JEST_HEADER_TIME = re.compile(r" \([0-9.]{1,12} m?s\)$")
_JEST_DEPTH = 64
_VITEST_MARKS = {**_MARKS, "\u2193": SKIPPED, "\u25a1": SKIPPED}
_VITEST_SUFFIX = re.compile(
    r" (?:[0-9]{1,12} MB heap used|\(re(?:try|peat) x[0-9]{1,9}\))$"
)
_VITEST_DURATION = re.compile(r" {1,2}([0-9]{1,9}(?:\.[0-9]{1,3})?)(ms|s)$")


def _search_tail(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    # Searching only the tail keeps a long line from being scanned from every start.
    return pattern.search(text, max(0, len(text) - 64))


def _excerpt(kind: str, chunk: str) -> str:
    """The message in the first lines of a failure's report."""
    parts: list[str] = []
    size = 0
    for raw in chunk.split("\n", _BLOCK_LINES)[:_BLOCK_LINES]:
        line = raw.rstrip().rpartition("\r")[2]
        text, indented = line.strip(), line[:1].isspace()
        if text == "stack backtrace:" or (kind == "jest" and text.startswith("at ")):
            break  # the stack under the message
        if kind == "unittest" and (
            indented or text.startswith("Traceback (") or not text.strip("-")
        ):
            continue  # a traceback's frames and code lines, and the rule above it
        if (kind == "go" and not indented) or text.startswith("note: run with `"):
            continue  # a go test's own prints; cargo's backtrace hint
        if text:
            parts.append(text.removeprefix("\u2192 "))
            size += len(text) + 1
        if size >= MAX_MESSAGE:
            break
    return "\n".join(parts)


class _OutputReader:
    """Every runner's parser, fed the lines of one output in turn."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.cases = _Cases()
        # An open failure report: where it ends, its kind, whose it is.
        self.block: tuple[re.Pattern[str], str, str | None] | None = None
        self.rule = False  # unittest: the last line was a ===== rule
        self.pending: str | None = None  # unittest: a test awaiting its outcome
        self.cargo_target = ""
        self.go_cases: dict[str, tuple[str, float | None]] = {}
        self.go_logs: dict[str, str] = {}
        self.jest_file: str | None = None
        self.jest_stack: list[tuple[int, str, int]] = []  # indent, title, id size
        self.jest_titles: dict[str, str] = {}  # failed tests, by jest's full title

    def close_block(self, chunk: str) -> None:
        assert self.block is not None
        _, kind, target = self.block
        self.block = None
        if kind == "go" and target is not None and chunk:
            # A test's log comes in pieces when parallel tests take turns.
            before = self.go_logs.get(target, "")
            if len(before) < MAX_MESSAGE and (before or len(self.go_logs) < MAX_CASES):
                self.go_logs[target] = f"{before}\n{_excerpt(kind, chunk)}".strip()
        elif target is not None and chunk:
            self.cases.note(target, _excerpt(kind, chunk))

    def feed(self, line: str, found: re.Match[str] | None, at: int) -> None:
        """Read one line, whose _CANDIDATE match is ``found`` or is made at ``at``."""
        stripped = line.lstrip()
        if not stripped:
            return
        indent = len(line) - len(stripped)
        rule, self.rule = self.rule, False
        pending, self.pending = self.pending, None
        if rule and self.unittest_report(stripped):
            return
        if pending is not None and self.read_unittest(line, stripped, 0, pending):
            return
        if self.jest_file is not None and self.jest(stripped, indent):
            return
        found = found or _CANDIDATE.match(self.text, at)
        kind = None if found is None else found.lastgroup
        if kind == "rule":
            self.rule = not stripped.strip("=")
        elif kind == "none":
            self.cases.seen = self.cases.seen or bool(_NO_TESTS.fullmatch(stripped))
        elif kind is not None:  # the name of one of the read_ methods below
            getattr(self, f"read_{kind}")(line, stripped, indent)

    def read_pytest(self, line: str, stripped: str, indent: int) -> None:
        """``id PASSED [ 50%]``, ``FAILED id - message``, ``[gw0] [ 50%] PASSED id``."""
        if stripped.startswith("[gw"):
            stripped = stripped.partition("] ")[2].partition("] ")[2]
        word, _, rest = stripped.partition(" ")
        if word in _PYTEST_WORDS:
            node, rest = _split_node_id(rest)
            # A collection error names the file alone.
            if "::" in node or (word == "ERROR" and node.endswith(".py")):
                message = rest[3:] if rest.startswith(" - ") else ""
                self.cases.add(node, _PYTEST_WORDS[word], None, message)
            return
        node, rest = _split_node_id(stripped)
        word = rest.lstrip(" ").partition(" ")[0]
        if "::" in node and rest.startswith(" ") and word in _PYTEST_WORDS:
            self.cases.add(node, _PYTEST_WORDS[word])

    def read_unittest(
        self, line: str, stripped: str, indent: int, pending: str | None = None
    ) -> bool:
        """``test_a (pkg.mod.Class.test_a) ... ok``, or its 3.10 form.

        A test with a docstring prints the docstring's first line, then
        `` ... ok``, on the line after its name; 3.10 prints nothing for a test
        whose subtest failed, so the next test follows on the same line.
        """
        parts = (stripped + " ").split(" ... ")
        current = _unittest_id(parts[0].rstrip())
        if current is not None:
            test, subtest = current
        elif pending is None:
            return False
        elif len(parts) == 1:  # the outcome alone, after the test's own output
            outcome = _unittest_outcome(stripped)
            if outcome is not None:
                self.cases.add(pending, outcome)
            return outcome is not None
        else:  # the docstring's first line, then the outcome
            test, subtest, parts = pending, False, parts[:1] + parts[-1:]
        for part in parts[1:]:
            outcome = _unittest_outcome(part.strip())
            if outcome is not None:
                if not subtest or outcome in FAILING:
                    self.cases.add(test, outcome)
                if subtest:  # the test's own outcome may follow its subtests
                    self.pending = test
                return True
            following = _unittest_id(part.strip())
            if following is None:
                break
            test, subtest = following
        # A docstring line, or the test's own output, comes before the outcome.
        self.pending = test
        return True

    def unittest_report(self, stripped: str) -> bool:
        """``FAIL: test_a (pkg.mod.Class.test_a)`` under a ===== rule."""
        word, _, rest = stripped.partition(": ")
        found = _unittest_id(rest) if word in _UNITTEST_REPORT else None
        if found is None:
            return False
        if self.cases.add(found[0], _UNITTEST_REPORT[word]):
            self.block = (_UNITTEST_END, "unittest", found[0])
        return True

    def read_cargo(self, line: str, stripped: str, indent: int) -> None:
        """``test tests::it_works ... ok``, a failure's ``---- name stdout ----``,
        and the ``Running``/``Doc-tests`` lines naming the test binary."""
        word, _, rest = stripped.partition(" ")
        if word == "test":
            name, _, result = rest.partition(" ... ")
            result, _, timing = result.partition(" <")
            outcome = _CARGO_WORDS.get(result.partition(",")[0])
            if outcome is not None and name:
                for suffix in _CARGO_SUFFIXES:
                    name = name.removesuffix(suffix)
                duration = _seconds(timing[:-2]) if timing.endswith("s>") else None
                self.cases.add(self.cargo_target + name, outcome, duration)
        elif word == "----" and rest.endswith(" stdout ----"):
            test = self.cargo_target + rest[:-12]
            target = test if test in self.cases.by_id else None
            self.block = (_CARGO_END, "cargo", target)
        elif word == "Doc-tests" and indent and rest and " " not in rest:
            self.cargo_target = f"{rest}/doc::"
        elif word == "Running" and indent and rest.endswith(")"):
            # cargo right-aligns its status words, so they are always indented.
            source, _, binary = rest[:-1].rpartition(" (")
            binary = binary.replace("\\", "/")
            if "/deps/" in binary:
                stem = binary.rpartition("/")[2].removesuffix(".exe")
                stem = _CARGO_BINARY_HASH.sub("", stem)
                source = source.removeprefix("unittests ").strip()
                self.cargo_target = f"{stem}/{source}::" if source else f"{stem}::"

    def read_go(self, line: str, stripped: str, indent: int) -> None:
        """``--- FAIL: TestX/sub (0.00s)``; ``ok  <tab>pkg`` closes a package."""
        word, _, rest = stripped.partition(" ")
        if word == "---":
            word, _, rest = rest.partition(": ")
            name, _, timing = rest.partition(" ")
            if word in _GO_WORDS and name:
                self.cases.seen = True
                found = _GO_DURATION.fullmatch(timing)
                duration = float(found[1]) if found else None
                if name in self.go_cases or len(self.go_cases) < MAX_CASES:
                    self.go_cases[name] = (_GO_WORDS[word], duration)
        elif word == "===":
            # The test's log lines follow, until the next line of go's own.
            word, _, name = rest.strip().partition(" ")
            if word in {"RUN", "NAME", "CONT"} and name.strip():
                self.block = (_GO_END, "go", name.strip())
        elif line.startswith(("ok  \t", "FAIL\t")):
            self.flush_go(line[5:].split("\t", 1)[0].split(" ", 1)[0])

    def flush_go(self, package: str) -> None:
        prefix = f"{package}::" if package else ""
        for name, (outcome, duration) in self.go_cases.items():
            log = self.go_logs.get(name, "") if outcome in FAILING else ""
            self.cases.add(prefix + name, outcome, duration, log)
        self.go_cases.clear()
        self.go_logs.clear()

    def read_jest(self, line: str, stripped: str, indent: int) -> None:
        """``PASS src/a.test.js``, or ``FAIL src/a.test.js (5.1 s)``."""
        path = stripped[5:].strip()
        found = _search_tail(_JEST_HEADER_TIME, path)
        path = path if found is None else path[: found.start()]
        if path and " > " not in path and _JEST_SEPARATOR not in path:
            self.jest_file = path
            self.jest_stack.clear()
            self.jest_titles.clear()

    def jest(self, stripped: str, indent: int) -> bool:
        """The tree of describe blocks and tests under a ``PASS``/``FAIL`` header."""
        assert self.jest_file is not None
        if indent < 2:
            self.jest_file = None  # the summary, the next file, or not jest at all
            return False
        mark, _, title = stripped.partition(" ")
        if mark == "\u25cf":  # a dot: the report of one failure, in jest's words
            self.block = (_JEST_END, "jest", self.jest_titles.get(title))
            return True
        stack = self.jest_stack
        while stack and stack[-1][0] >= indent:
            stack.pop()
        size = stack[-1][2] if stack else len(self.jest_file)
        outcome = _JEST_MARKS.get(mark)
        if outcome is None:  # a describe block's title
            if len(stack) < _JEST_DEPTH:
                stack.append((indent, stripped, size + 3 + len(stripped)))
            return True
        title = title.removeprefix(_JEST_WORDS.get(mark, ""))
        found = _search_tail(_JEST_DURATION, title) if title.endswith("ms)") else None
        if found is not None:
            title = title[: found.start()]
        self.cases.seen = True
        if size + 3 + len(title) <= MAX_ID:
            titles = [entry[1] for entry in stack] + [title]
            test = " > ".join([self.jest_file, *titles])
            duration = None if found is None else int(found[1]) / 1000
            if self.cases.add(test, outcome, duration) and outcome == FAILED:
                self.jest_titles[_JEST_SEPARATOR.join(titles)] = test
        return True

    def read_vitest(self, line: str, stripped: str, indent: int) -> None:
        """A mark, then ``src/a.test.ts > group > adds 1ms``."""
        outcome, rest = _VITEST_MARKS.get(stripped[:1]), stripped[2:]
        if outcome is None or " > " not in rest:
            return
        note = rest.rfind(" [") if outcome == SKIPPED and rest.endswith("]") else -1
        if note > 0:
            rest = rest[:note]  # "[skipped]", or the reason given to skip
        while rest.endswith((")", "used")) and (
            found := _search_tail(_VITEST_SUFFIX, rest)
        ):
            rest = rest[: found.start()]  # retries, repeats, heap used
        found = _search_tail(_VITEST_DURATION, rest) if rest.endswith("s") else None
        duration = None
        if found is not None and outcome != SKIPPED:
            duration = float(found[1]) / (1000 if found[2] == "ms" else 1)
            rest = rest[: found.start()]
        test = rest.strip()
        if self.cases.add(test, outcome, duration) and outcome == FAILED:
            self.block = (_VITEST_END, "vitest", test)


def _split_node_id(text: str) -> tuple[str, str]:
    """A pytest node id and what follows it: up to the first space, or ``] ``
    when a parametrised id's brackets come first (``test_p[a b] PASSED``)."""
    space, bracket = text.find(" "), text.find("[")
    if space < 0:
        return text, ""
    if 0 <= bracket < space:
        close = text.find("] ", bracket)
        end = close + 1 if close >= 0 else len(text)
        return text[:end], text[end:]
    return text[:space], text[space:]


def _unittest_outcome(text: str) -> str | None:
    return SKIPPED if text.startswith("skipped '") else _UNITTEST_WORDS.get(text)


def _unittest_id(text: str) -> tuple[str, bool] | None:
    """The id of ``test_a (pkg.mod.Class.test_a)``, and whether it is a subtest.

    Python 3.10 prints ``test_a (pkg.mod.Class)``; the method is appended then,
    unless the class path already ends with it.
    """
    found = _UNITTEST_TEST.fullmatch(text)
    if found is None:
        return None
    method, where = found[1], found[2]
    test = where if where.endswith("." + method) else f"{where}.{method}"
    return test, found[3] is not None


# Comparison


@dataclass(frozen=True, slots=True)
class CaseComparison:
    """How the replay's tests ended beside the original's, as sorted ids."""

    newly_failing: tuple[str, ...]  # passed on the original, failed or errored
    newly_skipped: tuple[str, ...]  # passed on the original, skipped
    missing: tuple[str, ...]  # reported by the original, not by the replay
    newly_passing: tuple[str, ...]  # failed or errored on the original, passed
    both_failing: tuple[str, ...]  # failed or errored on both
    added: tuple[str, ...]  # reported by the replay only
    lost_passes: tuple[str, ...]  # passed on the original, not on the replay

    @property
    def keeps_every_pass(self) -> bool:
        """Whether every test that passed on the original passed on the replay."""
        return not self.lost_passes


def compare_cases(
    original: Iterable[TestCase], replay: Iterable[TestCase]
) -> CaseComparison:
    """Compare test by test; within each list, the last case of an id wins."""
    before = {case.id: case.outcome for case in original}
    after = {case.id: case.outcome for case in replay}
    passed = [test for test, outcome in before.items() if outcome == PASSED]
    failing = [test for test, outcome in before.items() if outcome in FAILING]
    return CaseComparison(
        newly_failing=_sorted(t for t in passed if after.get(t) in FAILING),
        newly_skipped=_sorted(t for t in passed if after.get(t) == SKIPPED),
        missing=_sorted(t for t in before if t not in after),
        newly_passing=_sorted(t for t in failing if after.get(t) == PASSED),
        both_failing=_sorted(t for t in failing if after.get(t) in FAILING),
        added=_sorted(t for t in after if t not in before),
        lost_passes=_sorted(t for t in passed if after.get(t) != PASSED),
    )


def _sorted(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(ids))
