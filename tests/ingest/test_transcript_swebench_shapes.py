"""SWE-bench predictions in each shape the harness reads: JSONL, a JSON list,
a JSON object keyed by instance id (mini-swe-agent's ``preds.json``), each
prediction keeping its own model."""

from __future__ import annotations

import json

import pytest

from replayhub.ingest.lines import split_lines
from replayhub.ingest.services import transcripts_import
from replayhub.ingest.transcripts import swebench
from replayhub.ingest.transcripts.detect import detect
from replayhub.ingest.transcripts.loader import AUTO
from replayhub.ingest.transcripts.shapes import LineError, RecordDraft
from replayhub.models import Run
from tests.factories import make_git_project
from tests.gitrepos import make_repo

CART = "def total(lines):\n    return 0\n"
BASE = "a" * 40


def patch(body: str) -> str:
    return (
        "--- a/cart.py\n+++ b/cart.py\n@@ -1,2 +1,2 @@\n def total(lines):\n"
        f"-    return 0\n+    return {body}\n"
    )


def prediction(instance: str, model: str, body: str = "sum(lines)") -> dict:
    return {
        "instance_id": instance,
        "model_name_or_path": model,
        "model_patch": patch(body),
        "base_commit": BASE,
        "problem_statement": f"{instance}: Cart.total() returns 0",
    }


PREDICTIONS = [
    prediction("shop__shop-1", "acme-agent-v2"),
    prediction("shop__shop-2", "other-model", "sum(lines) or 0"),
]


def jsonl(items: list[dict]) -> bytes:
    return b"".join(json.dumps(item).encode() + b"\n" for item in items)


def by_id(items: list[dict], *, keep_id: bool = True) -> dict:
    return {
        item["instance_id"]: {
            k: v for k, v in item.items() if keep_id or k != "instance_id"
        }
        for item in items
    }


SHAPES = {
    "jsonl": jsonl(PREDICTIONS),
    "list": json.dumps(PREDICTIONS, indent=2).encode(),
    "list on one line": json.dumps(PREDICTIONS).encode(),
    "object by id": json.dumps(by_id(PREDICTIONS), indent=2).encode(),
    "object by id, ids left out": json.dumps(
        by_id(PREDICTIONS, keep_id=False)
    ).encode(),
    "object by id after blank lines": b"\n\n" + json.dumps(by_id(PREDICTIONS)).encode(),
}


def parsed(data: bytes, *, limit: int = 1 << 20) -> list:
    lines = split_lines([data], max_line_bytes=limit)
    return list(swebench.parse(lines, instances={}, limit=limit))


@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_reads_every_prediction_with_its_own_model(shape):
    drafts = parsed(SHAPES[shape])

    assert all(isinstance(draft, RecordDraft) for draft in drafts)
    found = {
        draft.record["external_id"]: (draft.record["model"], draft.search.patch)
        for draft in drafts
    }
    assert found == {
        "acme-agent-v2:shop__shop-1": ("acme-agent-v2", patch("sum(lines)")),
        "other-model:shop__shop-2": ("other-model", patch("sum(lines) or 0")),
    }


@pytest.mark.parametrize("shape", ["object by id", "list"])
def test_auto_names_a_predictions_json_file_swebench(shape):
    assert detect("preds.json", SHAPES[shape]) == "swebench"


def test_auto_tells_a_predictions_list_from_openhands_events_by_the_first_key():
    events = [{"id": 0, "source": "user", "action": "message", "args": {}}]
    assert detect("trajectory.json", json.dumps(events).encode()) == "openhands"
    # Text naming "action" inside a patch is escaped, not a key.
    tricky = [{**PREDICTIONS[0], "model_patch": '+ "action"\n'}]
    assert detect("preds.json", json.dumps(tricky).encode()) == "swebench"


def test_a_prediction_that_does_not_fit_costs_only_itself():
    document = {
        **by_id(PREDICTIONS),
        "shop__shop-3": {**prediction("shop__shop-4", "m")},
        "shop__shop-5": "not an object",
        "shop__shop-6": {"model_patch": patch("1"), "base_commit": BASE},
    }

    results = parsed(json.dumps(document).encode())

    errors = [r.error for r in results if isinstance(r, LineError)]
    assert errors == [
        '"shop__shop-3": the prediction names another instance_id, "shop__shop-4"',
        '"shop__shop-5": read as an instance id (predictions keyed by instance '
        "id), its value must be a prediction, a JSON object",
        "shop__shop-6: model_name_or_path is missing",
    ]
    kept = [r.record["external_id"] for r in results if isinstance(r, RecordDraft)]
    assert kept == ["acme-agent-v2:shop__shop-1", "other-model:shop__shop-2"]


