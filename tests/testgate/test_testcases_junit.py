"""A run's JUnit XML report read into test cases (``cases.parse_junit_cases``)."""

from __future__ import annotations

import pytest

from replayhub.testgate.cases import (
    MAX_MESSAGE,
    TestCase,
    parse_junit_cases,
)
from tests.testgate.captured import FIXTURES, by_id, outcomes

# JUnit XML


def test_pytest_junit_ids_are_classname_and_name():
    cases = parse_junit_cases((FIXTURES / "pytest-junit.xml").read_bytes())

    assert outcomes(cases) == [
        ("tests.test_calc::test_add", "passed"),
        ("tests.test_calc::test_add_wrong", "failed"),
        ("tests.test_calc::test_skipped", "skipped"),
        ("tests.test_calc::test_ordered[1-2]", "passed"),
        ("tests.test_calc::test_ordered[x-y z]", "passed"),
        ("tests.test_calc::test_known_bug", "skipped"),
        ("tests.test_calc.TestGroup::test_in_class", "passed"),
        ("tests.test_calc.TestGroup::test_needs_database", "error"),
    ]
    failure = by_id(cases)["tests.test_calc::test_add_wrong"]
    assert failure.message == "assert 2 == 3\n +  where 2 = add(1, 1)"


def test_jest_and_vitest_junit_reports_are_read():
    jest = parse_junit_cases(FIXTURES / "jest-junit.xml")
    vitest = parse_junit_cases(FIXTURES / "vitest-junit.xml")

    assert outcomes(jest)[:3] == [
        ("calc adds::calc adds", "passed"),
        ("calc adds wrong::calc adds wrong", "failed"),
        ("calc is skipped::calc is skipped", "skipped"),
    ]
    assert ("top level::top level", "passed") in outcomes(jest)
    assert len(jest) == 8
    assert outcomes(vitest)[:2] == [
        ("src/calc.test.ts::calc > adds", "passed"),
        ("src/calc.test.ts::calc > adds wrong", "failed"),
    ]
    assert by_id(vitest)["src/calc.test.ts::calc > adds wrong"].message == (
        "expected 2 to be 3 // Object.is equality"
    )


def test_junit_id_falls_back_to_the_file_then_to_the_name():
    report = b"""<testsuite>
    <testcase classname="" file="tests/a.py" name="test_one"/>
    <testcase name="test_two"/>
    <testcase classname="pkg" name=""/>
    </testsuite>"""

    assert outcomes(parse_junit_cases(report)) == [
        ("tests/a.py::test_one", "passed"),
        ("test_two", "passed"),
    ]


def test_junit_outcome_takes_failure_over_error_over_skip():
    report = b"""<testsuites><testsuite>
    <testcase classname="c" name="both"><error/><failure message="f"/></testcase>
    <testcase classname="c" name="error"><skipped/><error message="e"/></testcase>
    <testcase classname="c" name="skipped"><skipped message="later"/></testcase>
    <testcase classname="c" name="notrun" status="notrun"/>
    <testcase classname="c" name="flaky"><flakyFailure message="x"/></testcase>
    </testsuite></testsuites>"""

    assert parse_junit_cases(report) == [
        TestCase("c::both", "failed", None, "f"),
        TestCase("c::error", "error", None, "e"),
        TestCase("c::skipped", "skipped"),
        TestCase("c::notrun", "skipped"),
        TestCase("c::flaky", "passed"),
    ]


@pytest.mark.parametrize(
    ("time_", "expected"),
    [
        ("0.25", 0.25),
        ("3", 3.0),
        ("nan", None),
        ("inf", None),
        ("1e3", None),
        ("-1", None),
        ("1_0", None),
        ("", None),
        ("1,234.5", None),
    ],
)
def test_junit_time_is_the_duration_when_it_is_a_plain_number(time_, expected):
    report = f'<testsuite><testcase name="t" time="{time_}"/></testsuite>'

    assert parse_junit_cases(report.encode())[0].duration_s == expected


def test_junit_message_falls_back_to_the_text_and_is_capped():
    text = "x" * (MAX_MESSAGE * 3)
    report = f'<testsuite><testcase name="t"><failure>{text}</failure></testcase>'

    [case] = parse_junit_cases((report + "</testsuite>").encode())

    assert case.message == "x" * MAX_MESSAGE


def test_junit_duplicate_ids_keep_the_last_outcome():
    report = b"""<testsuite>
    <testcase classname="c" name="a"><failure/></testcase>
    <testcase classname="c" name="b"/>
    <testcase classname="c" name="a"/>
    </testsuite>"""

    assert outcomes(parse_junit_cases(report)) == [
        ("c::a", "passed"),
        ("c::b", "passed"),
    ]


def test_an_empty_junit_report_has_no_cases():
    assert parse_junit_cases(b'<testsuites tests="0"/>') == []


@pytest.mark.parametrize(
    "report",
    [
        b"",
        b"<testsuite>",
        b"<html><body><testcase name='t'/></body></html>",
        b"""<?xml version="1.0"?>
<!DOCTYPE testsuite [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>
<testsuite><testcase name="&lol2;"/></testsuite>""",
        b'<!DOCTYPE testsuite SYSTEM "http://example.com/x.dtd"><testsuite/>',
        '<?xml version="1.0" encoding="UTF-16"?><testsuite/>'.encode("utf-16"),
    ],
    ids=["empty", "unclosed", "not-junit", "entities", "external-dtd", "utf16"],
)
def test_junit_refused_by_parse_junit_gives_none(report):
    assert parse_junit_cases(report) is None


def test_junit_path_is_read_without_following_a_symlink(tmp_path):
    target = tmp_path / "elsewhere.xml"
    target.write_bytes(b'<testsuite><testcase name="t"/></testsuite>')
    link = tmp_path / "report.xml"
    link.symlink_to(target)

    assert parse_junit_cases(target) == [TestCase("t", "passed")]
    assert parse_junit_cases(link) is None


def test_junit_over_the_size_limit_is_refused():
    report = b'<testsuite><testcase name="t"/>' + b" " * 2000 + b"</testsuite>"

    assert parse_junit_cases(report, max_bytes=1000) is None
