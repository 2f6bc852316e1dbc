"""OpenCode session exports read as runs: the export the real OpenCode
1.18.33 printed (tests/fixtures/agents/opencode-session/), a hand-written one
with every part type, and one the real CLI writes during the test, run
against the scripted fake model and imported into a project on its checkout."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from replayhub.agents.opencode import PROFILE, flags, home_files
from replayhub.ingest.lines import split_lines
from replayhub.ingest.native import check_record
from replayhub.ingest.services import PreflightMode, transcripts_import
from replayhub.ingest.transcripts import opencode
from replayhub.ingest.transcripts.conversation import conversation
from replayhub.ingest.transcripts.detect import detect
from replayhub.ingest.transcripts.loader import AUTO
from replayhub.ingest.transcripts.shapes import LineError, RecordDraft
from replayhub.ingest.transcripts.turns import (
    ASSISTANT,
    COMPACTION,
    REASONING,
    SYSTEM,
    USER,
)
from replayhub.models import ImportFormat, Run
from tests.agents import fakemodels
from tests.conftest import ROOT
from tests.factories import make_git_project
from tests.gitrepos import make_repo
from tests.hostclis import host_cli

REAL = (
    ROOT
    / "tests"
    / "fixtures"
    / "agents"
    / "opencode-session"
    / "ses_dbd70c09affeD14Dc6PCY7seK8.json"
)
HANDWRITTEN = ROOT / "tests" / "fixtures" / "transcripts" / "opencode" / "by-hand.json"
PROMPT = "Make the tests in test_calc.py pass by writing calc.py."
CALC = "def add(a, b):\n    return a + b\n"
CACHE = (
    Path(os.environ.get("REPLAYHUB_AGENT_CACHE") or ROOT / "var" / "agents")
    / f"opencode-{PROFILE.version}"
)


def parsed(data: bytes) -> list:
    lines = split_lines([data], max_line_bytes=1 << 20)
    return list(opencode.parse(lines, name="export.json", limit=1 << 20))


def only_draft(data: bytes) -> RecordDraft:
    results = parsed(data)
    assert len(results) == 1 and isinstance(results[0], RecordDraft), results
    return results[0]


def test_the_real_export_reads_as_one_run():
    draft = only_draft(REAL.read_bytes())
    record = draft.record
    assert record["external_id"] == "ses_dbd70c09affeD14Dc6PCY7seK8"
    assert record["prompt"] == PROMPT
    assert (record["provider"], record["model"]) == ("rh", "fake-model")
    # Two model calls of 10 in / 10 out, at no cost.
    assert record["usage"] == {
        "input_tokens": 20,
        "output_tokens": 20,
        "reasoning_output_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "turns": 2,
        "cost_usd": 0.0,
    }
    assert record["output"] == "Wrote calc.py."
    assert record["started_at"] == "2026-12-04T19:36:53.865000Z"
    assert record["cwd"] == "/tmp/oc-work/run/work/calc"
    assert record["surroundings"] == {
        "agent": {"name": "opencode", "version": "1.18.33"},
        "cwd": "/tmp/oc-work/run/work/calc",
    }
    assert record["transcript"]["format"] == "opencode"
    assert (draft.unread, draft.notes) == ({}, [])
    # It names no branch: the base and the original are looked for by time.
    search = draft.search
    assert search.branch == "" and search.find_base and search.find_original
    assert iso_ms(search.start) == "2026-12-04T19:36:53.865"
    assert iso_ms(search.end) == "2026-12-04T19:37:01.438"
    checked = check_record(record, max_prompt_bytes=1 << 20, project="calc")
    assert checked.usage["turns"] == 2


def iso_ms(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def test_the_real_export_reads_back_as_the_conversation():
    said = conversation(only_draft(REAL.read_bytes()).record["transcript"])
    assert [(t.role, t.text) for t in said] == [
        (USER, PROMPT),
        (ASSISTANT, ""),
        (ASSISTANT, "Wrote calc.py."),
    ]
    [write] = said[1].calls
    assert (write.name, write.id, write.error) == ("write", "call_fake_write", False)
    assert json.loads(write.input) == {"filePath": "calc.py", "content": CALC}
    assert write.result == "Wrote file successfully."


def test_every_part_type_of_a_handwritten_export():
    draft = only_draft(HANDWRITTEN.read_bytes())
    record = draft.record
    # OpenCode's own text beside the request is not the prompt.
    assert record["prompt"] == "The cart total is off by one cent."
    assert record["title"] == "Fix the cart total"
    assert (record["provider"], record["model"]) == ("anthropic", "claude-sonnet-4-5")
    # The step-finish parts are summed; the message's own totals are not
    # counted again.
    usage = record["usage"]
    assert usage.pop("cost_usd") == pytest.approx(0.06)
    assert usage == {
        "input_tokens": 600,
        "output_tokens": 90,
        "reasoning_output_tokens": 5,
        "cache_read_input_tokens": 3300,
        "cache_creation_input_tokens": 50,
        "turns": 3,
    }
    assert record["started_at"] == "2025-06-05T10:00:00Z"
    assert draft.unread == {
        "part sparkle": 1,
        "part hologram": 1,
        "message narrator": 1,
    }
    assert draft.notes == [
        "3 items of types this version does not read "
        "(message narrator: 1, part hologram: 1, part sparkle: 1)"
    ]
    said = conversation(record["transcript"])
    assert [(t.role, t.note) for t in said] == [
        (USER, ""),
        (SYSTEM, "added by OpenCode"),
        (SYSTEM, "file attached"),
        (REASONING, ""),
        (ASSISTANT, ""),
        (ASSISTANT, ""),
        (ASSISTANT, ""),
    ]
    read, bash = said[4].calls[0], said[5].calls[0]
    assert (read.name, read.error) == ("read", False)
    assert read.result == "def total(lines):\n    return sum(lines)\n"
    assert (bash.name, bash.error, bash.result) == (
        "bash",
        True,
        "Command failed: 1 failed",
    )
    assert said[6].text == "Each line is rounded before summing now."


def test_a_compaction_and_an_error_are_turns_of_their_own():
    document = json.loads(HANDWRITTEN.read_text())
    answer = document["messages"][1]
    answer["parts"].insert(0, {"type": "compaction", "auto": True})
    answer["info"]["error"] = {"name": "APIError", "data": {"message": "overloaded"}}
    said = conversation({"format": "opencode", "document": document})
    assert (COMPACTION, "compacted") in [(t.role, t.note) for t in said]
    assert (SYSTEM, "overloaded", "error") in [(t.role, t.text, t.note) for t in said]


@pytest.mark.parametrize(
    "data, error",
    [
        (b"[1, 2]", "not an OpenCode export: no session info with an id"),
        (b'{"info": {"title": "x"}}', "not an OpenCode export: no session info"),
        (b'{"info": {"id": "ses_1"}, "messages": "no"}', "no user message"),
        (b'{"info": {"id": "ses_1"', "not valid JSON"),
    ],
)
def test_what_is_no_export_is_one_line_error(data, error):
    [result] = parsed(data)
    assert isinstance(result, LineError) and result.line == 1
    assert error in result.error


@pytest.mark.parametrize(
    "messages",
    [
        [None, 3, "x", {"info": None}, {"info": {"role": ["user"]}}],
        [{"info": {"role": "assistant", "tokens": "many"}, "parts": [None, 1, {}]}],
        [{"info": {"role": "assistant", "time": {"created": 10**30}}, "parts": {}}],
    ],
)
def test_odd_messages_never_break_the_reader(messages):
    document = json.loads(HANDWRITTEN.read_text())
    document["messages"][1:1] = messages
    draft = only_draft(json.dumps(document).encode())
    assert draft.record["prompt"] == "The cart total is off by one cent."
    assert sum(draft.unread.values()) >= 1
    assert conversation(draft.record["transcript"])


def test_auto_tells_an_export_from_the_other_formats():
    assert detect("ses_1.json", REAL.read_bytes()[:4096]) == "opencode"
    # Printed to a file of any name, on one line too.
    one_line = json.dumps(json.loads(REAL.read_text()), separators=(",", ":"))
    assert detect("session.txt", one_line.encode()) == "opencode"
    # A SWE-agent trajectory opens with its info too, named by no session.
    assert (
        detect("x.json", b'{"info": {"id": "run-1"}, "trajectory": []}') == "swe-agent"
    )


def need_opencode() -> None:
    if not (CACHE / ".fetched").exists():
        pytest.skip(f"{PROFILE.spec()} is not in {CACHE.parent}")


def run_opencode(tmp_path: Path, work: Path) -> Path:
    """The real OpenCode run in ``work`` against the scripted chat model, its
    session exported to a file; that file."""
    os.environ.setdefault("REPLAYHUB_AGENT_CACHE", str(CACHE.parent))
    cli = host_cli("opencode")
    home = tmp_path / "home"
    for name, text in home_files("fake-model").items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    dead = "http://127.0.0.1:9"
    with fakemodels.FakeModel(fakemodels.CHAT) as fake:
        fake.script(fakemodels.opencode_writes("calc.py", CALC, "fake-model"))
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            **PROFILE.env,
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "placeholder",
            "HTTP_PROXY": dead,
            "HTTPS_PROXY": dead,
            "NO_PROXY": "127.0.0.1",
        }
        run = [str(cli), *flags(PROFILE.version, "fake-model", {})]
        subprocess.run(
            run, input=PROMPT, cwd=work, env=env, text=True, check=True,
            capture_output=True, timeout=300,
        )  # fmt: skip
        listed = subprocess.run(
            [str(cli), "session", "list", "--format", "json"], cwd=work, env=env,
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        [session] = json.loads(listed.stdout)
        exported = subprocess.run(
            [str(cli), "export", session["id"]], cwd=work, env=env, check=True,
            capture_output=True, timeout=120,
        )  # fmt: skip
    path = tmp_path / "exports" / f"{session['id']}.json"
    path.parent.mkdir()
    path.write_bytes(exported.stdout)
    return path


@pytest.mark.django_db
def test_a_session_the_real_cli_wrote_imports_as_a_run(tmp_path):
    need_opencode()
    repo = make_repo(tmp_path, {"test_calc.py": "from calc import add\n"})
    path = run_opencode(tmp_path, repo.path)
    project = make_git_project(repo)

    for format in (ImportFormat.OPENCODE, AUTO):
        Run.objects.all().delete()
        summary = transcripts_import(
            project=project,
            paths=[path],
            format=format,
            preflight=PreflightMode.SKIP,
        )
        assert (summary.imported, summary.invalid) == (1, []), summary.invalid

    run = Run.objects.get()
    assert run.prompt == PROMPT
    assert (run.provider, run.model) == ("rh", "fake-model")
    assert run.record["usage"]["turns"] == 2
    assert run.record["usage"]["input_tokens"] == 20
    assert run.record["cwd"] == str(repo.path)
    # It names no branch: the base is what main held when it started.
    assert run.base_sha == repo.head()
    assert "default branch" in run.record["inferred"]["base_sha"]
    said = conversation(run.record["transcript"])
    [write] = [call for turn in said for call in turn.calls]
    assert write.name == "write" and json.loads(write.input)["content"] == CALC
    assert (repo.path / "calc.py").read_text() == CALC
