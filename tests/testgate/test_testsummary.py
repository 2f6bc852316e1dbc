from __future__ import annotations

import os

import pytest

from replayhub.testgate.summary import TestCounts, parse_junit, parse_summary

PYTEST_OUTPUT = """\
============================= test session starts ==============================
platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0
rootdir: /workspace
configfile: pyproject.toml
collected 6 items

tests/test_calc.py ..F.ss                                                 [100%]

=================================== FAILURES ===================================
___________________________________ test_add ___________________________________

    def test_add():
>       assert add(1, 1) == 3
E       assert 2 == 3
E        +  where 2 = add(1, 1)

tests/test_calc.py:7: AssertionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_add - assert 2 == 3
==================== 1 failed, 3 passed, 2 skipped in 0.12s ====================
"""

PYTEST_COLOURED = (
    "tests/test_calc.py \x1b[32m.\x1b[0m\x1b[31mF\x1b[0m\x1b[32m.\x1b[0m"
    "\x1b[31m                                  [100%]\x1b[0m\n"
    "\x1b[31m=========================== \x1b[31m\x1b[1m1 failed\x1b[0m, "
    "\x1b[32m2 passed\x1b[0m, \x1b[33m1 warning\x1b[0m\x1b[31m in 0.05s\x1b[0m"
    "\x1b[31m ===========================\x1b[0m\n"
)

UNITTEST_FAILED = """\
..F.E
======================================================================
ERROR: test_div (tests.test_math.MathTest.test_div)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/workspace/tests/test_math.py", line 15, in test_div
    div(1, 0)
ZeroDivisionError: division by zero

======================================================================
FAIL: test_sub (tests.test_math.MathTest.test_sub)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/workspace/tests/test_math.py", line 9, in test_sub
    self.assertEqual(sub(3, 1), 1)
AssertionError: 2 != 1

----------------------------------------------------------------------
Ran 5 tests in 0.002s

FAILED (failures=1, errors=1)
"""

DJANGO_OK = """\
Found 14 test(s).
Creating test database for alias 'default'...
System check identified no issues (0 silenced).
..............
----------------------------------------------------------------------
Ran 14 tests in 0.412s

OK (skipped=2)
Destroying test database for alias 'default'...
"""

GO_VERBOSE = """\
=== RUN   TestAdd
--- PASS: TestAdd (0.00s)
=== RUN   TestSub
=== RUN   TestSub/positive
=== RUN   TestSub/negative
    calc_test.go:21: got 2, want 1
--- FAIL: TestSub (0.00s)
    --- PASS: TestSub/positive (0.00s)
    --- FAIL: TestSub/negative (0.00s)
=== RUN   TestWindowsPaths
    calc_test.go:30: only on windows
--- SKIP: TestWindowsPaths (0.00s)
FAIL
FAIL\texample.com/calc\t0.004s
=== RUN   TestParse
--- PASS: TestParse (0.00s)
PASS
ok  \texample.com/calc/parse\t0.003s
FAIL
"""

GO_QUIET = """\
ok  \texample.com/calc\t0.004s
ok  \texample.com/calc/parse\t(cached)
?   \texample.com/calc/cmd\t[no test files]
"""

CARGO_OUTPUT = """\
   Compiling calc v0.1.0 (/workspace)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.52s
     Running unittests src/lib.rs (target/debug/deps/calc-1a2b3c4d5e6f7a8b)

running 3 tests
test tests::adds ... ok
test tests::subtracts ... ok
test tests::slow ... ignored

test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; \
finished in 0.00s

     Running tests/integration.rs (target/debug/deps/integration-0f1e2d3c4b5a6978)

running 2 tests
test round_trip ... ok
test parses_negative ... FAILED

failures:

---- parses_negative stdout ----
thread 'parses_negative' panicked at tests/integration.rs:12:5:
assertion `left == right` failed
  left: -1
 right: 1

failures:
    parses_negative

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; \
finished in 0.01s

   Doc-tests calc

running 1 test
test src/lib.rs - add (line 3) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; \
finished in 0.15s

error: 1 target failed:
    `--test integration`
"""

