"""A mini-swe-agent SWE-bench batch folder imported whole with ``--format
auto``: the folder as ``mini-extra swebench`` 2.4.6 writes it (its
``update_preds_file`` and ``agent.save``), each trajectory the real ``mini``
command's file (``tests/fixtures/agents/mini-swe-agent/``) given the batch
runner's ``instance_id`` and ``info``."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import call_command

from replayhub.ingest.transcripts import loader
from replayhub.models import Run
from tests.factories import make_git_project
from tests.gitrepos import make_repo
from tests.ingest.test_transcript_mini_swe_agent import CART, PATCH, trajectory

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "openai/gpt-4o-mini"
OTHER_PATCH = PATCH.replace("sum(lines)", "sum(lines) + 0")
# Named to sort before and after preds.json: the folder's order must not
# decide which file a run is read from.
EARLY, LATE, ALONE = "acme__cart-1", "zeta__cart-2", "midway__cart-3"


def write_batch(folder: Path, patches: dict[str, str], trajectories: list[str]):
    """The batch runner's output folder: a trajectory for each of
    ``trajectories``, ``preds.json`` with a prediction for each of
    ``patches``, its log and its exit statuses."""
    folder.mkdir()
    for instance in trajectories:
        document = trajectory()
        document["info"].update(exit_status="Submitted", submission=PATCH)
        document["instance_id"] = instance
        (folder / instance).mkdir()
        path = folder / instance / f"{instance}.traj.json"
        path.write_text(json.dumps(document, indent=2))
    preds = {
        instance: {
            "model_name_or_path": MODEL,
            "instance_id": instance,
            "model_patch": patch,
        }
        for instance, patch in patches.items()
    }
    (folder / "preds.json").write_text(json.dumps(preds, indent=2))
    (folder / "minisweagent.log").write_text("INFO Results will be saved to out\n")
    statuses = "instances_by_exit_status:\n  Submitted:\n  - acme__cart-1\n"
    (folder / "exit_statuses_1764977000.123.yaml").write_text(statuses)


def import_folder(folder: Path, project, instances: Path) -> tuple[int, dict, str]:
    """The command's exit status and JSON summary, and the text summary of
    importing the folder a second time (which stores nothing new)."""
    said = {}
    for form in ("--json", None):
        out = io.StringIO()
        code = 0
        try:
            call_command(
                "import_runs", str(folder), "--format", "auto", "--project",
                project.slug, "--instances", str(instances), "--no-preflight",
                *([form] if form else []), stdout=out, stderr=io.StringIO(),
            )  # fmt: skip
        except SystemExit as exit_status:
            code = int(exit_status.code or 0)
        said[form] = (code, out.getvalue())
    (code, as_json), (_, text) = said["--json"], said[None]
    return code, json.loads(as_json), text


@pytest.fixture
def project(tmp_path):
    repo = make_repo(tmp_path, {"cart.py": CART})
    instances = tmp_path / "instances.jsonl"
    instances.write_text(
        "".join(
            json.dumps(
                {
                    "instance_id": instance,
                    "base_commit": repo.head(),
                    "problem_statement": "Cart.total() returns 0",
                }
            )
            + "\n"
            for instance in (EARLY, LATE, ALONE)
        )
    )
    return make_git_project(repo), instances


def test_each_instance_is_one_run_read_from_its_trajectory(project, tmp_path):
    folder = tmp_path / "out"
    write_batch(folder, {EARLY: PATCH, LATE: PATCH}, [EARLY, LATE])

    code, summary, text = import_folder(folder, *project)

    assert code == 0
    assert (summary["imported"], summary["invalid"], summary["conflicts"]) == (
        2,
        [],
        [],
    )
    assert summary["from_trajectories"] == 2
    runs = {run.title: run for run in Run.objects.all()}
    assert set(runs) == {EARLY, LATE}
    for instance, run in runs.items():
        assert run.external_id == f"{MODEL}:{instance}"
        assert run.record["transcript"]["format"] == "mini-swe-agent"
        assert run.usage["cost_usd"] == 0.0004458
        assert run.patch.patch == PATCH
    assert (
        f"{folder}/preds.json: line 1: 2 predictions already read from their "
        "trajectories (the same instance, model and patch): not imported again"
    ) in text.splitlines()
    # The runner's log and exit statuses are no transcripts, and no error.
    assert f"{folder}/minisweagent.log: line 0: mini-swe-agent's batch log, " in text


def test_importing_the_folder_again_stores_nothing_twice(project, tmp_path):
    folder = tmp_path / "out"
    write_batch(folder, {EARLY: PATCH, LATE: PATCH}, [EARLY, LATE])
    import_folder(folder, *project)

    code, summary, _ = import_folder(folder, *project)

    assert code == 0
    assert (summary["imported"], summary["duplicates"]) == (0, 2)
    assert (summary["conflicts"], summary["from_trajectories"]) == ([], 2)
    assert Run.objects.count() == 2


def test_a_prediction_without_its_trajectory_is_imported_as_a_prediction(
    project, tmp_path
):
    folder = tmp_path / "out"
    write_batch(folder, {EARLY: PATCH, ALONE: PATCH}, [EARLY])

    code, summary, _ = import_folder(folder, *project)

    assert code == 0
    assert (summary["imported"], summary["from_trajectories"]) == (2, 1)
    formats = {
        run.title: run.record["transcript"]["format"] for run in Run.objects.all()
    }
    assert formats == {EARLY: "mini-swe-agent", ALONE: "swebench"}
    assert Run.objects.get(title=ALONE).patch.patch == PATCH


def test_a_prediction_whose_patch_differs_is_said_and_the_trajectory_stands(
    project, tmp_path
):
    folder = tmp_path / "out"
    write_batch(folder, {EARLY: PATCH, LATE: OTHER_PATCH}, [EARLY, LATE])

    code, summary, text = import_folder(folder, *project)

    assert code == 0
    assert (summary["imported"], summary["conflicts"]) == (2, [])
    assert summary["from_trajectories"] == 1
    late = Run.objects.get(title=LATE)
    assert late.record["transcript"]["format"] == "mini-swe-agent"
    assert late.patch.patch == PATCH
    differing = [line for line in text.splitlines() if "differs" in line]
    assert differing == [
        f'{folder}/preds.json: line 1: "{LATE}": the prediction\'s patch differs '
        "from its trajectory's submission; the trajectory's run was imported, "
        "the prediction was not"
    ]
    assert (
        "1 prediction already read from its trajectory (the same instance, "
        "model and patch): not imported again"
    ) in text


def test_a_prediction_of_another_model_is_its_own_run(project, tmp_path):
    folder = tmp_path / "out"
    write_batch(folder, {EARLY: PATCH}, [EARLY])
    preds = json.loads((folder / "preds.json").read_text())
    preds[EARLY]["model_name_or_path"] = "acme-agent-v2"
    (folder / "preds.json").write_text(json.dumps(preds))

    code, summary, _ = import_folder(folder, *project)

    assert code == 0
    assert (summary["imported"], summary["from_trajectories"]) == (2, 0)
    assert set(Run.objects.values_list("external_id", flat=True)) == {
        f"{MODEL}:{EARLY}",
        f"acme-agent-v2:{EARLY}",
    }


def test_a_batch_read_in_a_process_of_its_own_imports_as_in_line(
    project, tmp_path, monkeypatch
):
    # Every import large enough for a reading process of its own: the
    # trajectories are read there, the predictions after them.
    monkeypatch.setattr(loader, "PROCESS_BYTES", 1)
    folder = tmp_path / "out"
    patches = {EARLY: PATCH, LATE: OTHER_PATCH, ALONE: PATCH}
    write_batch(folder, patches, [EARLY, LATE])

    code, summary, text = import_folder(folder, *project)

    assert code == 0
    assert (summary["imported"], summary["conflicts"]) == (3, [])
    assert summary["from_trajectories"] == 1
    formats = {
        run.title: run.record["transcript"]["format"] for run in Run.objects.all()
    }
    assert formats == {
        EARLY: "mini-swe-agent",
        LATE: "mini-swe-agent",
        ALONE: "swebench",
    }
    assert sum("differs" in line for line in text.splitlines()) == 1
    # Each run's patch is stored, found in either process.
    assert {run.patch.patch for run in Run.objects.all()} == {PATCH}


def test_predictions_imported_after_their_trajectories_are_those_runs(
    project, tmp_path
):
    folder = tmp_path / "out"
    write_batch(folder, {EARLY: PATCH, LATE: OTHER_PATCH, ALONE: PATCH}, [EARLY, LATE])
    preds = (tmp_path / "preds.json").resolve()
    (folder / "preds.json").rename(preds)
    import_folder(folder, *project)

    code, summary, text = import_folder(preds, *project)

    assert code == 0
    assert (summary["imported"], summary["conflicts"]) == (1, [])
    assert (summary["from_trajectories"], summary["enriched"]) == (1, 0)
    formats = {
        run.external_id: run.record["transcript"]["format"] for run in Run.objects.all()
    }
    assert formats == {
        f"{MODEL}:{EARLY}": "mini-swe-agent",
        f"{MODEL}:{LATE}": "mini-swe-agent",
        f"{MODEL}:{ALONE}": "swebench",
    }
    assert (
        f"{preds}: line 1: 1 prediction already read from its trajectory (the "
        "same instance, model and patch): not imported again"
    ) in text.splitlines()
    assert [line for line in text.splitlines() if "differs" in line] == [
        f'{preds}: line 1: "{LATE}": the prediction\'s patch differs from its '
        "trajectory's submission; the trajectory's run, imported before, "
        "stands: the prediction was not imported"
    ]


def test_a_predictions_jsonl_file_names_the_runs_of_the_trajectories(project, tmp_path):
    folder = tmp_path / "out"
    write_batch(folder, {}, [EARLY])
    (folder / "preds.json").unlink()
    import_folder(folder, *project)
    predictions = tmp_path / "predictions.jsonl"
    prediction = {
        "instance_id": EARLY,
        "model_name_or_path": MODEL,
        "model_patch": PATCH,
    }
    predictions.write_text(json.dumps(prediction) + "\n")

    code, summary, _ = import_folder(predictions, *project)

    assert code == 0
    assert (summary["imported"], summary["conflicts"]) == (0, [])
    assert summary["from_trajectories"] == 1
    assert list(Run.objects.values_list("external_id", flat=True)) == [
        f"{MODEL}:{EARLY}"
    ]


def test_predictions_imported_again_from_a_newer_file_are_already_there(
    project, tmp_path
):
    # The batch runner writes preds.json again after each instance: the
    # predictions imported from it before are the same runs, though the
    # file's time (the predictions' inferred start) is another.
    folder = tmp_path / "out"
    write_batch(folder, {EARLY: PATCH}, [])
    preds = folder / "preds.json"
    import_folder(preds, *project)
    write_batch(tmp_path / "later", {EARLY: PATCH, ALONE: PATCH}, [])
    preds.write_bytes((tmp_path / "later" / "preds.json").read_bytes())
    os.utime(preds, (1_800_000_000, 1_800_000_000))

    code, summary, _ = import_folder(preds, *project)

    assert code == 0
    assert (summary["imported"], summary["duplicates"]) == (1, 1)
    assert summary["conflicts"] == []
    assert Run.objects.count() == 2
