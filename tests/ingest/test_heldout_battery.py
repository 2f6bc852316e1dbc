"""The held-out battery: transcripts written by hand in each agent's own
on-disk format, from the agents' public sources and never from these
readers, varied as users' files vary (unknown line types, missing optional
fields, unicode, a very long line, an empty or CRLF patch, a cut-off last
line, several sessions in one file, old and new versions of a format).

Each file is imported into a project as a person would import it, and the
run is held to ``expected/<file>.json``: the task, the model, the token
totals, the tool calls, the title, the patch stored with the run, and, for a
file or record the reader cannot take, the one line that says why (and what
to import instead).
``--format auto`` over a folder mixing them tells each file's format.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from replayhub.ingest.services import PreflightMode, transcripts_import
from replayhub.ingest.transcripts.conversation import conversation
from replayhub.ingest.transcripts.loader import AUTO
from replayhub.models import Project, Run, RunPatch
from tests.conftest import ROOT
from tests.factories import make_git_project
from tests.gitrepos import make_repo

pytestmark = pytest.mark.django_db

HELDOUT = ROOT / "tests" / "fixtures" / "heldout"
EXPECTED = HELDOUT / "expected"
# The battery's folders, by the format each is imported as.
FORMATS = {
    "aider": "aider",
    "claude-code": "claude-code",
    "codex": "codex",
    "gemini": "gemini-cli",
    "harbor-atif": "atif",
    "atif": "atif",
    "mini-swe-agent": "mini-swe-agent",
    "opencode": "opencode",
    "swebench": "swebench",
}
CASES = sorted(p for p in EXPECTED.rglob("*.json") if p.parent != EXPECTED)


@pytest.fixture
def project(tmp_path: Path) -> tuple[Project, Path]:
    """A project whose first commit holds the files the battery's patches
    change, and the SWE-bench instances naming that commit."""
    repo = make_repo(tmp_path, json.loads((HELDOUT / "repo.json").read_text()))
    instances = tmp_path / "instances.jsonl"
    template = (HELDOUT / "instances.template.jsonl").read_text()
    instances.write_text(template.replace("BASE", repo.head()))
    return make_git_project(repo, slug="heldout"), instances


def _import(project: tuple[Project, Path], paths: list[Path], format: str) -> Any:
    return transcripts_import(
        project=project[0],
        paths=paths,
        format=format,
        instances=project[1],
        preflight=PreflightMode.SKIP,
    )


def _facts(run: Run) -> dict[str, Any]:
    turns = conversation(run.record.get("transcript"))
    stored = RunPatch.objects.filter(run=run).first()
    return {
        "external_id": run.external_id,
        "prompt": run.prompt,
        "model": run.model,
        "usage": run.usage or {},
        "title": run.title,
        "calls": sum(len(t.calls) for t in turns),
        "user_turns": sum(1 for t in turns if t.role == "user"),
        "patch": stored.patch if stored else "",
    }


def _problems(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """What the run gets wrong against ``expected`` (empty: nothing)."""
    wrong = []

    def check(name: str, right: bool, shown: Any) -> None:
        if not right:
            wrong.append(f"{name}: {shown!r}"[:300])

    prompt = got["prompt"]
    if "task" in expected:
        check("task", prompt.strip() == expected["task"].strip(), prompt)
    if "task_contains" in expected:
        check("task", expected["task_contains"] in prompt, prompt)
    if "task_must_not_contain" in expected:
        check("task", expected["task_must_not_contain"] not in prompt, prompt)
    model = expected.get("model")
    if isinstance(model, str) and " " not in model:
        check("model", got["model"] == model, got["model"])
    if expected.get("session_id"):
        check("id", expected["session_id"] in got["external_id"], got["external_id"])
    usage = got["usage"]
    tokens = expected.get("tokens")
    if tokens:
        check("output tokens", usage.get("output_tokens") == tokens["output"], usage)
        check("input tokens", usage.get("input_tokens") == tokens["input"], usage)
    elif "tokens" in expected:
        check("no tokens made up", "input_tokens" not in usage, usage)
    if "tool_calls" in expected:
        check("tool calls", got["calls"] == expected["tool_calls"], got["calls"])
    if "user_turns" in expected:
        check("user turns", got["user_turns"] == expected["user_turns"], got)
    if "title" in expected:
        check("title", got["title"] == expected["title"], got["title"])
    if "patch" in expected and expected["format"] in ("swebench", "mini-swe-agent"):
        check("patch", got["patch"] == (expected["patch"] or ""), got["patch"][:80])
    return wrong


def _by_case(expected: dict[str, Any], runs: list[Run]) -> list[str]:
    if expected.get("predictions"):
        by_instance = {run.external_id.split(":")[-1]: run for run in runs}
        wrong = []
        for prediction in expected["predictions"]:
            run = by_instance.get(prediction["instance_id"])
            if run is None:
                wrong.append(f"no run for {prediction['instance_id']}")
                continue
            got = _facts(run)
            if got["model"] != prediction["model"]:
                wrong.append(f"{prediction['instance_id']} model {got['model']!r}")
            want = prediction.get("patch")
            if want is not None and got["patch"] != (want or ""):
                wrong.append(f"{prediction['instance_id']} patch {got['patch']!r:.80}")
            if prediction.get("patch_contains", "") not in got["patch"]:
                wrong.append(f"{prediction['instance_id']} patch lacks its change")
        return wrong
    if expected.get("sessions"):
        sessions = expected["sessions"]
        return [
            problem
            for want, run in zip(sessions, runs, strict=False)
            for problem in _problems(
                {**want, "format": expected["format"]}, _facts(run)
            )
        ]
    return _problems(expected, _facts(runs[0])) if runs else ["no run"]


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=[str(c.relative_to(EXPECTED)).removesuffix(".json") for c in CASES],
)
def test_each_file_imports_as_its_agent_wrote_it(case, project):
    expected = json.loads(case.read_text())
    file = HELDOUT / expected["file"]
    format = FORMATS[expected["file"].split("/")[0]]

    summary = _import(project, [file], format)

    refused = [
        e
        for e in summary.invalid
        if e["line"] not in expected.get("invalid_ok_lines", [])
    ]
    # Each refusal is one line saying why; a file refused whole makes no run.
    errors = [e["error"] for e in refused]
    wanted = expected.get("refused", [])
    assert len(errors) == len(wanted), errors
    for error, words in zip(errors, wanted, strict=True):
        assert words in error
    runs = list(Run.objects.order_by("id"))
    if expected.get("runs") is not None:
        assert len(runs) == expected["runs"]
    if runs or not wanted:
        assert _by_case(expected, runs) == []


def test_auto_tells_every_format_of_a_mixed_folder(project, tmp_path):
    expected = json.loads((EXPECTED / "mixed.json").read_text())
    folder = tmp_path / "mixed"
    folder.mkdir()
    for file in expected["files"]:
        shutil.copy(HELDOUT / file["from"], folder / file["as"])

    summary = _import(project, sorted(folder.iterdir()), AUTO)

    assert summary.invalid == []
    told = {
        Path(run.record["transcript"]["file"]).name: run.record["transcript"]["format"]
        for run in Run.objects.all()
    }
    assert told == {
        f["as"]: FORMATS.get(f["format"], f["format"]) for f in expected["files"]
    }
    assert summary.imported == Run.objects.count() == expected["runs_total"]


def test_an_opencode_storage_folder_imports_each_session_once(project):
    storage = HELDOUT / "opencode" / "storage"
    files = sorted(p for p in storage.rglob("*.json"))

    summary = _import(project, files, AUTO)

    assert summary.invalid == []
    runs = {run.external_id: run for run in Run.objects.all()}
    # Two sessions and the subagent session the second one started.
    assert sorted(runs) == [
        "ses_5a1b2c3d4ffeYbQw9Lr2Xn7TzA",
        "ses_5a1b9f00effeK3sPq0Wm4LhVcB",
        "ses_5a1ba100effe7uXyZ1aB2cD3eF",
    ]
    child = runs["ses_5a1ba100effe7uXyZ1aB2cD3eF"]
    assert child.prompt == "Read package.json and list install steps"
    assert child.model == "gpt-5-mini"


def test_auto_over_the_whole_battery_tells_each_files_format(project):
    cases = [json.loads(case.read_text()) for case in CASES]
    files = [HELDOUT / case["file"] for case in cases]

    summary = _import(project, files, AUTO)

    refused = sum(
        len(case.get("refused", [])) + len(case.get("invalid_ok_lines", []))
        for case in cases
    )
    assert len(summary.invalid) == refused, summary.invalid
    assert summary.conflicts == []
    folder_of = {
        str(HELDOUT / case["file"]): case["file"].split("/")[0] for case in cases
    }
    for run in Run.objects.all():
        name = next(
            f for f in folder_of if f.endswith(run.record["transcript"]["file"])
        )
        assert run.record["transcript"]["format"] == FORMATS[folder_of[name]], name
    assert Run.objects.count() == sum(case.get("runs", 1) for case in cases)