JEST_OUTPUT = """\
 PASS  src/sum.test.js
 FAIL  src/sub.test.js
  \u25cf sub \u203a subtracts

    expect(received).toBe(expected) // Object.is equality

    Expected: 1
    Received: 2

      3 | test('subtracts', () => {
    > 4 |   expect(sub(3, 1)).toBe(1);
        |                     ^

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 1 skipped, 1 todo, 3 passed, 6 total
Snapshots:   0 total
Time:        0.512 s
Ran all test suites.
"""

VITEST_OUTPUT = """\
 \u2713 src/sum.test.ts (2 tests) 3ms
 \u276f src/sub.test.ts (2 tests | 1 failed | 1 skipped) 5ms
   \u00d7 sub > subtracts 4ms
     \u2192 expected 2 to be 1

 Test Files  1 failed | 1 passed (2)
      Tests  1 failed | 2 passed | 1 skipped (4)
   Start at  10:12:03
   Duration  412ms (transform 31ms, setup 0ms, collect 40ms, tests 8ms)
"""


# pytest


def test_pytest_counts_passed_and_failed_but_not_skipped():
    assert parse_summary(PYTEST_OUTPUT) == TestCounts(4, 1, "pytest")


def test_pytest_colour_codes_are_ignored():
    assert parse_summary(PYTEST_COLOURED) == TestCounts(3, 1, "pytest")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("1 failed, 2 passed, 1 error in 0.31s", TestCounts(4, 2, "pytest")),
        ("==== 5 passed, 1 xfailed in 0.20s ====", TestCounts(6, 0, "pytest")),
        (
            "== 2 passed, 1 xpassed, 3 deselected in 1.02s ==",
            TestCounts(3, 0, "pytest"),
        ),
        ("= 1 passed, 4 subtests passed in 0.01s =", TestCounts(1, 0, "pytest")),
        (
            "===== 3 failed, 9 passed in 65.41s (0:01:05) =====",
            TestCounts(12, 3, "pytest"),
        ),
        ("======= 1 error in 0.12s =======", TestCounts(1, 1, "pytest")),
        ("============ no tests ran in 0.01s ============", TestCounts(0, 0, "pytest")),
        ("no tests ran", TestCounts(0, 0, "pytest")),
        ("========= 2 skipped in 0.01s =========", TestCounts(0, 0, "pytest")),
    ],
)
def test_pytest_summary_lines(line, expected):
    assert parse_summary(f"collected 6 items\n\n{line}\n") == expected


def test_a_pytest_line_with_an_unknown_word_is_not_a_summary():
    assert parse_summary("== 3 passed, 2 bananas in 0.1s ==\n") is None


# unittest


def test_unittest_failures_and_errors_both_fail():
    assert parse_summary(UNITTEST_FAILED) == TestCounts(5, 2, "unittest")


def test_django_runner_output_subtracts_skipped_tests():
    assert parse_summary(DJANGO_OK) == TestCounts(12, 0, "unittest")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("OK", TestCounts(4, 0, "unittest")),
        ("OK (skipped=1, expected failures=1)", TestCounts(3, 0, "unittest")),
        ("FAILED (errors=2)", TestCounts(4, 2, "unittest")),
        ("FAILED (failures=1, unexpected successes=1)", TestCounts(4, 2, "unittest")),
    ],
)
def test_unittest_status_lines(status, expected):
    output = f"....\n{'-' * 70}\nRan 4 tests in 0.001s\n\n{status}\n"

    assert parse_summary(output) == expected


def test_unittest_with_no_tests_executed_none():
    output = f"\n{'-' * 70}\nRan 0 tests in 0.000s\n\nNO TESTS RAN\n"

    assert parse_summary(output) == TestCounts(0, 0, "unittest")


def test_unittest_ran_line_without_its_status_line_is_not_a_summary():
    assert parse_summary("Ran 4 tests in 0.001s\nsomething else\n") is None


