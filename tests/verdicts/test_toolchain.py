"""Naming what a suite that could not start is missing (pure rules)."""

from __future__ import annotations

import pytest

from replayhub.testgate.gate import interpret
from replayhub.verdicts import Reason, SuiteResult, decide
from replayhub.verdicts.toolchain import missing_toolchain
from tests.verdicts.test_verdicts import facts


@pytest.mark.parametrize(
    ("output", "exit_code", "missing"),
    [
        ("/usr/bin/python3: No module named pytest\n", 1, "the Python module pytest"),
        (
            "ModuleNotFoundError: No module named 'requests.adapters'\n",
            2,
            "the Python module requests.adapters",
        ),
        ("bash: line 1: npm: command not found\n", 127, "the command npm"),
        ("sh: 1: tox: not found\n", 127, "the command tox"),
        ("env: \u2018node\u2019: No such file or directory\n", 127, "the command node"),
        (
            "bwrap: execvp pytest: No such file or directory\n",
            127,
            "the command pytest",
        ),
        ("Error: Cannot find module 'jest'\n", 1, "the module jest"),
        ("", 127, "a command (the test command exited 127: not found)"),
        (
            "permission denied\n",
            126,
            "an executable (the test command exited 126: found but not executable)",
        ),
        ("FAILED test_calc.py::test_add\n", 1, ""),
        ("", 0, ""),
        ("", None, ""),
    ],
)
def test_what_is_missing_is_read_from_the_output_or_the_exit_status(
    output, exit_code, missing
):
    assert missing_toolchain(output, exit_code) == missing


def test_a_hostile_module_name_is_cleaned_to_one_short_line():
    named = missing_toolchain("No module named '" + "x" * 5000 + "'", 1)

    assert len(named) < 260 and "\n" not in named


def test_a_suite_missing_its_runner_on_both_trees_is_tests_not_run_naming_it():
    not_started = SuiteResult(
        ran=False,
        passed=None,
        tests_executed=None,
        exit_code=1,
        missing="the Python module pytest",
    )

    decision = decide(facts(original=not_started, replay=not_started))

    assert decision.reason_code == Reason.TESTS_NOT_RUN
    assert "the sandbox lacks the Python module pytest" in decision.reason
    assert "setup phase" in decision.reason
    assert "(original exit code 1, replay exit code 1)" in decision.reason


def test_without_a_missing_name_the_reason_stays_as_it_was():
    decision = decide(
        facts(replay=SuiteResult(ran=False, passed=None, tests_executed=None))
    )

    assert decision.reason == "The test suite could not execute on the replay tree."


def test_exit_1_without_a_summary_still_counts_as_a_run_for_the_interpreter():
    # Only the test gate, which sees the output, turns it into "not started".
    assert interpret(exit_code=1, timed_out=False, limit_fired="", counts=None) == (
        True,
        False,
    )


def test_an_original_whose_every_test_failed_on_a_missing_module_is_not_run():
    # unittest reports a test module it cannot import as one failed test.
    lacking = SuiteResult(
        ran=True,
        passed=False,
        tests_executed=1,
        exit_code=1,
        missing="the Python module greetlib",
    )

    decision = decide(facts(original=lacking, replay=lacking))

    assert decision.reason_code == Reason.TESTS_NOT_RUN
    assert "lacks the Python module greetlib" in decision.reason


def test_a_replay_that_breaks_an_import_the_original_had_still_diverges():
    broken = SuiteResult(
        ran=True,
        passed=False,
        tests_executed=2,
        exit_code=1,
        missing="the Python module calc",
    )

    decision = decide(facts(replay=broken))

    assert decision.reason_code == Reason.REPLAY_FAILS_TESTS
