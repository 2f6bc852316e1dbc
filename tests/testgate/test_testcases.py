"""Each runner's printed output read into test cases (``cases.parse_output_cases``),
and the original's and the replay's cases compared (``cases.compare_cases``)."""

from __future__ import annotations

import time

import pytest

from replayhub.testgate.cases import (
    MAX_CASES,
    MAX_ID,
    MAX_LINE,
    MAX_MESSAGE,
    TestCase,
    compare_cases,
    parse_output_cases,
)
from tests.testgate.captured import FIXTURES, by_id, fixture, outcomes

# pytest

PYTEST_OUTCOMES = [
    ("tests/test_calc.py::test_add", "passed"),
    ("tests/test_calc.py::test_add_wrong", "failed"),
    ("tests/test_calc.py::test_skipped", "skipped"),
    ("tests/test_calc.py::test_ordered[1-2]", "passed"),
    ("tests/test_calc.py::test_ordered[x-y z]", "passed"),
    ("tests/test_calc.py::test_known_bug", "passed"),
    ("tests/test_calc.py::TestGroup::test_in_class", "passed"),
    ("tests/test_calc.py::TestGroup::test_needs_database", "error"),
]


def test_pytest_verbose_output_names_every_test_with_its_outcome():
    assert outcomes(parse_output_cases(fixture("pytest-v-ra.txt"))) == PYTEST_OUTCOMES


@pytest.mark.parametrize("name", ["pytest-v-colour.txt", "pytest-xdist.txt"])
def test_pytest_colours_and_xdist_name_the_same_tests(name):
    cases = parse_output_cases(fixture(name))

    assert sorted(outcomes(cases)) == sorted(PYTEST_OUTCOMES)


def test_pytest_failures_carry_the_short_summary_message():
    cases = by_id(parse_output_cases(fixture("pytest-v-ra.txt")))

    assert cases["tests/test_calc.py::test_add_wrong"].message == "assert 2 == 3"
    database = cases["tests/test_calc.py::TestGroup::test_needs_database"]
    assert database.message.startswith("RuntimeError: data")
    # An expected failure passed: its reason is no failure message.
    assert cases["tests/test_calc.py::test_known_bug"].message == ""


def test_pytest_short_summary_alone_is_read():
    output = "PASSED tests/a.py::test_one\nFAILED tests/a.py::test_two - boom\n"

    assert outcomes(parse_output_cases(output)) == [
        ("tests/a.py::test_one", "passed"),
        ("tests/a.py::test_two", "failed"),
    ]


def test_pytest_collection_error_names_the_file():
    output = "ERROR tests/test_broken.py - ImportError: no module named x\n"

    assert outcomes(parse_output_cases(output)) == [("tests/test_broken.py", "error")]


def test_pytest_skip_summary_without_a_node_id_is_not_a_test():
    output = "SKIPPED [1] tests/test_calc.py:21: not on this platform\n"

    assert parse_output_cases(output) is None


def test_pytest_parametrised_id_with_spaces_and_brackets_is_whole():
    output = "tests/t.py::test_p[a b-[1]] PASSED                         [ 50%]\n"

    assert outcomes(parse_output_cases(output)) == [
        ("tests/t.py::test_p[a b-[1]]", "passed")
    ]


def test_a_teardown_error_after_a_pass_is_the_outcome():
    output = "tests/t.py::test_a PASSED\ntests/t.py::test_a ERROR\n"

    assert outcomes(parse_output_cases(output)) == [("tests/t.py::test_a", "error")]


def test_a_rerun_keeps_the_first_place_and_the_last_outcome():
    output = "t.py::test_a FAILED\nt.py::test_b PASSED\nt.py::test_a PASSED\n"

    assert outcomes(parse_output_cases(output)) == [
        ("t.py::test_a", "passed"),
        ("t.py::test_b", "passed"),
    ]


# unittest and Django's runner