# go


def test_go_verbose_counts_tests_and_subtests_but_not_skips():
    assert parse_summary(GO_VERBOSE) == TestCounts(5, 2, "go")


def test_go_without_verbose_output_gives_no_count():
    assert parse_summary(GO_QUIET) is None


def test_go_without_verbose_ignores_the_failures_it_lists():
    output = (
        "--- FAIL: TestSub (0.00s)\n    calc_test.go:21: got 2, want 1\n"
        "FAIL\nFAIL\texample.com/calc\t0.004s\nFAIL\n"
    )

    assert parse_summary(output) is None


# cargo


def test_cargo_sums_the_blocks_of_every_crate():
    assert parse_summary(CARGO_OUTPUT) == TestCounts(5, 1, "cargo")


def test_cargo_blocks_far_apart_are_all_counted():
    block = (
        "test result: ok. 10 passed; 0 failed; 0 ignored; 0 measured; "
        "0 filtered out; finished in 0.01s\n"
    )
    output = block + "test noise ... ok\n" * 20_000 + block

    assert parse_summary(output) == TestCounts(20, 0, "cargo")


# jest and vitest


def test_jest_counts_passed_and_failed_not_skipped_or_todo():
    assert parse_summary(JEST_OUTPUT) == TestCounts(4, 1, "jest")


def test_jest_test_suites_line_is_not_mistaken_for_tests():
    output = "Test Suites: 3 passed, 3 total\n"

    assert parse_summary(output) is None


def test_vitest_counts_passed_and_failed_not_skipped():
    assert parse_summary(VITEST_OUTPUT) == TestCounts(3, 1, "vitest")


def test_vitest_all_passing():
    output = " Test Files  1 passed (1)\n      Tests  3 passed (3)\n"

    assert parse_summary(output) == TestCounts(3, 0, "vitest")


# plain lines and choosing among summaries


def test_a_plain_passed_failed_line_is_read():
    assert parse_summary("running...\n7 passed, 2 failed\n") == TestCounts(
        9, 2, "plain"
    )


def test_output_without_a_summary_gives_none():
    assert parse_summary("make: *** [Makefile:4: test] Error 127\n") is None
    assert parse_summary("") is None


def test_the_last_of_several_pytest_summaries_wins():
    first = "==== 10 passed in 0.50s ====\n"
    last = "==== 1 failed, 2 passed in 0.10s ====\n"

    assert parse_summary(first + "rerunning\n" + last) == TestCounts(3, 1, "pytest")


def test_a_summary_printed_by_a_test_before_the_real_one_is_ignored():
    output = "captured: 99 passed, 0 failed\n" + PYTEST_OUTPUT

    assert parse_summary(output) == TestCounts(4, 1, "pytest")


def test_the_runner_that_spoke_last_wins_across_runners():
    output = JEST_OUTPUT + "\n" + PYTEST_OUTPUT

    assert parse_summary(output).runner == "pytest"


def test_a_summary_beyond_the_scanned_tail_is_not_read():
    output = "==== 3 passed in 0.1s ====\n" + "log line\n" * 10_000

    assert parse_summary(output) is None


def test_carriage_return_progress_does_not_hide_the_summary():
    output = "[ 50%]\r[100%]\r==== 2 passed in 0.1s ====\r\n"

    assert parse_summary(output) == TestCounts(2, 0, "pytest")


def test_unicode_digits_are_not_counts():
    assert parse_summary("== \u00b2 passed in 0.1s ==\n") is None


