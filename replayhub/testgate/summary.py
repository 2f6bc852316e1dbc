"""How many tests ran, in the test runner's own words.

The test gate hands over the captured output of the project's test command, or the
JUnit XML report it wrote. Both come from inside the sandbox and are untrusted: the
parsers here are linear in the size of their input, never raise on odd input, and
answer None whenever the runner's words do not say how many tests ran.

"Executed" means a test body ran to a verdict: passed, failed, errored, or an
expected failure that failed or passed. Skipped, deselected, ignored and todo
tests are not executed.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from dataclasses import dataclass
from xml.etree import ElementTree
from xml.parsers import expat

# Runner summaries close the output, so only the tail is read for them; this also
# bounds the per-line work on megabytes of untrusted output. Cargo and go print
# one block or line per crate/test, spread over the whole output, and are scanned
# in full with line-anchored patterns only.
TAIL_CHARS = 64 * 1024
# No runner's summary line is anywhere near this long; longer lines are skipped
# rather than parsed.
MAX_SUMMARY_LINE = 512
MAX_JUNIT_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class TestCounts:
    executed: int
    failed: int
    runner: str


def parse_summary(output: str) -> TestCounts | None:
    """Read the test count from the closing summary of a test run's output.

    Understands pytest, unittest (and Django's runner), go test -v, cargo test,
    jest, vitest and a plain ``N passed, N failed`` line. When several summaries
    appear, the one that ends last wins, since the runner that spoke last is the
    one whose exit code the gate saw; cargo's per-crate blocks are summed instead.
    Go output counts only with -v (``=== RUN`` lines), because without it
    passing tests print nothing. ANSI colour codes are ignored.
    """
    text = _ANSI.sub("", output)
    found = [
        summary
        for summary in (_cargo(text), _go(text), _last_line_summary(text))
        if summary is not None
    ]
    if not found:
        return None
    return max(found, key=lambda summary: summary[0])[1]


# CSI (colours, cursor moves), OSC (titles, hyperlinks) up to BEL/ST or the next
# escape, and two-character escapes. Every alternative is a run of disjoint
# character classes, so the substitution stays linear on hostile input.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*\x07?|[@-Z\\-_])")

_CARGO = re.compile(
    r"^[ \t]*test result: (?:ok|FAILED)\. ([0-9]{1,9}) passed; ([0-9]{1,9}) failed;",
    re.MULTILINE,
)
_GO_RESULT = re.compile(r"^[ \t]*--- (PASS|FAIL): ", re.MULTILINE)


def _cargo(text: str) -> tuple[int, TestCounts] | None:
    executed = failed = 0
    end = -1
    for match in _CARGO.finditer(text):
        passed, failures = int(match[1]), int(match[2])
        executed += passed + failures
        failed += failures
        end = match.end()
    if end < 0:
        return None
    return end, TestCounts(executed, failed, "cargo")


def _go(text: str) -> tuple[int, TestCounts] | None:
    if "=== RUN" not in text:
        return None
    executed = failed = 0
    end = -1
    # Subtests count as tests, as gotestsum counts them.
    for match in _GO_RESULT.finditer(text):
        executed += 1
        failed += match[1] == "FAIL"
        end = match.end()
    if end < 0:
        return None
    return end, TestCounts(executed, failed, "go")


def _last_line_summary(text: str) -> tuple[int, TestCounts] | None:
    start = max(0, len(text) - TAIL_CHARS)
    offset = start
    best = None
    pending_ran = None  # unittest's "Ran N tests" waits for its status line
    for raw in text[start:].splitlines(keepends=True):
        offset += len(raw)
        if len(raw) > MAX_SUMMARY_LINE:
            pending_ran = None
            continue
        line = raw.strip()
        if not line:
            continue
        if pending_ran is not None:
            counts = _unittest_status(line, pending_ran)
            pending_ran = None
            if counts is not None:
                best = (offset, counts)
                continue
        pending_ran = _unittest_ran(line)
        if pending_ran is not None:
            continue
        counts = _pytest(line) or _jest(line) or _vitest(line) or _plain(line)
        if counts is not None:
            best = (offset, counts)
    return best


def _number(text: str) -> int | None:
    # str.isdigit also accepts superscripts and other scripts' digits.
    if 0 < len(text) <= 9 and text.isascii() and text.isdigit():
        return int(text)
    return None


def _items(parts: list[str], words: dict[str, tuple[bool, bool]]) -> TestCounts | None:
    """Tally ``N word`` items; None when any item is not one of ``words``.

    ``words`` maps each word to (counts as executed, counts as failed).
    """
    executed = failed = 0
    for part in parts:
        count_text, _, word = part.strip().partition(" ")
        count = _number(count_text)
        if count is None or word not in words:
            return None
        is_executed, is_failed = words[word]
        executed += count * is_executed
        failed += count * is_failed
    return TestCounts(executed, failed, "")


_PYTEST_WORDS = {
    "passed": (True, False),
    "failed": (True, True),
    "error": (True, True),
    "errors": (True, True),
    "xfailed": (True, False),
    "xpassed": (True, False),
    "skipped": (False, False),
    "deselected": (False, False),
    "warning": (False, False),
    "warnings": (False, False),
    "rerun": (False, False),
    # pytest-subtests reports its subtests beside the tests that hold them.
    "subtests passed": (False, False),
    "subtests failed": (False, False),
    "subtests skipped": (False, False),
}
_PYTEST_DURATION = re.compile(
    r" in [0-9]{1,9}(?:\.[0-9]{1,9})?s(?: \([0-9:]{1,12}\))?$"
)


def _pytest(line: str) -> TestCounts | None:
    """``== 1 failed, 3 passed, 2 skipped in 0.12s ==`` or ``no tests ran in 0.01s``."""
    body = line.strip("= ")
    duration = _PYTEST_DURATION.search(body)
    if duration is not None:
        body = body[: duration.start()]
    if body == "no tests ran":
        return TestCounts(0, 0, "pytest")
    if duration is None:
        return None
    counts = _items(body.split(","), _PYTEST_WORDS)
    return (
        None if counts is None else TestCounts(counts.executed, counts.failed, "pytest")
    )


_PLAIN_WORDS = {
    "passed": (True, False),
    "failed": (True, True),
    "error": (True, True),
    "errors": (True, True),
    "skipped": (False, False),
}


def _plain(line: str) -> TestCounts | None:
    """``3 passed, 1 failed`` with nothing else on the line."""
    parts = line.rstrip(".").split(",")
    counts = _items(parts, _PLAIN_WORDS)
    if counts is None or not any(
        part.strip().endswith((" passed", " failed")) for part in parts
    ):
        return None
    return TestCounts(counts.executed, counts.failed, "plain")


_JS_WORDS = {
    "passed": (True, False),
    "failed": (True, True),
    "skipped": (False, False),
    "todo": (False, False),
    "pending": (False, False),
}


def _jest(line: str) -> TestCounts | None:
    """``Tests:       1 failed, 3 passed, 4 total``."""
    if not line.startswith("Tests:"):
        return None
    parts = line[len("Tests:") :].split(",")
    count_text, _, word = parts.pop().strip().partition(" ")
    total = _number(count_text)
    if total is None or word != "total":
        return None
    counts = _items(parts, _JS_WORDS)
    if counts is None or counts.executed > total:
        return None
    return TestCounts(counts.executed, counts.failed, "jest")


def _vitest(line: str) -> TestCounts | None:
    """``Tests  1 failed | 2 passed (3)``."""
    if not line.startswith("Tests  ") or not line.endswith(")"):
        return None
    body, _, total_text = line[len("Tests  ") : -1].rpartition("(")
    total = _number(total_text)
    if total is None:
        return None
    counts = _items(body.split("|"), _JS_WORDS)
    if counts is None or counts.executed > total:
        return None
    return TestCounts(counts.executed, counts.failed, "vitest")


_UNITTEST_RAN = re.compile(r"Ran ([0-9]{1,9}) tests? in [0-9]{1,9}(?:\.[0-9]{1,9})?s")
_UNITTEST_KEYS = {
    "failures": "failed",
    "errors": "failed",
    "unexpected successes": "failed",
    "skipped": "skipped",
    "expected failures": "",
}


def _unittest_ran(line: str) -> int | None:
    match = _UNITTEST_RAN.fullmatch(line)
    return None if match is None else int(match[1])


def _unittest_status(line: str, ran: int) -> TestCounts | None:
    """The line after ``Ran N tests``: ``OK``, ``FAILED (failures=1, skipped=2)``."""
    if line == "NO TESTS RAN":
        return TestCounts(0, 0, "unittest")
    word, _, details = line.partition(" ")
    if word not in {"OK", "FAILED"}:
        return None
    tally = {"failed": 0, "skipped": 0, "": 0}
    if details:
        if not (details.startswith("(") and details.endswith(")")):
            return None
        for item in details[1:-1].split(","):
            key, _, value = item.strip().partition("=")
            count = _number(value)
            if key not in _UNITTEST_KEYS or count is None:
                return None
            tally[_UNITTEST_KEYS[key]] += count
    executed = ran - tally["skipped"]
    if executed < 0:
        return None
    return TestCounts(executed, tally["failed"], "unittest")


def parse_junit(
    source: str | os.PathLike[str] | bytes, max_bytes: int = MAX_JUNIT_BYTES
) -> TestCounts | None:
    """Read the test count from a JUnit XML report.

    ``source`` is the report's bytes, or a path to it (a str is always a path).
    Returns None when the report is larger than ``max_bytes``, is not a regular
    file, declares a DOCTYPE or entities, is not UTF-8, ASCII, Latin-1 or
    cp1252, or is not well-formed JUnit. ``testcase`` elements are counted when
    present (a case with ``skipped`` did not execute; one with ``failure`` or
    ``error`` failed); otherwise the suite's own ``tests``/``failures``/
    ``errors``/``skipped`` attributes are used. pytest reports xfailed tests as
    skipped here, so they do not count as executed.

    The path is opened without following a final symlink, but the caller is
    still responsible for keeping it inside the workspace.
    """
    root = read_junit(source, max_bytes)
    return None if root is None else _junit_counts(root)


def read_junit(
    source: str | os.PathLike[str] | bytes, max_bytes: int = MAX_JUNIT_BYTES
) -> ElementTree.Element | None:
    """The root element of a JUnit XML report, read under parse_junit's rules.

    None when the report is refused or is not well-formed XML; what the root
    holds is not checked here.
    """
    data: bytes | None
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
    else:
        data = _read_capped(source, max_bytes)
    if data is None or len(data) > max_bytes:
        return None
    text = _decode(data)
    if text is None or _has_doctype(text):
        return None
    try:
        # Safe to parse: decoded here, so expat ignores the document's encoding
        # declaration, and refused above if it has a DTD to expand entities from.
        return ElementTree.fromstring(text)  # noqa: S314
    except (ElementTree.ParseError, ValueError):
        return None


class _DoctypeFound(Exception):
    pass


def _refuse_doctype(*args: object) -> None:
    raise _DoctypeFound


def _has_doctype(text: str) -> bool:
    """Whether the document declares a DTD, or is not well-formed before one.

    Entity expansion (billion laughs) and external entities both need a DTD, and
    a JUnit report never has one. A plain substring test would also refuse a
    report whose CDATA quotes an HTML page's ``<!DOCTYPE html>``, so expat reads
    the document and stops as soon as a DOCTYPE starts, before any declaration
    inside it is processed.
    """
    if "<!" not in text:
        return False
    parser = expat.ParserCreate()
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_doctype
    try:
        parser.Parse(text, True)
    except _DoctypeFound:
        return True
    except (expat.ExpatError, ValueError):
        # Malformed: ElementTree refuses it next, so nothing is lost.
        return False
    return False


_DECLARED_ENCODING = re.compile(
    rb"""^<\?xml[^>]{0,200}?encoding\s*=\s*["']([A-Za-z0-9._-]{1,40})["']"""
)
_ENCODINGS = frozenset({"utf-8", "ascii", "iso8859-1", "cp1252"})


def _read_capped(path: str | os.PathLike[str], max_bytes: int) -> bytes | None:
    # O_NONBLOCK keeps a FIFO planted in the workspace from blocking the open;
    # only regular files are then read.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
                return None
            return handle.read(max_bytes + 1)
    except OSError:
        return None


def _decode(data: bytes) -> str | None:
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    # NUL never appears in a single-byte or UTF-8 XML document; refusing it also
    # refuses UTF-16/32, whose declarations a byte-level check could not see.
    if b"\x00" in data:
        return None
    declared = _DECLARED_ENCODING.match(data)
    encoding = "utf-8"
    if declared is not None:
        try:
            encoding = codecs.lookup(declared[1].decode("ascii")).name
        except LookupError:
            return None
        if encoding not in _ENCODINGS:
            return None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        return None


def _local_name(tag: object) -> str:
    # Comments and processing instructions have a function as their tag.
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _junit_counts(root: ElementTree.Element) -> TestCounts | None:
    if _local_name(root.tag) not in {"testsuites", "testsuite"}:
        return None
    cases = [el for el in root.iter() if _local_name(el.tag) == "testcase"]
    if cases:
        executed = failed = 0
        for case in cases:
            children = {_local_name(child.tag) for child in case}
            # googletest lists disabled tests with status="notrun" and no child.
            if "skipped" in children or case.get("status") == "notrun":
                continue
            executed += 1
            failed += bool(children & {"failure", "error"})
        return TestCounts(executed, failed, "junit")
    if "tests" in root.attrib or _local_name(root.tag) == "testsuite":
        return _suite_attributes(root)
    # A <testsuites> root without totals: add up the suites it holds.
    executed = failed = 0
    for suite in root:
        if _local_name(suite.tag) != "testsuite":
            continue
        counts = _suite_attributes(suite)
        if counts is None:
            return None
        executed += counts.executed
        failed += counts.failed
    return TestCounts(executed, failed, "junit")


def _suite_attributes(suite: ElementTree.Element) -> TestCounts | None:
    values = {}
    # nose writes "skip"; googletest adds "disabled" tests to its total.
    for name in ("tests", "failures", "errors", "skipped", "skip", "disabled"):
        value = _number(suite.get(name, "0").strip())
        if value is None:
            return None
        values[name] = value
    executed = values["tests"] - values["skipped"] - values["skip"] - values["disabled"]
    if executed < 0:
        return None
    return TestCounts(executed, values["failures"] + values["errors"], "junit")