UNITTEST_OUTCOMES = {
    "calc.test_calc.CalcTests.test_add": "passed",
    "calc.test_calc.CalcTests.test_add_wrong": "failed",
    "calc.test_calc.CalcTests.test_divide": "error",
    "calc.test_calc.CalcTests.test_documented": "passed",
    "calc.test_calc.CalcTests.test_fixed_bug": "failed",
    "calc.test_calc.CalcTests.test_known_bug": "passed",
    "calc.test_calc.CalcTests.test_ordered": "failed",
    "calc.test_calc.CalcTests.test_skipped": "skipped",
}


@pytest.mark.parametrize("version", ["310", "311", "312", "313"])
def test_unittest_gives_one_id_per_test_on_every_python(version):
    cases = parse_output_cases(fixture(f"unittest-py{version}.txt"))

    assert dict(outcomes(cases)) == UNITTEST_OUTCOMES
    assert len(cases) == len(UNITTEST_OUTCOMES)


@pytest.mark.parametrize("version", ["310", "313"])
def test_unittest_failures_carry_the_exception_line(version):
    cases = by_id(parse_output_cases(fixture(f"unittest-py{version}.txt")))

    assert cases["calc.test_calc.CalcTests.test_add_wrong"].message == (
        "AssertionError: 2 != 3"
    )
    assert cases["calc.test_calc.CalcTests.test_divide"].message == (
        "ZeroDivisionError: division by zero"
    )
    # A failed subtest fails its test, with the subtest's report.
    assert cases["calc.test_calc.CalcTests.test_ordered"].message == (
        "AssertionError: 3 not less than 2"
    )
    assert cases["calc.test_calc.CalcTests.test_fixed_bug"].message == ""


def test_unittest_outcome_after_the_tests_own_output_is_read():
    output = "test_a (pkg.tests.T.test_a) ... WARNING:root:slow disk\nok\n"

    assert outcomes(parse_output_cases(output)) == [("pkg.tests.T.test_a", "passed")]


def test_unittest_outcome_after_a_skipped_subtest_is_the_tests():
    output = (
        "test_a (pkg.tests.T.test_a) ... \n"
        "  test_a (pkg.tests.T.test_a) (n=1) ... skipped 'later'\n"
        "ok\n"
    )

    assert outcomes(parse_output_cases(output)) == [("pkg.tests.T.test_a", "passed")]


def test_unittest_docstring_line_before_the_outcome_is_read():
    output = (
        "test_a (pkg.tests.T.test_a)\n"
        "Adds one ... and then another. ... FAIL\n"
        "test_b (pkg.tests.T.test_b) ... ok\n"
    )

    assert outcomes(parse_output_cases(output)) == [
        ("pkg.tests.T.test_a", "failed"),
        ("pkg.tests.T.test_b", "passed"),
    ]


def test_django_runner_verbose_output_is_read():
    output = (
        "Found 2 test(s).\n"
        "Creating test database for alias 'default'...\n"
        "System check identified no issues (0 silenced).\n"
        "test_list (reviews.tests.test_views.ListTests.test_list) ... ok\n"
        "test_post (reviews.tests.test_views.ListTests.test_post) ... FAIL\n"
        "\n"
        "----------------------------------------------------------------------\n"
        "Ran 2 tests in 0.412s\n"
        "\n"
        "FAILED (failures=1)\n"
    )

    assert outcomes(parse_output_cases(output)) == [
        ("reviews.tests.test_views.ListTests.test_list", "passed"),
        ("reviews.tests.test_views.ListTests.test_post", "failed"),
    ]


def test_a_unittest_report_title_without_its_rule_is_not_read():
    assert parse_output_cases("FAIL: test_a (pkg.tests.T.test_a)\n") is None


# go test -v
#
# Go is not installed where the other fixtures were captured, so go-test-v.txt is
# written by hand, in the format Go's own tests pin for `go test -v` (=== RUN,
# PAUSE and CONT lines, log lines streamed with a four-space indent, subtests'
# results indented under their parent's, an ok/FAIL line per package).