@pytest.mark.parametrize(
    "output",
    [
        "1 passed, " * 100_000,
        "=" * (1 << 20),
        " " * (1 << 20) + "in 0.1s",
        "\n" * (1 << 20),
        "\x1b[" + "0" * (1 << 20),
        "\x1b]" * (1 << 19),
        "--- PASS: " * 100_000 + "\n=== RUN",
        "test result: ok. " * 60_000,
        "Ran " + "9" * (1 << 20) + " tests in 0.1s\n\nOK\n",
        "9" * (1 << 20) + " passed in 0.1s\n",
        "Tests:" + " 1 passed," * 100_000 + " 1 total\n",
    ],
    ids=[
        "repeated-items",
        "equals",
        "spaces",
        "newlines",
        "open-csi",
        "open-osc",
        "go-markers",
        "cargo-prefix",
        "huge-unittest-count",
        "huge-pytest-count",
        "huge-jest-line",
    ],
)
def test_a_pathological_megabyte_of_output_is_parsed_without_error(output):
    result = parse_summary(output)

    assert result is None or isinstance(result, TestCounts)


# JUnit XML

PYTEST_JUNIT = b"""\
<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5"
 time="0.104" timestamp="2024-06-01T10:00:00" hostname="sandbox">
<testcase classname="tests.test_calc" name="test_add" time="0.001">
  <failure message="assert 2 == 3">def test_add():
&gt;       assert add(1, 1) == 3</failure>
</testcase>
<testcase classname="tests.test_calc" name="test_sub" time="0.001"/>
<testcase classname="tests.test_calc" name="test_mul" time="0.001"/>
<testcase classname="tests.test_calc" name="test_div" time="0.001">
  <error message="failed on setup with &quot;fixture 'db' not found&quot;"/>
</testcase>
<testcase classname="tests.test_calc" name="test_pow" time="0.000">
  <skipped type="pytest.skip" message="not yet">tests/test_calc.py:20: not yet</skipped>
</testcase>
</testsuite></testsuites>
"""


def test_junit_counts_testcases_with_their_children():
    assert parse_junit(PYTEST_JUNIT) == TestCounts(4, 2, "junit")


def test_junit_is_read_from_a_path(tmp_path):
    report = tmp_path / "report.xml"
    report.write_bytes(PYTEST_JUNIT)

    assert parse_junit(report) == TestCounts(4, 2, "junit")
    assert parse_junit(str(report)) == TestCounts(4, 2, "junit")


def test_junit_suite_attributes_are_used_when_there_are_no_testcases():
    report = b'<testsuite name="x" tests="10" failures="2" errors="1" skipped="3"/>'

    assert parse_junit(report) == TestCounts(7, 3, "junit")


def test_junit_testsuites_without_totals_adds_up_its_suites():
    report = (
        b"<testsuites>"
        b'<testsuite name="a" tests="4" failures="1"/>'
        b'<testsuite name="b" tests="6" skip="2" errors="1"/>'
        b"</testsuites>"
    )

    assert parse_junit(report) == TestCounts(8, 2, "junit")


def test_junit_testsuites_totals_are_used_when_present():
    report = b'<testsuites tests="9" failures="0"><testsuite name="a"/></testsuites>'

    assert parse_junit(report) == TestCounts(9, 0, "junit")


def test_junit_surefire_nested_suites_count_every_case():
    report = b"""<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" name="CalcTest"
 tests="3" errors="0" skipped="0" failures="1">
  <properties><property name="java.version" value="21"/></properties>
  <testcase name="adds" classname="CalcTest" time="0.01"/>
  <testcase name="subtracts" classname="CalcTest" time="0.01">
    <failure message="expected: &lt;1&gt; but was: &lt;2&gt;"
     type="org.opentest4j.AssertionFailedError"/>
  </testcase>
  <testcase name="divides" classname="CalcTest" time="0.01">
    <system-out><![CDATA[<!DOCTYPE html><html><body>log</body></html>]]></system-out>
  </testcase>
</testsuite>"""

    assert parse_junit(report) == TestCounts(3, 1, "junit")


def test_junit_googletest_disabled_cases_are_not_executed():
    report = b"""<testsuites tests="2" failures="0" disabled="1" errors="0">
  <testsuite name="Calc" tests="2" failures="0" disabled="1" errors="0">
    <testcase name="Adds" status="run" result="completed" classname="Calc"/>
    <testcase name="DISABLED_Slow" status="notrun" result="suppressed"
     classname="Calc"/>
  </testsuite>
</testsuites>"""

    assert parse_junit(report) == TestCounts(1, 0, "junit")


