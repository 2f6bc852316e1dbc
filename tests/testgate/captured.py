"""The runners' captured outputs (``fixtures/testcases``) and the helpers the
tests of ``testgate.cases`` read them with."""

from __future__ import annotations

from pathlib import Path

# Captured from the real runners, except go-test-v.txt: see the README there.
FIXTURES = Path(__file__).parent / "fixtures" / "testcases"


def fixture(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def outcomes(cases):
    return [(case.id, case.outcome) for case in cases]


def by_id(cases):
    return {case.id: case for case in cases}