GO_OUTCOMES = [
    ("example.com/calc::TestAdd", "passed"),
    ("example.com/calc::TestSub", "failed"),
    ("example.com/calc::TestSub/positive", "passed"),
    ("example.com/calc::TestSub/negative", "failed"),
    ("example.com/calc::TestDivide", "skipped"),
    ("example.com/calc::TestNew", "passed"),
    ("example.com/calc::TestTable", "passed"),
    ("example.com/calc::TestTable/one_plus_one", "passed"),
    ("example.com/calc::TestTable/two_plus_two", "passed"),
    ("example.com/calc/parse::TestNew", "passed"),
    ("example.com/calc/parse::TestParse", "failed"),
]


def test_go_tests_and_subtests_are_named_within_their_package():
    assert outcomes(parse_output_cases(fixture("go-test-v.txt"))) == GO_OUTCOMES


def test_go_failures_carry_their_log_lines_and_durations():
    cases = by_id(parse_output_cases(fixture("go-test-v.txt")))

    negative = cases["example.com/calc::TestSub/negative"]
    assert negative.message == "calc_test.go:21: Sub(1, 2) = 1, want -1"
    assert cases["example.com/calc/parse::TestParse"].message == (
        'parse_test.go:12: unexpected token ")"\nparse_test.go:13: want 2 arguments'
    )
    assert cases["example.com/calc::TestDivide"].message == ""
    assert cases["example.com/calc::TestTable"].duration_s == 0.01


def test_go_output_cut_before_the_package_line_keeps_bare_names():
    output = "=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n"

    assert outcomes(parse_output_cases(output)) == [("TestA", "passed")]


def test_go_count_reruns_keep_the_last_outcome():
    output = "--- FAIL: TestA (0.00s)\n--- PASS: TestA (0.00s)\nok  \tpkg\t0.1s\n"

    assert outcomes(parse_output_cases(output)) == [("pkg::TestA", "passed")]


# cargo test

CARGO_OUTCOMES = [
    ("calc/src/lib.rs::tests::div_by_zero_panics", "passed"),
    ("calc/src/lib.rs::tests::it_adds", "passed"),
    ("calc/src/lib.rs::tests::it_is_slow", "skipped"),
    ("calc/src/lib.rs::tests::it_adds_wrong", "failed"),
    ("calc/src/lib.rs::tests::nested::deep", "passed"),
    ("smoke/tests/smoke.rs::it_adds", "passed"),
    ("calc/doc::src/lib.rs - div (line 12)", "failed"),
    ("calc/doc::src/lib.rs - add (line 3)", "passed"),
]


def test_cargo_tests_are_named_within_their_test_binary():
    assert outcomes(parse_output_cases(fixture("cargo-test.txt"))) == CARGO_OUTCOMES


def test_cargo_failures_carry_the_panic():
    cases = by_id(parse_output_cases(fixture("cargo-test.txt")))

    unit = cases["calc/src/lib.rs::tests::it_adds_wrong"].message
    assert "assertion `left == right` failed: one and one" in unit
    assert "RUST_BACKTRACE" not in unit
    doc = cases["calc/doc::src/lib.rs - div (line 12)"].message
    assert "attempt to divide by zero" in doc


def test_cargo_colours_name_the_same_tests():
    cases = parse_output_cases(fixture("cargo-test-colour.txt"))

    assert sorted(outcomes(cases)) == sorted(CARGO_OUTCOMES[:5])


def test_cargo_lines_before_any_binary_keep_bare_names():
    output = "test it_works ... ok <0.003s>\ntest result: ok. 1 passed; 0 failed;\n"

    cases = parse_output_cases(output)

    assert cases == [TestCase("it_works", "passed", 0.003)]


# jest --verbose

JEST_OUTCOMES = [
    ("src/calc.test.js > top level", "passed"),
    ("src/calc.test.js > calc > adds", "passed"),
    ("src/calc.test.js > calc > adds wrong", "failed"),
    ("src/calc.test.js > calc > is skipped", "skipped"),
    ("src/calc.test.js > calc > divides", "skipped"),
    ("src/calc.test.js > calc > nested group > orders 1 before 2", "passed"),
    ("src/calc.test.js > calc > nested group > orders 2 before 3", "passed"),
    ("src/other.test.js > also adds", "passed"),
]


