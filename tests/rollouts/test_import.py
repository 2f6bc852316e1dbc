"""``import_runs --format verifiers``: rollouts become runs with their seeds."""

from __future__ import annotations

import io
import json
import shutil
import sys

import pytest
from django.core.management import CommandError, call_command

from replayhub.models import Preflight, Project, Run, RunSource, Seed
from tests.traces import (
    INDEX,
    RECORDS,
    compacted,
    line,
    multi_tool,
    write_records,
)


@pytest.fixture
def recheck_project(db, tmp_path):
    """A rollout project in recheck mode: its seeds hand the model its finished
    attempt to verify and fix."""
    return Project.objects.create(
        slug="rl",
        repo_path=str(tmp_path),
        harness_command=["python", "harness.py"],
        rollout_mode="recheck",
    )


@pytest.fixture
def fixture_copy(tmp_path):
    folder = tmp_path / "rollouts"
    folder.mkdir()
    shutil.copy(RECORDS, folder)
    shutil.copy(INDEX, folder)
    return folder / RECORDS.name


def import_runs(*args: str, stdin: bytes | None = None) -> tuple[int, str]:
    out = io.StringIO()
    original = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        call_command("import_runs", *args, stdout=out, stderr=io.StringIO())
    except SystemExit as exit:
        return exit.code, out.getvalue()
    finally:
        sys.stdin = original
    return 0, out.getvalue()


def summary(*args: str, **kw) -> tuple[int, dict]:
    code, out = import_runs(*args, "--json", **kw)
    return code, json.loads(out)


def test_the_fixture_imports_its_two_source_rollouts_and_skips_the_replayed_one(
    recheck_project, fixture_copy
):
    code, result = summary(
        "--format", "verifiers", str(fixture_copy), "--project", "rl"
    )
    assert code == 0
    assert result["imported"] == 2
    assert result["skipped"]["replayed"] == 1
    assert result["seeds"] == 2
    assert result["files"] == [{"file": str(fixture_copy), "indexed": True}]
    runs = Run.objects.filter(project=recheck_project).order_by("external_id")
    assert [r.external_id[:8] for r in runs] == ["5c1f0e9a", "9e8d7c6b"]
    assert {r.source for r in runs} == {RunSource.ROLLOUT}
    assert {r.preflight for r in runs} == {Preflight.READY}
    assert [r.reward for r in runs] == [1.0, 0.0]
    assert runs[0].title == "invoicer-rounding"
    assert runs[0].record == json.loads(fixture_copy.read_bytes().splitlines()[0])
    seed = Seed.objects.get(run=runs[1])
    assert (seed.number, seed.kind, seed.anchor, seed.anchor_node) == (
        1,
        "recheck",
        "final",
        9,
    )
    assert seed.snapshot == "snap://invoicer/31/9e8d7c6b/n9"
    assert seed.messages[-1]["content"] == recheck_project.verification_turn
    assert seed.original_completion.startswith("Added the parameter")


def test_importing_again_finds_duplicates_and_reports_conflicts(
    recheck_project, tmp_path
):
    records = [multi_tool(f"{n:032x}").record() for n in range(3)]
    path = write_records(tmp_path / "a", records)
    assert (
        summary("--format", "verifiers", str(path), "--project", "rl")[1]["imported"]
        == 3
    )
    # Without the index, every line is read and compared with what is stored.
    changed = [dict(records[0], rewards={"passed": 0.5}), *records[1:]]
    again = write_records(tmp_path / "b", changed, index=False)
    code, result = summary("--format", "verifiers", str(again), "--project", "rl")
    assert code == 1
    assert (result["imported"], result["duplicates"], result["conflicts_total"]) == (
        0,
        2,
        1,
    )
    assert result["conflicts"][0]["external_id"] == records[0]["id"]
    assert Run.objects.get(external_id=records[0]["id"]).reward == 1.0
    # With the index, stored traces are not read again.
    code, result = summary("--format", "verifiers", str(path), "--project", "rl")
    assert (code, result["duplicates"], Seed.objects.count()) == (0, 3, 3)


def test_a_glob_imports_step_9_before_step_10(recheck_project, tmp_path):
    for step in (10, 9, 2):
        write_records(tmp_path / f"step_{step}", [multi_tool(f"{step:032x}").record()])
    code, result = summary(
        "--format",
        "verifiers",
        str(tmp_path / "step_*" / "train_*.jsonl"),
        "--project",
        "rl",
    )
    assert (code, result["imported"]) == (0, 3)
    order = list(Run.objects.order_by("pk").values_list("external_id", flat=True))
    assert order == [f"{n:032x}" for n in (2, 9, 10)]


def test_a_line_that_cannot_be_read_is_reported_with_its_number(
    recheck_project, tmp_path
):
    good = multi_tool().record()
    bad = dict(multi_tool("b" * 32).record(), version=3)
    path = tmp_path / "train_rollouts_env.jsonl"
    path.write_bytes(line(good) + b"\n" + line(bad))
    code, out = import_runs("--format", "verifiers", str(path), "--project", "rl")
    assert code == 1
    assert f"{path}: line 3: invalid: version: 3 is not a record shape" in out
    assert Run.objects.count() == 1


def test_the_reward_window_and_rollouts_without_seeds_are_skipped(
    recheck_project, tmp_path
):
    recheck_project.rollout_mode = "continue"
    recheck_project.max_source_reward = 0.5
    recheck_project.save()
    records = [
        compacted("1" * 32, reward=0.0).record(),
        compacted("2" * 32, reward=1.0).record(),
        multi_tool("3" * 32, reward=0.0).record(),  # linear: no restart to continue
    ]
    for index in (True, False):
        Run.objects.all().delete()
        path = write_records(tmp_path / str(index), records, index=index)
        code, result = summary("--format", "verifiers", str(path), "--project", "rl")
        assert (code, result["imported"], result["seeds"]) == (0, 1, 1)
        assert result["skipped"]["source_reward"] == 1
        assert result["skipped"]["no_seed"] == 1
        assert Run.objects.get().external_id == "1" * 32


def test_standard_input_is_read_whole(recheck_project):
    data = line(multi_tool().record()) + line(compacted().record())
    code, result = summary("--format", "verifiers", "-", "--project", "rl", stdin=data)
    assert (code, result["imported"], result["seeds"]) == (0, 2, 2)


def test_version_1_records_import_alike(recheck_project, tmp_path):
    path = write_records(tmp_path, [multi_tool().record(version=1)])
    code, result = summary("--format", "verifiers", str(path), "--project", "rl")
    assert (code, result["imported"], result["seeds"]) == (0, 1, 1)
    assert Run.objects.get().model == "m-1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "verifiers", "x.jsonl"], "takes --project"),
        (["--format", "verifiers", "--project", "rl"], "give a FILE"),
        (
            ["--format", "verifiers", "/nope/*.jsonl", "--project", "rl"],
            "matches no file",
        ),
        (["--format", "verifiers", "/nope.jsonl", "--project", "rl"], "no such file"),
        (["--follow", "/tmp", "--project", "rl"], "--follow takes --format verifiers"),
        (
            ["--format", "verifiers", "x", "--once", "--project", "rl"],
            "--once goes with",
        ),
    ],
)
def test_usage_errors_exit_with_2(recheck_project, args, message):
    with pytest.raises(CommandError, match=message) as info:
        call_command("import_runs", *args, stdout=io.StringIO())
    assert info.value.returncode == 2