def test_junit_in_latin1_is_decoded_by_its_declaration():
    report = (
        '<?xml version="1.0" encoding="ISO-8859-1"?>'
        '<testsuite tests="1"><testcase name="caf\u00e9"/></testsuite>'
    ).encode("latin-1")

    assert parse_junit(report) == TestCounts(1, 0, "junit")


def test_an_empty_junit_report_executed_nothing():
    assert parse_junit(b"<testsuites/>") == TestCounts(0, 0, "junit")


@pytest.mark.parametrize(
    "report",
    [
        b"",
        b"not xml at all",
        b"<testsuite tests='3'>",
        b"<testsuite tests='3'></testcase>",
        b"<html><body>500</body></html>",
        b'<testsuite tests="three"/>',
        b'<testsuite tests="-1"/>',
        b'<testsuite tests="2" skipped="5"/>',
        b'<testsuite tests="\xb2"/>',
        b"<testsuite tests='1'>\xff\xfe</testsuite>",
        '<?xml version="1.0" encoding="UTF-16"?><testsuite tests="1"/>'.encode(
            "utf-16"
        ),
        b'<?xml version="1.0" encoding="koi8-r"?><testsuite tests="1"/>',
        b'<?xml version="1.0" encoding="no-such-codec"?><testsuite tests="1"/>',
    ],
    ids=[
        "empty",
        "text",
        "unclosed",
        "mismatched",
        "not-junit",
        "non-numeric",
        "negative",
        "more-skipped-than-tests",
        "non-ascii-digit",
        "invalid-utf8",
        "utf16",
        "unsupported-encoding",
        "unknown-encoding",
    ],
)
def test_malformed_junit_gives_none(report):
    assert parse_junit(report) is None


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<testsuite tests="1"><testcase name="&lol4;"/></testsuite>
"""

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE testsuite [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<testsuite tests="1"><testcase name="&secret;"/></testsuite>
"""


@pytest.mark.parametrize(
    "report",
    [
        BILLION_LAUGHS,
        EXTERNAL_ENTITY,
        b'<!DOCTYPE testsuite SYSTEM "http://example.com/x.dtd"><testsuite/>',
        b"<!-- <testsuite> --><!DOCTYPE testsuite><testsuite tests='1'/>",
    ],
    ids=["entity-expansion", "external-entity", "external-dtd", "after-comment"],
)
def test_junit_with_a_doctype_is_refused(report):
    assert parse_junit(report) is None


def test_junit_over_the_size_limit_is_refused(tmp_path):
    report = PYTEST_JUNIT.replace(b"</testsuites>", b"<!--" + b"x" * 2000 + b"-->")
    path = tmp_path / "big.xml"
    path.write_bytes(report + b"</testsuites>")

    assert parse_junit(report, max_bytes=1000) is None
    assert parse_junit(path, max_bytes=1000) is None
    assert parse_junit(path) is not None


def test_a_missing_junit_file_gives_none(tmp_path):
    assert parse_junit(tmp_path / "absent.xml") is None


def test_a_junit_path_that_is_a_directory_gives_none(tmp_path):
    assert parse_junit(tmp_path) is None


def test_a_junit_path_that_is_a_symlink_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere.xml"
    target.write_bytes(PYTEST_JUNIT)
    link = tmp_path / "report.xml"
    link.symlink_to(target)

    assert parse_junit(link) is None


def test_a_junit_path_that_is_a_fifo_does_not_block(tmp_path):
    fifo = tmp_path / "report.xml"
    os.mkfifo(fifo)

    assert parse_junit(fifo) is None


def test_deeply_nested_junit_is_parsed_without_error():
    depth = 100_000
    report = b"<testsuites>" + b"<a>" * depth + b"</a>" * depth + b"</testsuites>"

    assert parse_junit(report) == TestCounts(0, 0, "junit")