@pytest.mark.parametrize("name", ["jest-verbose.txt", "jest-verbose-colour.txt"])
def test_jest_nested_describes_join_into_one_id(name):
    assert outcomes(parse_output_cases(fixture(name))) == JEST_OUTCOMES


def test_jest_failures_carry_the_message_without_the_stack():
    cases = by_id(parse_output_cases(fixture("jest-verbose.txt")))

    failure = cases["src/calc.test.js > calc > adds wrong"]
    assert failure.message.startswith(
        "expect(received).toBe(expected) // Object.is equality\nExpected: 3"
    )
    assert "at Object" not in failure.message
    assert failure.duration_s == 0.033


def test_jest_windows_marks_and_slow_file_headers_are_read():
    output = (
        "FAIL src/slow.test.js (6.251 s)\n"
        "  \u221a works (5 ms)\n"
        "  \u00d7 breaks\n"
        "\n"
        "Tests:       1 failed, 1 passed, 2 total\n"
    )

    assert outcomes(parse_output_cases(output)) == [
        ("src/slow.test.js > works", "passed"),
        ("src/slow.test.js > breaks", "failed"),
    ]


# vitest --reporter=verbose

VITEST_OUTCOMES = [
    ("src/calc.test.ts > calc > adds", "passed"),
    ("src/calc.test.ts > calc > adds wrong", "failed"),
    ("src/calc.test.ts > calc > is skipped", "skipped"),
    ("src/calc.test.ts > calc > divides", "skipped"),
    ("src/calc.test.ts > calc > nested group > orders 1 before 2", "passed"),
    ("src/calc.test.ts > calc > nested group > orders 2 before 3", "passed"),
    ("src/calc.test.ts > top level", "passed"),
    ("src/other.test.ts > also adds", "passed"),
]


@pytest.mark.parametrize("name", ["vitest-verbose.txt", "vitest-verbose-colour.txt"])
def test_vitest_ids_are_as_vitest_prints_them(name):
    cases = parse_output_cases(fixture(name))

    assert outcomes(cases) == VITEST_OUTCOMES
    failure = by_id(cases)["src/calc.test.ts > calc > adds wrong"]
    assert failure.message == "expected 2 to be 3 // Object.is equality"


def test_vitest_suffixes_are_not_part_of_the_id():
    output = (
        " \u2713 src/a.test.ts > flaky 12ms (retry x2) 31 MB heap used\n"
        " \u2713 src/a.test.ts > slow  1.20s\n"
        " \u2193 src/a.test.ts > later [skipped]\n"
        " \u2713 |unit| src/a.test.ts > in a project 1ms\n"
    )

    assert parse_output_cases(output) == [
        TestCase("src/a.test.ts > flaky", "passed", 0.012),
        TestCase("src/a.test.ts > slow", "passed", 1.2),
        TestCase("src/a.test.ts > later", "skipped"),
        TestCase("|unit| src/a.test.ts > in a project", "passed", 0.001),
    ]


# Any runner


def test_output_without_test_lines_gives_none():
    summary = "==================== 1 failed, 3 passed in 0.12s ====================\n"

    assert parse_output_cases("") is None
    assert parse_output_cases(summary) is None
    assert parse_output_cases("make: *** [test] Error 1\n") is None


@pytest.mark.parametrize(
    "output",
    [
        "collected 0 items\n\n==== no tests ran in 0.01s ====\n",
        "\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed;\n",
        "\n---------\nRan 0 tests in 0.000s\n\nNO TESTS RAN\n",
        "testing: warning: no tests to run\nPASS\nok  \tpkg\t0.01s\n",
        "No tests found, exiting with code 1\n",
    ],
    ids=["pytest", "cargo", "unittest", "go", "jest"],
)
def test_a_run_that_reports_no_tests_gives_an_empty_list(output):
    assert parse_output_cases(output) == []


