"""The original's tests judge the replay: whole replays in the real sandbox.

Each scripted agent mode is something agents under pressure do: weaken the
tests, drop them, delete an old one, write tests of their own, or make the
test process report success itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from replayhub import services
from replayhub.git.scratch import Scratch
from replayhub.models import CachedResult, Replay, TestRecord
from replayhub.sandbox import Limits, get_runner
from replayhub.testgate.gate import run_gate
from tests.factories import make_calc_run

pytestmark = pytest.mark.django_db


def replay(run) -> Replay:
    created = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=created.pk)
    return Replay.objects.get(pk=created.pk)


def trees(result: Replay) -> set[str]:
    return {o.tree for o in result.test_outcomes.all()}


def test_weakened_tests_do_not_make_a_buggy_replay_equivalent(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(calc_project, prompt="weaken", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == (
        "divergent",
        "replay_fails_reference_tests",
    )
    assert "test_calc.AddTests.test_add" in result.reason
    assert trees(result) == {"original", "replay", "reference"}
    # The replay's own, weakened suite passed: secondary evidence only.
    own = result.test_outcomes.get(tree="replay", attempt=1)
    assert own.passed is True
    changes = result.evidence["test_changes"]
    assert changes["changed"] == ["test_calc.py"]
    assert "changed 1 test file" in changes["summary"]


def test_dropped_tests_do_not_make_a_buggy_replay_equivalent(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(
            calc_project, prompt="droptests", original=calc_good, base=calc_base
        )
    )

    assert (result.verdict, result.reason_code) == (
        "divergent",
        "replay_fails_reference_tests",
    )
    assert result.evidence["test_changes"]["deleted"] == ["test_calc.py"]
    reference = result.test_outcomes.get(tree="reference", attempt=1)
    assert reference.tests_executed == 2 and reference.tests_failed == 2


def test_deleting_an_old_test_the_code_fails_is_divergent(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(
            calc_project, prompt="deloldtest", original=calc_good, base=calc_base
        )
    )

    assert (result.verdict, result.reason_code) == (
        "divergent",
        "replay_fails_reference_tests",
    )
    assert "test_add_negative" in result.reason
    failing = [
        case[0]
        for case in result.test_outcomes.get(tree="reference", attempt=1).cases
        if case[1] == "failed"
    ]
    assert failing == ["test_calc.AddTests.test_add_negative"]


def test_a_correct_replay_with_tests_of_its_own_stays_equivalent(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(
            calc_project, prompt="owntests", original=calc_good, base=calc_base
        )
    )

    assert (result.verdict, result.reason_code) == ("equivalent", "tests_agree")
    checks = {c["name"]: c for c in result.evidence["checks"]}
    assert checks["tests on reference"]["outcome"] == "pass"
    assert checks["test changes"]["outcome"] == "fail"
    assert checks["test ids"]["outcome"] == "pass"


def test_code_that_exits_early_with_a_fake_summary_is_never_equivalent(
    calc_project, calc_base, calc_good
):
    result = replay(
        make_calc_run(
            calc_project, prompt="exitearly", original=calc_good, base=calc_base
        )
    )

    assert result.verdict == "inconclusive"
    assert result.reason_code in {"test_interference", "tests_missing"}
    hits = result.evidence["interference"]
    assert {(hit["path"], hit["kind"]) for hit in hits} >= {
        ("calc.py", "process_exit_at_import")
    }
    checks = {c["name"]: c for c in result.evidence["checks"]}
    assert checks["test interference"]["outcome"] == "fail"
    assert "calc.py line 5" in checks["test interference"]["detail"]


def test_no_test_path_differs_so_nothing_extra_runs(calc_project, calc_base, calc_good):
    result = replay(
        make_calc_run(calc_project, prompt="other", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("equivalent", "tests_agree")
    assert trees(result) == {"original", "replay"}
    assert result.evidence["test_changes"]["summary"] == (
        "no test file differs from the original's"
    )


def test_the_original_result_is_reused_by_a_second_attempt(
    calc_project, calc_base, calc_good
):
    run = make_calc_run(
        calc_project, prompt="other", original=calc_good, base=calc_base
    )

    first = replay(run)
    second = replay(run)

    assert CachedResult.objects.filter(project=calc_project).count() == 1
    original = second.test_outcomes.get(tree="original", attempt=1)
    assert original.cached and not first.test_outcomes.get(tree="original").cached
    assert original.passed is True and original.tests_executed == 2
    # The second ran one suite in the sandbox, not two: the original's was kept.
    ran = [r.test_outcomes.filter(cached=False).count() for r in (first, second)]
    assert ran[1] == ran[0] - 1, ran
    assert (second.verdict, second.reason_code) == ("equivalent", "tests_agree")


def test_a_changed_test_command_misses_the_cache(calc_project, calc_base, calc_good):
    run = make_calc_run(
        calc_project, prompt="other", original=calc_good, base=calc_base
    )
    replay(run)
    calc_project.test_command = ["python3", "-m", "unittest", "-v", "test_calc"]
    calc_project.save()

    second = replay(run)

    assert not second.test_outcomes.get(tree="original", attempt=1).cached
    assert CachedResult.objects.filter(project=calc_project).count() == 2


def test_the_original_trees_outcomes_are_remembered(
    calc_project, calc_base, calc_good, calc_repo
):
    replay(
        make_calc_run(calc_project, prompt="bad", original=calc_good, base=calc_base)
    )

    original = TestRecord.objects.filter(
        project=calc_project, tree_sha=calc_repo.tree(calc_good)
    )
    assert {(r.test_id, r.passed, r.failed) for r in original} == {
        ("test_calc.AddTests.test_add", 3, 0),  # first run and two reruns
        ("test_calc.AddTests.test_add_negative", 3, 0),
    }
    # The replay's failing tree is its own doing: nothing about the tests.
    assert TestRecord.objects.filter(project=calc_project).count() == 2


def test_a_replay_whose_code_flips_does_not_excuse_a_later_failure(
    calc_project, calc_base, calc_good
):
    calc_project.flake_reruns = 6
    calc_project.save()
    # Random code: its own tests flip on its tree (when the first run fails).
    for i in range(4):
        replay(
            make_calc_run(
                calc_project,
                prompt="flaky",
                original=calc_good,
                base=calc_base,
                external_id=f"flaky-{i}",
            )
        )

    result = replay(
        make_calc_run(calc_project, prompt="bad", original=calc_good, base=calc_base)
    )

    assert (result.verdict, result.reason_code) == ("divergent", "replay_fails_tests")
    assert not TestRecord.objects.filter(passed__gt=0, failed__gt=0).exists()


def test_reproduce_json_of_a_weakened_replay_says_divergent(
    calc_project, calc_base, calc_good, capsys
):
    run = make_calc_run(
        calc_project, prompt="weaken", original=calc_good, base=calc_base
    )

    call_command("reproduce", str(run.pk), "--sync", "--json")

    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "divergent"
    assert out["reason_code"] == "replay_fails_reference_tests"
    assert out["test_changes"] == {
        "added": [],
        "changed": ["test_calc.py"],
        "deleted": [],
    }
    assert out["reference_test"]["passed"] is False
    evidence = {check["name"]: check for check in out["evidence"]}
    assert evidence["test changes"]["detail"].startswith("the replay changed")


def test_a_suite_that_flips_across_reruns_is_flaky(
    calc_repo, calc_good, settings, request
):
    """A random failure: the gate runs the tree again until it has seen both."""
    flaky = calc_repo.commit(
        {
            "calc.py": "import os\n_WRONG = os.urandom(1)[0] % 2 == 0\n"
            "def add(a, b):\n    return a - b if _WRONG else a + b\n"
        },
        "flaky add",
        branch="flaky",
    )
    # Under the work dir: every path the sandbox binds must be reachable by it.
    scratch = Scratch(Path(settings.REPLAYHUB_WORK_DIR) / "gate-flaky", calc_repo.path)
    scratch.remove()
    scratch.create()
    request.addfinalizer(scratch.remove)
    runner = get_runner("bwrap")
    steady = run_gate(
        scratch=scratch,
        trees={"original": scratch.resolve_tree(calc_good)},
        runner=runner,
        argv=["python3", "-m", "unittest", "-v"],
        limits=Limits(wall_seconds=60),
        reruns=0,
    ).first("original")
    assert steady is not None and steady.passed

    for _ in range(12):
        gate = run_gate(
            scratch=scratch,
            trees={"original": "cached", "replay": scratch.resolve_tree(flaky)},
            runner=runner,
            argv=["python3", "-m", "unittest", "-v"],
            limits=Limits(wall_seconds=60),
            reruns=12,
            known={"original": steady},
        )
        if len(gate.of("replay")) > 1:
            break
    else:
        pytest.fail("the flaky code passed its first run twelve times in a row")

    suite = gate.suite("replay")
    assert suite is not None and suite.flaky
    assert "test_calc.AddTests.test_add" in gate.flipping()
    assert len(gate.of("original")) == 1  # the cached original is not run again
