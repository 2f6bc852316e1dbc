"""mini-swe-agent trajectories imported into a project on a real repository,
from the file the real ``mini`` 2.4.6 wrote
(``tests/fixtures/agents/mini-swe-agent/``)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from replayhub.ingest.lines import split_lines
from replayhub.ingest.services import transcripts_import
from replayhub.ingest.transcripts import mini_swe_agent
from replayhub.ingest.transcripts.detect import detect
from replayhub.ingest.transcripts.loader import AUTO
from replayhub.ingest.transcripts.shapes import LineError, RecordDraft
from replayhub.models import Preflight, Run
from tests.factories import make_git_project
from tests.gitrepos import make_repo
from tests.ingest.test_imported_patches import commit_exists

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "agents"
    / "mini-swe-agent"
    / "last_mini_run.traj.json"
)
CART = "def total(lines):\n    return 0\n"
PATCH = (
    "diff --git a/cart.py b/cart.py\nindex 259806d..74e107b 100644\n"
    "--- a/cart.py\n+++ b/cart.py\n@@ -1,2 +1,2 @@\n def total(lines):\n"
    "-    return 0\n+    return sum(lines)\n"
)
TASK = (
    "Please solve this issue: Cart.total() returns 0 instead of the sum of the lines."
)


def trajectory() -> dict:
    return json.loads(FIXTURE.read_text())


def parsed(document: dict | bytes, **options) -> list:
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    lines = split_lines([data], max_line_bytes=1 << 22)
    return list(mini_swe_agent.parse(lines, limit=options.pop("limit", 1 << 22)))


@pytest.mark.django_db(transaction=True)
def test_the_mini_command_trajectory_imports_with_its_task_model_cost_and_patch(
    tmp_path,
):
    project = make_git_project(make_repo(tmp_path, {"cart.py": CART}))

    summary = transcripts_import(
        project=project, paths=[FIXTURE], format="mini-swe-agent"
    )

    assert (summary.imported, summary.invalid) == (1, [])
    run = Run.objects.get()
    assert run.prompt.startswith(TASK + "\n\nYou can execute bash commands")
    assert run.title == TASK
    assert run.model == "openai/gpt-4o-mini"
    assert run.usage == {
        "input_tokens": 1210 + 1342,
        "output_tokens": 64 + 41,
        "turns": 2,
        "cost_usd": 0.0004458,
    }
    assert run.output == PATCH
    assert run.started_at is not None
    assert run.started_at.isoformat().startswith("2026-12-02T22:23:14")
    assert run.record["transcript"]["format"] == "mini-swe-agent"
    assert run.record["transcript"]["file"] == "last_mini_run.traj.json"
    # The mini command names no commit: the patch has nowhere to be applied,
    # and the run says so rather than guessing a base.
    assert (run.base_sha, run.original_commit) == ("", "")
    assert run.preflight == Preflight.UNREPRODUCIBLE
    assert (
        "no base commit to apply the submitted patch at" in run.record["import_notes"]
    )


@pytest.mark.django_db(transaction=True)
def test_a_batch_trajectory_takes_its_instance_base_and_its_patch_is_the_original(
    tmp_path,
):
    repo = make_repo(tmp_path, {"cart.py": CART})
    base = repo.head()
    project = make_git_project(repo)
    path = tmp_path / "shop__shop-3.traj.json"
    path.write_text(json.dumps({**trajectory(), "instance_id": "shop__shop-3"}))
    instances = tmp_path / "instances.jsonl"
    instance = {"instance_id": "shop__shop-3", "base_commit": base}
    instances.write_text(json.dumps(instance) + "\n")

    summary = transcripts_import(
        project=project, paths=[path], format=AUTO, instances=instances
    )

    assert (summary.imported, summary.invalid) == (1, [])
    run = Run.objects.get()
    assert run.external_id == "openai/gpt-4o-mini:shop__shop-3"
    assert run.base_sha == base
    assert run.provenance["base"]["source"] == "recorded"
    # The submission is stored with the run; the repository is only read.
    assert "+    return sum(lines)" in run.patch.patch
    assert not commit_exists(repo.path, run.original_commit)
    assert run.preflight == Preflight.READY
    again = transcripts_import(
        project=project, paths=[path], format=AUTO, instances=instances
    )
    assert (again.imported, again.duplicates) == (0, 1)


@pytest.mark.django_db(transaction=True)
def test_auto_reads_a_mixed_folder_and_a_broken_file_costs_only_itself(tmp_path):
    repo = make_repo(tmp_path, {"cart.py": CART})
    base = repo.head()
    project = make_git_project(repo)
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "last_mini_run.traj.json").write_bytes(FIXTURE.read_bytes())
    prediction = {
        "instance_id": "shop__shop-9",
        "model_name_or_path": "acme-agent-v2",
        "model_patch": PATCH,
        "base_commit": base,
        "problem_statement": "Cart.total() returns 0",
    }
    (folder / "predictions.jsonl").write_text(json.dumps(prediction) + "\n")
    cut = FIXTURE.read_bytes()[:5000]
    (folder / "cut.traj.json").write_bytes(cut)
    no_messages = {**trajectory(), "messages": "gone"}
    (folder / "odd.traj.json").write_text(json.dumps(no_messages))

    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_status:
        call_command(
            "import_runs", str(folder), "--format", "auto", "--project",
            project.slug, "--json", stdout=out, stderr=io.StringIO(),
        )  # fmt: skip

    assert exit_status.value.code == 1
    summary = json.loads(out.getvalue())
    assert summary["imported"] == 2
    assert set(Run.objects.values_list("model", flat=True)) == {
        "openai/gpt-4o-mini",
        "acme-agent-v2",
    }
    problems = {Path(p["file"]).name: p["error"] for p in summary["invalid"]}
    assert set(problems) == {"cut.traj.json", "odd.traj.json"}
    assert problems["cut.traj.json"].startswith("not valid JSON")
    assert problems["odd.traj.json"] == (
        "not a mini-swe-agent trajectory: no messages list"
    )
    assert all("\n" not in error for error in problems.values())


def test_auto_names_mini_swe_agent_before_swe_agent():
    head = FIXTURE.read_bytes()
    assert detect("last_mini_run.traj.json", head) == "mini-swe-agent"
    # Its info holds mini_version well before the trailing trajectory_format,
    # and a message may hold SWE-agent's "trajectory" key.
    early = {"info": {"mini_version": "2.4.6"}, "trajectory": [], "messages": []}
    assert detect("run.json", json.dumps(early).encode()) == "mini-swe-agent"
    late = b'{"info": {}, "messages": [], "trajectory_format": "mini-swe-agent-1.1"}'
    assert detect("run.json", late) == "mini-swe-agent"
    swe_agent = b'{"trajectory": [], "info": {"submission": ""}}'
    assert detect("run.json", swe_agent) == "swe-agent"


def test_a_submission_that_is_not_a_patch_is_kept_as_output_only():
    document = trajectory()
    document["info"]["submission"] = "Fixed the totals.\n"

    [draft] = parsed(document)

    assert isinstance(draft, RecordDraft)
    assert draft.record["output"] == "Fixed the totals.\n"
    assert draft.search.patch is None
    assert draft.notes == [
        "the submission is not a patch: the run has no original commit"
    ]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            {"trajectory_format": "swe-agent-2"},
            'not a mini-swe-agent trajectory: trajectory_format is "swe-agent-2"',
        ),
        ({"info": None}, "not a mini-swe-agent trajectory: no info object"),
        (
            {"messages": [{"role": "system", "content": "You help."}]},
            "the trajectory has no user message: no task",
        ),
    ],
)
def test_a_trajectory_that_does_not_fit_is_one_error_naming_why(change, error):
    assert parsed({**trajectory(), **change}) == [LineError(1, error)]


def test_a_trajectory_over_the_record_limit_is_refused_as_it_is_read():
    [error] = parsed(FIXTURE.read_bytes(), limit=4096)

    assert error == LineError(1, "the trajectory is over the limit of 4,096 bytes")