def test_outputs_of_several_runners_are_read_together():
    output = fixture("pytest-v-ra.txt") + fixture("cargo-test.txt")

    assert outcomes(parse_output_cases(output)) == PYTEST_OUTCOMES + CARGO_OUTCOMES


@pytest.mark.parametrize(
    "name", sorted(path.name for path in FIXTURES.glob("*.txt")), ids=str
)
def test_crlf_line_ends_read_the_same(name):
    text = fixture(name)

    assert parse_output_cases(text.replace("\n", "\r\n")) == parse_output_cases(text)


def test_a_line_redrawn_by_a_carriage_return_is_read_as_shown():
    output = "collecting ... \rtests/t.py::test_a PASSED  [100%]\n"

    assert outcomes(parse_output_cases(output)) == [("tests/t.py::test_a", "passed")]


# Hostile output


def test_cases_beyond_the_cap_are_dropped_but_kept_ones_still_update():
    lines = [f"t.py::test_{n} PASSED" for n in range(MAX_CASES + 10)]
    lines.append("t.py::test_0 FAILED")

    cases = parse_output_cases("\n".join(lines))

    assert len(cases) == MAX_CASES
    assert cases[0] == TestCase("t.py::test_0", "failed")
    assert cases[-1].id == f"t.py::test_{MAX_CASES - 1}"


def test_ids_and_lines_beyond_their_limits_are_dropped():
    long_id = "t.py::test_" + "x" * MAX_ID
    long_line = "t.py::test_b PASSED " + "x" * MAX_LINE
    output = f"{long_id} PASSED\n{long_line}\nt.py::test_c PASSED\n"

    assert outcomes(parse_output_cases(output)) == [("t.py::test_c", "passed")]


def test_a_long_failure_report_gives_a_capped_message():
    report = "\n".join(f"AssertionError: line {n} " + "x" * 80 for n in range(5000))
    output = (
        "test_a (pkg.T.test_a) ... FAIL\n\n"
        + ("=" * 70 + "\nFAIL: test_a (pkg.T.test_a)\n" + "-" * 70 + "\n")
        + (report + "\n\n" + "-" * 70 + "\nRan 1 test in 0.1s\n\nFAILED\n")
        + "tests/t.py::test_b PASSED\n"
    )

    cases = by_id(parse_output_cases(output))

    assert cases["pkg.T.test_a"].message.startswith("AssertionError: line 0 x")
    assert len(cases["pkg.T.test_a"].message) <= MAX_MESSAGE
    assert cases["tests/t.py::test_b"].outcome == "passed"


MEGABYTE = 1 << 20