def test_a_jsonl_file_with_a_broken_first_line_keeps_its_other_lines():
    data = b'{"instance_id": "shop__shop-0", "model_patch": \n' + jsonl(PREDICTIONS)

    [error, *drafts] = parsed(data)

    assert isinstance(error, LineError)
    assert error.line == 1 and error.error.startswith("not valid JSON")
    assert [draft.line for draft in drafts] == [2, 3]


def test_a_predictions_document_is_read_within_the_record_limit():
    data = json.dumps(PREDICTIONS, indent=2).encode()

    assert parsed(data, limit=200) == [
        LineError(1, "the predictions file is over the limit of 200 bytes")
    ]


def test_a_document_that_is_not_predictions_is_one_error_a_part():
    assert parsed(b'[1, "two"]') == [
        LineError(1, "prediction 1: not a JSON object"),
        LineError(1, "prediction 2: not a JSON object"),
    ]
    [cut] = parsed(b"[\n1,\n")
    assert isinstance(cut, LineError)
    assert cut.error.startswith("not valid JSON")


@pytest.mark.django_db(transaction=True)
def test_models_answering_the_same_instance_each_keep_their_model_and_patch(
    tmp_path,
):
    repo = make_repo(tmp_path, {"cart.py": CART})
    base = repo.head()
    project = make_git_project(repo)
    # Two models, one instance, the same patch, then a third with its own:
    # three runs, none taking another's model or commit.
    same = [
        {**prediction("shop__shop-1", model), "base_commit": base}
        for model in ("acme-agent-v2", "acme-agent-v3")
    ]
    own = {**prediction("shop__shop-1", "other-model", "-1"), "base_commit": base}
    path = tmp_path / "preds.json"
    path.write_text(json.dumps([*same, own], indent=2))

    summary = transcripts_import(project=project, paths=[path], format=AUTO)

    assert (summary.imported, summary.invalid) == (3, [])
    runs = {run.model: run for run in Run.objects.all()}
    assert {model: run.external_id for model, run in runs.items()} == {
        "acme-agent-v2": "acme-agent-v2:shop__shop-1",
        "acme-agent-v3": "acme-agent-v3:shop__shop-1",
        "other-model": "other-model:shop__shop-1",
    }
    for model, run in runs.items():
        assert run.record["transcript"]["prediction"]["model_name_or_path"] == model
        assert run.patch.patch == run.record["transcript"]["prediction"]["model_patch"]
    assert "+    return -1" in runs["other-model"].patch.patch
    # The same patch of two models is two originals, each with its label.
    assert len({run.original_commit for run in runs.values()}) == 3
    assert len({run.patch.tree for run in runs.values()}) == 2


@pytest.mark.django_db(transaction=True)
def test_a_preds_json_by_instance_id_imports_beside_a_broken_jsonl(tmp_path):
    repo = make_repo(tmp_path, {"cart.py": CART})
    base = repo.head()
    project = make_git_project(repo)
    items = [{**item, "base_commit": base} for item in PREDICTIONS]
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps(by_id(items, keep_id=False), indent=2))
    broken = tmp_path / "more.jsonl"
    broken.write_bytes(b'{"instance_id": "shop__shop-7"\n')

    summary = transcripts_import(project=project, paths=[preds, broken], format=AUTO)

    assert summary.imported == 2
    assert set(Run.objects.values_list("external_id", flat=True)) == {
        "acme-agent-v2:shop__shop-1",
        "other-model:shop__shop-2",
    }
    [problem] = summary.invalid
    assert problem["file"].endswith("more.jsonl")


@pytest.mark.django_db
def test_a_patch_holding_a_lone_surrogate_escape_is_refused_beside_the_others(
    tmp_path,
):
    repo = make_repo(tmp_path, {"cart.py": CART})
    base = repo.head()
    project = make_git_project(repo)
    good, odd = ({**item, "base_commit": base} for item in PREDICTIONS)
    # json.dumps writes the lone surrogate as the escape "\ud800".
    odd["model_patch"] = patch("0") + "+\ud800\n"
    path = tmp_path / "preds.jsonl"
    path.write_bytes(jsonl([good, odd]))

    summary = transcripts_import(project=project, paths=[path], format=AUTO)

    assert summary.imported == 1
    [problem] = summary.invalid
    assert problem["line"] == 2
    assert "lone surrogate" in problem["error"]
    assert "\n" not in problem["error"]
    assert Run.objects.get().model == "acme-agent-v2"
