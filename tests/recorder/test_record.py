"""replayhub-record end to end: a real clone of a bare ``origin``, the ReplayHub
server running for real, an agent on the official SDKs behind the recorder,
and the fake provider as the only stand-in."""

from __future__ import annotations

import json
import sys

import pytest

from replayhub.demo.model_api import REAL_KEY
from replayhub.models import Preflight, Run
from tests.recorder.conftest import World, sh, spooled

pytestmark = pytest.mark.services


def words(text: str) -> int:
    return len(text.split())


def test_an_anthropic_run_arrives_with_its_base_tape_usage_and_pushed_commit(
    world: World,
):
    before = world.state()
    recorded = world.record("anthropic", prompt="Add a note to app.py")
    assert recorded.returncode == 0, recorded.stderr
    assert "agent heard: Add a note to app.py / once more: Add" in recorded.stdout

    run = world.stored(recorded.run_id)
    ref = f"refs/replayhub/runs/{run.external_id}"
    assert run.base_sha == before["head"]
    assert (
        run.original_commit
        == world.origin_ref(ref)
        == sh(world.checkout, "rev-parse", ref)
    )
    assert run.original_branch == ref
    assert run.provider == "anthropic" and run.model == "claude-test"
    assert run.prompt == "Add a note to app.py" and run.title == run.prompt
    # The commit holds the agent's edit, on top of the base.
    assert sh(world.checkout, "rev-parse", f"{ref}^") == before["head"]
    edited = sh(world.checkout, "show", f"{ref}:app.py")
    assert edited == "VALUE = 1\n# Add a note to app.py"

    # Two calls: 5 prompt words and 5 reply words, then 7 and 7 (the fake
    # counts words); the tape keeps each, streamed events raw.
    assert run.usage == {"input_tokens": 12, "output_tokens": 12, "turns": 2}
    tape = run.record["tape"]
    assert [entry["stream"] for entry in tape] == [False, True]
    assert [entry["status"] for entry in tape] == [200, 200]
    assert [entry["usage"] for entry in tape] == [
        {"input_tokens": 5, "output_tokens": 5},
        {"input_tokens": 7, "output_tokens": 7},
    ]
    assert {entry["provider_kind"] for entry in tape} == {"anthropic"}
    assert tape[0]["path"] == "/v1/messages"
    assert tape[0]["request"]["messages"][0]["content"] == "Add a note to app.py"
    assert tape[0]["response"]["content"][0]["text"] == "Add a note to app.py"
    assert tape[1]["response"][0].startswith("event: message_start\ndata: {")
    assert "anthropic-version" in tape[0]["headers"]
    # The developer's key went up, and is nowhere in what was recorded.
    sent = [call.header("Authorization") or "" for call in world.fake.received]
    assert sent == [f"Bearer {REAL_KEY}"] * 2
    assert REAL_KEY not in json.dumps(run.record)

    agent = run.record["agent"]
    assert agent["exit_code"] == 0 and agent["duration_seconds"] > 0
    assert agent["command"][-1] == "anthropic"
    assert "agent heard" in run.output
    assert run.record["base_branch"] == "main"
    assert run.record["recorder"] == {"dirty_base": False, "write_back": "work-tree"}
    # The server found the pushed commit: the run is ready to replay.
    assert run.preflight == Preflight.READY, run.preflight_reason

    # The clone is as the agent left it: its edit, nothing staged, same branch.
    after = world.state()
    assert after == {**before, "status": "M app.py"}


def test_an_openai_agent_that_commits_keeps_its_commit_as_the_original(world: World):
    before = world.state()
    recorded = world.record("openai+commit", model="gpt-test", prompt="Note it")
    assert recorded.returncode == 0, recorded.stderr

    run = world.stored(recorded.run_id)
    head = sh(world.checkout, "rev-parse", "HEAD")
    assert run.original_commit == head == world.origin_ref(run.original_branch)
    assert sh(world.checkout, "rev-parse", "HEAD^") == run.base_sha == before["head"]
    assert run.provider == "openai" and run.model == "gpt-test"
    # The streamed call reports usage too: the recorder asks for it, as the
    # replay gateway does.
    assert run.usage == {"input_tokens": 6, "output_tokens": 6, "turns": 2}
    tape = run.record["tape"]
    assert [entry["path"] for entry in tape] == ["/v1/chat/completions"] * 2
    assert tape[1]["response"][-1] == "data: [DONE]"
    assert run.record["recorder"]["write_back"] == "agent-commit"
    assert run.preflight == Preflight.READY
    # The branch holds the agent's commit and nothing more; the tree is clean.
    assert world.state() == {**before, "head": head, "status": ""}
    assert sh(world.checkout, "log", "--format=%s", "-1") == "agent: note the task"