@pytest.mark.parametrize(
    "output",
    [
        "\n" * MEGABYTE,
        "x" * MEGABYTE,
        ":" * MEGABYTE,
        " ... " * (MEGABYTE // 5),
        "[" * MEGABYTE,
        "\x1b[" + "0" * MEGABYTE,
        "\x1b]" * (MEGABYTE // 2),
        "\r" * MEGABYTE,
        "a (\n" * (MEGABYTE // 4),
        "a::b " * (MEGABYTE // 5),
        ("t.py::test[" + "a " * 1000 + "PASSED\n") * (MEGABYTE // 2016),
        ("test_a (m.C.test_a)" + " ... test_a (m.C.test_a)" * 160 + "\n") * 256,
        "PASS a.test.js\n" + "".join(" " * (2 + n % 2000) + "d\n" for n in range(2000)),
        "PASS a.test.js\n  \u25cf x\n" + "    y\n" * (MEGABYTE // 6),
        "=== RUN   TestX\n" + "    log\n" * (MEGABYTE // 8),
        "---- t stdout ----\n" + "x\n" * (MEGABYTE // 2),
        ("=" * 70 + "\nFAIL: test_a (m.C.test_a)\n" + "-" * 70 + "\n") * 5000,
        " \u00d7 a > b\n" + "   \u2192 x\n" * (MEGABYTE // 6),
    ],
    ids=[
        "newlines",
        "one-line",
        "colons",
        "dots",
        "brackets",
        "open-csi",
        "open-osc",
        "carriage-returns",
        "unittest-openings",
        "pytest-openings",
        "unclosed-parameters",
        "unittest-chain",
        "jest-indents",
        "jest-report",
        "go-log",
        "cargo-report",
        "unittest-reports",
        "vitest-report",
    ],
)
def test_pathological_output_is_read_without_error(output):
    cases = parse_output_cases(output)

    assert cases is None or all(isinstance(case, TestCase) for case in cases)


def test_ten_megabytes_of_hostile_output_are_read_in_linear_time():
    shapes = [
        "\n",
        "a (b)\n",
        "a::b\n",
        "t.py::test_a PASSED\n",
        "test a ... ok\n",
        "--- PASS: T (0.00s)\n",
        " \u2713 a > b 1ms\n",
        "x" * 5000 + "\n",
    ]
    output = "".join(shape * (10 * MEGABYTE // 8 // len(shape)) for shape in shapes)
    output += "PASS a.test.js\n" + "  \u2713 x\n" * (MEGABYTE // 6)

    started = time.process_time()
    cases = parse_output_cases(output)
    elapsed = time.process_time() - started

    assert len(output) > 10 * MEGABYTE
    assert {case.id for case in cases} == {
        "t.py::test_a",
        "a",
        "T",
        "a > b",
        "a.test.js > x",
    }
    # Linear work reads this in about two seconds; anything quadratic in hours.
    assert elapsed < 10


# Comparison


def cases_of(**outcomes_by_id):
    return [TestCase(test, outcome) for test, outcome in outcomes_by_id.items()]


def test_comparison_sorts_every_test_into_its_group():
    original = cases_of(
        a="passed",
        b="passed",
        c="failed",
        d="failed",
        e="passed",
        f="skipped",
        g="passed",
        i="error",
    )
    replay = cases_of(
        a="passed",
        e="skipped",
        d="error",
        c="passed",
        b="failed",
        f="passed",
        h="passed",
    )

    comparison = compare_cases(original, replay)

    assert comparison.newly_failing == ("b",)
    assert comparison.newly_skipped == ("e",)
    assert comparison.missing == ("g", "i")
    assert comparison.newly_passing == ("c",)
    assert comparison.both_failing == ("d",)
    assert comparison.added == ("h",)
    assert comparison.lost_passes == ("b", "e", "g")
    assert not comparison.keeps_every_pass


def test_every_pass_is_kept_when_failures_stay_or_go():
    original = cases_of(a="passed", b="failed", c="skipped", d="error")
    replay = cases_of(a="passed", b="passed", e="failed")

    comparison = compare_cases(original, replay)

    assert comparison.keeps_every_pass
    assert comparison.missing == ("c", "d")


def test_a_pass_missing_from_the_replay_is_not_kept():
    comparison = compare_cases(cases_of(a="passed"), [])

    assert comparison.missing == ("a",)
    assert comparison.lost_passes == ("a",)
    assert not comparison.keeps_every_pass


def test_comparison_ids_are_sorted_and_duplicates_keep_the_last():
    original = cases_of(z="passed", y="passed", x="passed")
    replay = [TestCase("z", "passed"), TestCase("z", "failed")]
    replay += cases_of(y="error", x="failed")

    comparison = compare_cases(original, replay)

    assert comparison.newly_failing == ("x", "y", "z")


def test_comparing_nothing_keeps_every_pass():
    comparison = compare_cases([], [])

    assert comparison.keeps_every_pass
    assert comparison.missing == comparison.added == ()


def test_the_same_run_parsed_twice_keeps_every_pass():
    cases = parse_output_cases(fixture("pytest-v-ra.txt"))

    comparison = compare_cases(cases, list(cases))

    assert comparison.keeps_every_pass
    assert comparison.both_failing == (
        "tests/test_calc.py::TestGroup::test_needs_database",
        "tests/test_calc.py::test_add_wrong",
    )
