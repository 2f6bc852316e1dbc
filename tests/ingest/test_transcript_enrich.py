"""A mini-swe-agent trajectory imported after the SWE-bench prediction of the
same run enriches the run stored from the prediction
(:mod:`replayhub.ingest.transcripts.enrich`): real files in a temporary
folder, imported with the command."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from replayhub.ingest.transcripts.conversation import conversation
from replayhub.models import Run
from tests.factories import make_git_project
from tests.gitrepos import make_repo
from tests.ingest.test_transcript_mini_swe_agent import CART, TASK
from tests.ingest.test_transcript_mini_swe_batch import (
    EARLY,
    LATE,
    MODEL,
    OTHER_PATCH,
    PATCH,
    write_batch,
)

pytestmark = pytest.mark.django_db(transaction=True)

STATEMENT = "Cart.total() returns 0"
USAGE = {
    "input_tokens": 1210 + 1342,
    "output_tokens": 64 + 41,
    "turns": 2,
    "cost_usd": 0.0004458,
}


@pytest.fixture
def project(tmp_path):
    """The project of the batch's repository, and the instances file."""
    repo = make_repo(tmp_path, {"cart.py": CART})
    instances = tmp_path / "instances.jsonl"
    instances.write_text(
        "".join(
            json.dumps(
                {
                    "instance_id": instance,
                    "base_commit": repo.head(),
                    "problem_statement": STATEMENT,
                }
            )
            + "\n"
            for instance in (EARLY, LATE)
        )
    )
    return make_git_project(repo), instances


def imported(path: Path, project, instances: Path) -> dict:
    """The JSON summary of importing ``path`` with ``--format auto``."""
    out = io.StringIO()
    call_command(
        "import_runs", str(path), "--format", "auto", "--project", project.slug,
        "--instances", str(instances), "--no-preflight", "--json", stdout=out,
        stderr=io.StringIO(),
    )  # fmt: skip
    return json.loads(out.getvalue())


def predictions_first(tmp_path: Path, project, instances: Path) -> Path:
    """A batch folder whose predictions (LATE's patch other than its
    trajectory's submission) were imported, apart, before it."""
    folder = tmp_path / "out"
    write_batch(folder, {EARLY: PATCH, LATE: OTHER_PATCH}, [EARLY, LATE])
    preds = tmp_path / "preds.json"
    (folder / "preds.json").rename(preds)
    assert imported(preds, project, instances)["imported"] == 2
    return folder


def notes(summary: dict) -> dict[str, str]:
    """The summary's notes on trajectories, by instance."""
    return {
        Path(entry["file"]).parent.name: entry["note"]
        for entry in summary["notes"]
        if entry["file"].endswith(".traj.json")
    }


def test_a_trajectory_after_its_prediction_enriches_the_stored_run(project, tmp_path):
    folder = predictions_first(tmp_path, *project)
    before = {run.title: run for run in Run.objects.all()}

    summary = imported(folder, *project)

    assert (summary["imported"], summary["duplicates"]) == (0, 0)
    assert (summary["enriched"], summary["conflicts"]) == (2, [])
    runs = {run.title: run for run in Run.objects.all()}
    assert set(runs) == {EARLY, LATE}
    for instance, run in runs.items():
        # What only the trajectory holds is added: its usage and cost, its
        # steps (the task as the agent was given it first).
        assert run.usage == USAGE
        assert run.model == MODEL
        trajectory = run.record["transcript"]["trajectory"]
        assert trajectory["format"] == "mini-swe-agent"
        turns = conversation(run.record["transcript"])
        assert turns[1].text.startswith(TASK)
        assert turns[-1].note == "predicted patch"
        # Nothing stored is written over: the prediction's task, start,
        # patch and original commit stay.
        stored = before[instance]
        assert run.record["transcript"]["format"] == "swebench"
        assert (run.prompt, run.started_at) == (STATEMENT, stored.started_at)
        assert (run.output, run.original_commit) == (
            stored.output,
            stored.original_commit,
        )
        assert run.preflight == stored.preflight
    assert (runs[EARLY].patch.patch, runs[LATE].patch.patch) == (PATCH, OTHER_PATCH)
    assert notes(summary) == {
        EARLY: "the run imported before from its prediction (the same instance, "
        "model and patch) was enriched from this trajectory with usage, the "
        "trajectory's steps; nothing stored was changed",
        LATE: "the run imported before from its prediction was enriched from "
        "this trajectory with usage, the trajectory's steps; its submission "
        "differs from the prediction's patch, which is kept",
    }


def test_the_same_trajectory_again_is_a_duplicate_and_changes_nothing(
    project, tmp_path
):
    folder = predictions_first(tmp_path, *project)
    imported(folder, *project)
    enriched = {run.pk: (run.record, run.record_sha256) for run in Run.objects.all()}

    summary = imported(folder, *project)

    assert (summary["imported"], summary["duplicates"]) == (0, 2)
    assert (summary["enriched"], summary["conflicts"], notes(summary)) == (0, [], {})
    again = {run.pk: (run.record, run.record_sha256) for run in Run.objects.all()}
    assert again == enriched


def test_another_trajectory_leaves_the_enriched_run_as_it_is(project, tmp_path):
    folder = predictions_first(tmp_path, *project)
    imported(folder, *project)
    kept = Run.objects.get(title=EARLY).record
    path = folder / EARLY / f"{EARLY}.traj.json"
    document = json.loads(path.read_text())
    document["info"]["model_stats"]["instance_cost"] = 1.5
    path.write_text(json.dumps(document))

    summary = imported(path, *project)

    assert (summary["imported"], summary["enriched"], summary["conflicts"]) == (
        0,
        0,
        [],
    )
    assert notes(summary) == {
        EARLY: "the run imported before from its prediction was enriched before "
        "from another trajectory and is kept: this trajectory was not imported"
    }
    assert Run.objects.get(title=EARLY).record == kept