def test_the_agents_exit_code_is_the_recorders_and_is_recorded(world: World):
    recorded = world.record(env=world.env(AGENT_EXIT="3"))
    assert recorded.returncode == 3
    assert world.stored(recorded.run_id).record["agent"]["exit_code"] == 3


def test_a_dirty_tree_is_refused_before_the_agent_runs(world: World):
    (world.checkout / "notes.txt").write_text("mine\n")
    before = world.state()
    recorded = world.record()
    assert recorded.returncode == 2
    assert recorded.stderr.count("\n") == 1
    assert "uncommitted" in recorded.stderr and "--allow-dirty" in recorded.stderr
    assert "agent heard" not in recorded.stdout
    assert not world.fake.received and not Run.objects.exists()
    assert world.state() == before


def test_outside_a_git_work_tree_it_refuses_in_one_line(world: World, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    recorded = world.record(cwd=elsewhere)
    assert recorded.returncode == 2
    assert recorded.stderr.startswith("replayhub-record: not in a git work tree")
    assert recorded.stderr.count("\n") == 1
    assert not world.fake.received


def test_allow_dirty_records_the_dirty_tree_as_a_base_commit_of_its_own(world: World):
    (world.checkout / "notes.txt").write_text("mine\n")
    (world.checkout / "app.py").write_text("VALUE = 2\n")
    before = world.state()
    recorded = world.record("edit", "--allow-dirty")
    assert recorded.returncode == 0, recorded.stderr

    run = world.stored(recorded.run_id)
    assert run.base_sha == world.origin_ref(f"refs/replayhub/bases/{run.external_id}")
    assert run.base_sha != before["head"]
    assert sh(world.checkout, "rev-parse", f"{run.base_sha}^") == before["head"]
    assert sh(world.checkout, "show", f"{run.base_sha}:notes.txt") == "mine"
    assert sh(world.checkout, "show", f"{run.base_sha}:app.py") == "VALUE = 2"
    assert sh(world.checkout, "rev-parse", f"{run.original_commit}^") == run.base_sha
    assert run.record["recorder"]["dirty_base"] is True
    assert run.preflight == Preflight.READY
    assert run.provenance["base"]["source"] == "recorded"
    # The developer's own changes are where they were, the agent's beside them.
    assert world.state() == before


def test_without_its_token_it_refuses_before_the_agent_runs(world: World):
    recorded = world.record(env=world.env(REPLAYHUB_TOKEN=""))
    assert recorded.returncode == 2
    assert "$REPLAYHUB_TOKEN is not set" in recorded.stderr
    # Refused before the agent ran: nothing was done that could be lost.
    assert not world.fake.received and not spooled(world)


def test_an_agent_that_changes_nothing_leaves_the_base_as_its_original(world: World):
    before = world.state()
    recorded = world.record("noop")
    assert recorded.returncode == 0, recorded.stderr
    run = world.stored(recorded.run_id)
    assert run.original_commit == run.base_sha == before["head"]
    assert world.origin_ref(run.original_branch) == before["head"]
    assert run.record["recorder"]["write_back"] == "unchanged"
    assert run.usage == {"input_tokens": 0, "output_tokens": 0, "turns": 0}
    assert run.record["tape"] == []
    assert world.state() == before


def test_what_an_agent_leaves_after_its_commit_goes_on_top_of_it(world: World):
    before = world.state()
    recorded = world.record("edit+commit+more")
    assert recorded.returncode == 0, recorded.stderr
    run = world.stored(recorded.run_id)
    head = sh(world.checkout, "rev-parse", "HEAD")
    assert sh(world.checkout, "rev-parse", f"{run.original_commit}^") == head
    assert sh(world.checkout, "show", f"{run.original_commit}:more.py") == "MORE = 1"
    assert run.record["recorder"]["write_back"] == "agent-commit+work-tree"
    # The branch has the agent's commit; its last file is left untracked.
    assert world.state() == {**before, "head": head, "status": "?? more.py"}


def test_an_agent_command_that_cannot_start_is_127_and_nothing_is_recorded(
    world: World, tmp_path
):
    argv = [sys.executable, str(world.recorder), "--server", world.server]
    argv += ["--project", "shop", "--prompt", "x", "--", str(tmp_path / "missing")]
    recorded = world.call(argv)
    assert recorded.returncode == 127
    assert "cannot run" in recorded.stderr and recorded.stderr.count("\n") == 1
    assert not Run.objects.exists() and not spooled(world)
