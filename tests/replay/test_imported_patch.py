"""Whole replays of runs whose original is a patch (SWE-bench predictions):
the replay applies the run's stored patch in its own scratch repository, so
the verdict is the one a committed original gets, on a project on a path and
on a host whose mirror of a remote never saw the import."""

from __future__ import annotations

import json

import pytest

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.git import mirrors
from replayhub.ingest.services import transcripts_import
from replayhub.models import ImportFormat, Preflight, Replay, Run, RunPatch
from tests.ingest.test_imported_patches import repository_state
from tests.replay.test_remote_repository import daemon, remote_project  # noqa: F401
from tests.scripted import original_commit

pytestmark = pytest.mark.django_db(transaction=True)


def replay(run):
    replay = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=replay.pk)
    return Replay.objects.select_related("comparison").get(pk=replay.pk)


def import_prediction(tmp_path, project, base, patch, prompt):
    path = tmp_path / f"{prompt}.jsonl"
    prediction = {
        "instance_id": f"calc__calc-{prompt}",
        "model_name_or_path": "acme",
        "model_patch": patch,
        "base_commit": base,
        "problem_statement": prompt,
    }
    path.write_text(json.dumps(prediction) + "\n")
    summary = transcripts_import(
        project=project, paths=[path], format=ImportFormat.SWEBENCH
    )
    assert (summary.imported, summary.invalid) == (1, [])
    return Run.objects.get(external_id=f"acme:calc__calc-{prompt}")


def good_patch(calc_repo, calc_base):
    good = original_commit(calc_repo, GOOD, branch="agent/good")
    return calc_repo.git("diff", "--no-ext-diff", calc_base, good) + "\n"


def test_a_replay_of_an_imported_patch_reaches_the_verdicts_of_a_commit(
    tmp_path, calc_project, calc_repo, calc_base
):
    patch = good_patch(calc_repo, calc_base)
    before = repository_state(calc_repo.path)
    same = import_prediction(tmp_path, calc_project, calc_base, patch, "same")
    other = import_prediction(tmp_path, calc_project, calc_base, patch, "other")
    assert same.preflight == Preflight.READY

    identical, equivalent = replay(same), replay(other)

    assert (identical.verdict, identical.reason_code) == ("identical", "same_tree")
    assert identical.comparison.original_tree == same.patch.tree
    assert (equivalent.verdict, equivalent.reason_code) == (
        "equivalent",
        "tests_agree",
    )
    assert "a + b" in equivalent.comparison.original_patch
    assert repository_state(calc_repo.path) == before


def test_a_host_whose_mirror_never_saw_the_import_replays_the_patch(
    tmp_path,
    remote_project,  # noqa: F811 -- the fixture imported above
    calc_repo,
    calc_base,
):
    patch = good_patch(calc_repo, calc_base)
    run = import_prediction(tmp_path, remote_project, calc_base, patch, "same")
    # Another worker: its mirror is cloned from the remote afresh.
    mirror = remote_project.mirror()
    mirrors.remove_mirrors(mirror.root, mirror.key)

    result = replay(run)

    assert (result.verdict, result.reason_code) == ("identical", "same_tree")


def test_a_stored_patch_that_no_longer_makes_its_tree_is_inconclusive(
    tmp_path, calc_project, calc_repo, calc_base
):
    patch = good_patch(calc_repo, calc_base)
    run = import_prediction(tmp_path, calc_project, calc_base, patch, "same")
    tree = run.patch.tree
    RunPatch.objects.filter(run=run).update(tree="0" * 40)

    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "fixture_failed")
    assert result.reason.endswith(
        "the original could not be made from the run's stored patch: at the base "
        f"{calc_base[:12]} it makes the tree {tree[:12]}, not 000000000000 as at "
        "import."
    )
