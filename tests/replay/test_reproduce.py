"""Whole replays: a real repository, the scripted agent, the real sandbox, a verdict.

Each test drives one recorded run through ``services.replay_execute`` (what the
worker does) and checks what a reviewer would see stored on the replay.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from replayhub import services
from replayhub.demo.calculator import BAD, GOOD, OTHER_BAD
from replayhub.models import Replay, ReviewBand, TestRecord
from tests.conftest import ROOT, child_env
from tests.factories import make_calc_project, make_calc_run
from tests.scripted import original_commit

pytestmark = pytest.mark.django_db


def replay(run):
    replay = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=replay.pk)
    return Replay.objects.select_related("comparison").get(pk=replay.pk)


def outcomes(replay):
    return [(o.tree, o.attempt, o.passed) for o in replay.test_outcomes.all()]


def test_an_agent_that_writes_the_same_change_is_identical(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(calc_project, prompt="same", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("identical", "same_tree")
    assert result.status == "finished" and result.phase == "done"
    assert result.comparison.identical
    assert result.comparison.original_tree == result.comparison.replay_tree
    assert result.review_band is None  # identical reproductions are not queued
    assert outcomes(result) == []  # identity needs no tests
    assert "mode same" in result.agent_output


def test_a_different_change_that_passes_the_tests_is_equivalent(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(calc_project, prompt="other", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("equivalent", "tests_agree")
    assert result.review_band == ReviewBand.PASSED_DIFF_DIVERGED
    assert result.comparison.differing_paths == ["calc.py"]
    assert "sum((a, b))" in result.comparison.diff_of_diffs
    assert "a + b" in result.comparison.original_patch
    assert outcomes(result) == [("original", 1, True), ("replay", 1, True)]
    original = result.test_outcomes.get(tree="original")
    assert original.tests_executed == 2
    assert "Ran 2 tests" in original.output_tail
    classes = {c["name"]: c["evidence_class"] for c in result.evidence["checks"]}
    assert classes["tree identity"] == "cryptographically_verified"
    assert classes["tests on replay"] == "independently_executed"


def test_a_replay_that_breaks_the_tests_is_divergent(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(calc_project, prompt="bad", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("divergent", "replay_fails_tests")
    assert result.review_band == ReviewBand.DIVERGENT
    # The trees disagreed, so both were run twice more to rule out flakiness.
    assert len(outcomes(result)) == 6
    assert result.test_outcomes.get(tree="replay", attempt=1).tests_failed == 2


def test_a_divergence_on_tests_known_to_flip_is_inconclusive(
    calc_project, calc_base, calc_good, calc_repo
):
    # Earlier runs saw both tests pass and fail on the original tree.
    tree = calc_repo.tree(calc_good)
    for test in ("test_calc.AddTests.test_add", "test_calc.AddTests.test_add_negative"):
        TestRecord.objects.create(
            project=calc_project, tree_sha=tree, test_id=test, passed=3, failed=1
        )

    result = replay(
        make_calc_run(calc_project, prompt="bad", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("inconclusive", "flaky_tests")
    assert "test_calc.AddTests.test_add_negative" in result.reason


def test_touching_a_path_outside_the_allowed_globs_is_divergent(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(
            calc_project, prompt="outside", original=calc_good, base=calc_base
        )
    )

    assert (result.verdict, result.reason_code) == ("divergent", "disallowed_paths")
    assert result.comparison.disallowed_paths == ["notes.txt"]
    assert "notes.txt" in result.reason


def test_a_replay_whose_suite_runs_no_tests_is_below_the_evidence_floor(
    calc_project, calc_base, calc_good
):
    # With no test paths, the replay's own suite is the one that judges it.
    calc_project.test_paths = []
    calc_project.save()
    result = replay(
        make_calc_run(
            calc_project, prompt="notests", original=calc_good, base=calc_base
        )
    )

    assert (result.verdict, result.reason_code) == (
        "inconclusive",
        "below_evidence_floor",
    )
    assert result.test_outcomes.get(tree="replay", attempt=1).tests_executed == 0


def test_an_original_that_fails_in_the_sandbox_is_a_baseline_failure(
    calc_project, calc_repo, calc_base
):
    broken = original_commit(calc_repo, BAD, branch="agent/broken")
    run = make_calc_run(
        calc_project,
        prompt="other",
        original=broken,
        base=calc_base,
        original_tests_passed=True,
    )
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "baseline_failed")


def test_a_replay_that_fixes_a_recorded_failure_is_divergent(
    calc_project, calc_repo, calc_base
):
    broken = original_commit(calc_repo, BAD, branch="agent/broken")
    run = make_calc_run(
        calc_project,
        prompt="other",
        original=broken,
        base=calc_base,
        original_tests_passed=False,
    )
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("divergent", "replay_passes_tests")


def test_two_red_suites_are_never_equivalent(calc_project, calc_repo, calc_base):
    broken = original_commit(calc_repo, OTHER_BAD, branch="agent/broken")
    run = make_calc_run(
        calc_project,
        prompt="bad",
        original=broken,
        base=calc_base,
        original_tests_passed=False,
    )
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("divergent", "both_fail")


def test_a_first_parent_base_is_never_trusted_even_for_identical_trees(
    calc_project, calc_repo
):
    # The write-back landed directly on main: no fork point can be found.
    fix = calc_repo.commit({"calc.py": GOOD}, "agent fix on main")
    result = replay(make_calc_run(calc_project, prompt="same", original=fix))

    assert (result.verdict, result.reason_code) == ("inconclusive", "base_untrusted")
    assert result.provenance["base"]["source"] == "first-parent"
    assert result.comparison.identical


def test_a_multi_commit_write_back_is_replayed_from_its_fork_point(
    calc_project, calc_repo, calc_base
):
    calc_repo.commit(
        {"calc.py": "def add(a, b):\n    return b + a\n"}, "wip", branch="agent/x"
    )
    tip = calc_repo.commit({"calc.py": GOOD}, "done", branch="agent/x")
    calc_repo.checkout("main")
    calc_repo.commit({"README.md": "main moved on\n"}, "unrelated")

    result = replay(make_calc_run(calc_project, prompt="same", original=tip))

    assert result.provenance["base"]["source"] == "fork-point"
    assert result.provenance["base"]["sha"] == calc_base
    assert (result.verdict, result.reason_code) == ("identical", "same_tree")


def test_a_project_without_a_test_command_cannot_rule_on_a_different_change(
    calc_repo, calc_base, calc_good
):
    project = make_calc_project(calc_repo, test_command=[])
    result = replay(
        make_calc_run(project, prompt="other", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("inconclusive", "no_test_command")


def test_a_test_command_that_cannot_start_is_tests_not_run(
    calc_repo, calc_base, calc_good
):
    project = make_calc_project(calc_repo, test_command=["no-such-test-runner"])
    result = replay(
        make_calc_run(project, prompt="other", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("inconclusive", "tests_not_run")
    assert result.test_outcomes.get(tree="original", attempt=1).exit_code == 127


def test_an_agent_that_changes_nothing_is_inconclusive(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(
            calc_project, prompt="nothing", original=calc_good, base=calc_base
        )
    )

    assert (result.verdict, result.reason_code) == ("inconclusive", "no_change")


def test_an_agent_that_crashes_without_a_change_says_so(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(calc_project, prompt="crash", original=calc_good, base=calc_base)
    )

    # It failed before any model call: the command, not the model, is at fault.
    assert (result.verdict, result.reason_code) == ("inconclusive", "agent_failed")
    assert result.agent_exit_code == 3
    assert "status 3" in result.reason


def test_an_agent_past_its_time_limit_is_a_timeout(calc_repo, calc_base, calc_good):
    project = make_calc_project(calc_repo, time_limit_seconds=2)
    result = replay(
        make_calc_run(project, prompt="sleep", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("inconclusive", "timeout")
    assert result.evidence["agent"]["timed_out"]


def test_an_agent_over_its_memory_cap_is_cap_fired(calc_repo, calc_base, calc_good):
    project = make_calc_project(calc_repo, memory_limit_mb=128)
    result = replay(
        make_calc_run(project, prompt="hog", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "memory" in result.reason


def test_an_original_commit_missing_from_the_repository_is_a_fixture_failure(
    calc_project, calc_base
):
    result = replay(
        make_calc_run(calc_project, prompt="same", original="ab" * 20, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("inconclusive", "fixture_failed")
    assert "abababab" in result.reason


def test_the_agent_usage_file_is_recorded(calc_project, calc_base, calc_good):
    result = replay(
        make_calc_run(calc_project, prompt="usage", original=calc_good, base=calc_base)
    )

    assert result.usage == {
        "input_tokens": 1200,
        "output_tokens": 300,
        "turns": 3,
        "cost_usd": "0.42",
    }
    assert result.tokens == 1500
    assert str(result.cost_usd) == "0.4200"


def test_nothing_of_a_replay_survives_it(calc_project, calc_base, calc_good, settings):
    run = make_calc_run(
        calc_project, prompt="other", original=calc_good, base=calc_base
    )
    result = replay(run)

    assert result.verdict == "equivalent"
    work = settings.REPLAYHUB_WORK_DIR
    assert not (work / f"replay-{result.pk}").exists()


def test_a_claimed_replay_is_not_run_twice(calc_project, calc_base, calc_good):
    run = make_calc_run(calc_project, prompt="same", original=calc_good, base=calc_base)
    first = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=first.pk)
    finished_at = Replay.objects.get(pk=first.pk).finished_at

    assert services.replay_execute(replay_id=first.pk) is None
    assert Replay.objects.get(pk=first.pk).finished_at == finished_at


@pytest.mark.django_db(transaction=True)
def test_reproduce_sync_json_prints_the_verdict(calc_project, calc_base, calc_good):
    run = make_calc_run(
        calc_project, prompt="other", original=calc_good, base=calc_base
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "reproduce", str(run.pk), "--sync", "--json"],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["verdict"] == "equivalent"
    assert data["reason_code"] == "tests_agree"
    assert data["reason"]
    assert data["provenance"]["base"]["source"] == "recorded"
    assert data["comparison"]["differing_paths"] == ["calc.py"]
    assert "diff_of_diffs" not in data["comparison"]
    assert data["original_test"]["passed"] is True
    assert data["replay_test"]["tests_executed"] == 2
    assert {c["name"] for c in data["evidence"]} >= {"tree identity", "tests on replay"}


def test_reproduce_by_project_and_external_id_refuses_an_unknown_run(calc_project):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="has no run 'nope'"):
        call_command("reproduce", "--project", "calc", "--external-id", "nope")


def test_the_worker_environment_never_reaches_the_agent(
    calc_project, calc_base, calc_good
):
    os.environ["REPLAYHUB_TEST_SECRET"] = "hunter2"
    try:
        run = make_calc_run(
            calc_project, prompt="env", original=calc_good, base=calc_base
        )
        result = replay(run)
    finally:
        del os.environ["REPLAYHUB_TEST_SECRET"]
    assert result.verdict == "identical"
    assert "REPLAYHUB_TASK_ID=env" in result.agent_output
    assert "REPLAYHUB_TEST_SECRET" not in result.agent_output
    assert "DATABASE_URL" not in result.agent_output
