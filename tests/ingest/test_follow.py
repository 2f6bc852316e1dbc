"""Following a training run's growing rollout files."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import call_command

from replayhub import tasks
from replayhub.ingest import follow, services, verifiers
from replayhub.models import FollowedFile, FollowSource, Project, Run
from tests.conftest import wait_for
from tests.traces import line, multi_tool, write_records


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return tmp_path / "output"


def record(n: int) -> dict:
    return multi_tool(f"{n:032x}").record()


def write(path: Path, data: bytes, *, append: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab" if append else "wb") as out:
        out.write(data)
    return path


def step_file(run_dir: Path, step: int) -> Path:
    return run_dir / "rollouts" / f"step_{step}" / "train_rollouts_env.jsonl"


def follow_once(project: Project, pattern: Path) -> dict:
    out = io.StringIO()
    call_command(
        "import_runs",
        "--format",
        "verifiers",
        "--follow",
        str(pattern),
        "--project",
        project.slug,
        "--once",
        "--json",
        stdout=out,
    )
    return json.loads(out.getvalue())


def stored() -> list[str]:
    return list(Run.objects.order_by("pk").values_list("external_id", flat=True))


def test_appended_lines_are_picked_up_and_a_partial_line_waits(rl_project, run_dir):
    path = write(step_file(run_dir, 1), line(record(1)))
    assert follow_once(rl_project, run_dir)["imported"] == 1
    # The writer appends one whole record and half of the next.
    half = line(record(3))
    write(path, line(record(2)) + half[:40], append=True)
    result = follow_once(rl_project, run_dir)
    assert (result["imported"], result["invalid_total"]) == (1, 0)
    write(path, half[40:], append=True)
    assert follow_once(rl_project, run_dir)["imported"] == 1
    assert stored() == [f"{n:032x}" for n in (1, 2, 3)]
    row = FollowedFile.objects.get()
    assert (row.offset, row.lines) == (path.stat().st_size, 3)


def test_an_unchanged_directory_imports_nothing_and_reads_nothing(rl_project, run_dir):
    write(step_file(run_dir, 1), line(record(1)))
    follow_once(rl_project, run_dir)
    source = FollowSource.objects.get()
    opened = []
    real_open = open

    def watching_open(file, *args, **kw):
        opened.append(str(file))
        return real_open(file, *args, **kw)

    follow.open = watching_open  # type: ignore[attr-defined]
    try:
        result = services.rollouts_follow(source=source)
    finally:
        del follow.open  # type: ignore[attr-defined]
    assert (result.imported, result.duplicates, opened) == (0, 0, [])


def test_step_9_is_imported_before_step_10(rl_project, run_dir):
    for step in (10, 9, 1):
        write(step_file(run_dir, step), line(record(step)))
    assert follow_once(rl_project, run_dir)["imported"] == 3
    assert stored() == [f"{n:032x}" for n in (1, 9, 10)]


def test_new_files_in_later_steps_are_found(rl_project, run_dir):
    write(step_file(run_dir, 1), line(record(1)))
    follow_once(rl_project, run_dir)
    write(step_file(run_dir, 2), line(record(2)))
    assert follow_once(rl_project, run_dir)["imported"] == 1


def test_a_file_that_shrank_is_reported_and_read_again(rl_project, run_dir):
    path = write(step_file(run_dir, 1), line(record(1)) + line(record(2)))
    follow_once(rl_project, run_dir)
    write(path, line(record(3)))
    result = follow_once(rl_project, run_dir)
    (problem,) = [f for f in result["files"] if "problem" in f]
    assert problem["file"] == str(path) and "shrank" in problem["problem"]
    assert result["imported"] == 1
    assert "shrank" in FollowedFile.objects.get().problem


def test_a_replaced_file_is_reported_and_its_new_lines_imported(rl_project, run_dir):
    path = write(step_file(run_dir, 1), line(record(1)))
    follow_once(rl_project, run_dir)
    replacement = path.with_name("new.tmp")
    write(replacement, line(record(1)) + line(record(2)) + line(record(3)))
    os.replace(replacement, path)
    result = follow_once(rl_project, run_dir)
    assert any("replaced" in f.get("problem", "") for f in result["files"])
    assert (result["imported"], result["duplicates"]) == (2, 1)


def test_a_file_rewritten_in_place_is_told_from_one_that_grew(rl_project, run_dir):
    path = write(step_file(run_dir, 1), line(record(1)))
    follow_once(rl_project, run_dir)
    with open(path, "r+b") as out:  # same inode, other bytes, longer
        out.write(line(record(4)) + line(record(5)))
    result = follow_once(rl_project, run_dir)
    assert any("rewritten" in f.get("problem", "") for f in result["files"])
    assert result["imported"] == 2


def test_a_crash_between_batches_never_imports_a_line_twice(
    rl_project, run_dir, monkeypatch
):
    path = write(step_file(run_dir, 1), b"".join(line(record(n)) for n in range(5)))
    monkeypatch.setattr(follow, "BATCH_SIZE", 2)
    judged = []
    real_judge = verifiers.RolloutStore.judge

    def crash_on_the_fifth(self, loaded):
        judged.append(loaded.number)
        if len(judged) == 5:
            raise KeyboardInterrupt  # the worker is killed mid-pass
        return real_judge(self, loaded)

    monkeypatch.setattr(verifiers.RolloutStore, "judge", crash_on_the_fifth)
    with pytest.raises(KeyboardInterrupt):
        follow_once(rl_project, run_dir)
    assert len(stored()) == 4
    monkeypatch.setattr(verifiers.RolloutStore, "judge", real_judge)
    result = follow_once(rl_project, run_dir)
    # The next pass starts after the last line stored: nothing is seen twice.
    assert (result["imported"], result["duplicates"]) == (1, 0)
    assert FollowedFile.objects.get().offset == path.stat().st_size


def test_a_second_pass_that_loses_the_race_stores_nothing(rl_project, run_dir):
    write(step_file(run_dir, 1), line(record(1)) + line(record(2)))
    source = services.follow_source_get(project=rl_project, pattern=str(run_dir))
    row = FollowedFile.objects.create(source=source, path=str(step_file(run_dir, 1)))
    # This pass read offset 0; another worker moved it before this one stored.
    FollowedFile.objects.filter(pk=row.pk).update(offset=1)
    store = verifiers.RolloutStore(rl_project, verifiers.RolloutSummary())
    follow._follow_file(store, row, step_file(run_dir, 1), follow._Seen(1, 0, 0))
    assert stored() == []
    assert store.summary.files[-1]["problem"] == "followed by another pass"


def test_the_beat_task_claims_one_pass_per_period(rl_project, run_dir):
    write(step_file(run_dir, 1), line(record(1)))
    source = services.follow_source_get(project=rl_project, pattern=str(run_dir))
    first = services.follow_claimed(source_id=source.pk)
    assert first is not None and first.imported == 1
    assert services.follow_claimed(source_id=source.pk) is None
    source.refresh_from_db()
    assert source.last_summary["imported"] == 1


@pytest.mark.django_db(transaction=True)
def test_the_beat_task_queues_a_pass_per_source_that_a_worker_does(
    celery_worker, tmp_path
):
    project = Project.objects.create(
        slug="rl-beat",
        repo_path=str(tmp_path),
        rollout_anchor="tool-call",
        harness_command=["python", "harness.py"],
    )
    run_dir = tmp_path / "output"
    write(step_file(run_dir, 3), line(record(3)) + line(record(4)))
    services.follow_source_get(project=project, pattern=str(run_dir))
    tasks.follow_rollouts()  # what beat sends every REPLAYHUB_FOLLOW_SECONDS
    wait_for(lambda: Run.objects.filter(project=project).count() == 2, timeout=60)
    source = FollowSource.objects.get(project=project)
    wait_for(lambda: FollowSource.objects.get(pk=source.pk).last_summary)
    assert FollowSource.objects.get(pk=source.pk).last_summary["imported"] == 2


def test_prime_rls_unsuffixed_record_files_are_followed_and_indexes_are_not(
    rl_project, run_dir
):
    step = run_dir / "rollouts" / "step_0"
    write(step / "train_rollouts.jsonl", line(record(1)))
    write(step / "eval_rollouts.jsonl", line(record(2)))
    # An index beside them is never read as records.
    write(step / "index_train_rollouts.jsonl", b'{"not": "a record"}\n')
    result = follow_once(rl_project, run_dir)
    assert (result["imported"], result["invalid_total"]) == (2, 0)
    assert stored() == [f"{n:032x}" for n in (2, 1)]


def test_a_followed_directory_without_record_files_says_so_in_one_line(
    rl_project, run_dir
):
    run_dir.mkdir()
    write(run_dir / "rollouts" / "step_0" / "notes.txt", b"not yet\n")
    out = io.StringIO()
    call_command(
        "import_runs", "--format", "verifiers", "--follow", str(run_dir),
        "--project", rl_project.slug, "--once", stdout=out,
    )  # fmt: skip
    notice = [line for line in out.getvalue().splitlines() if str(run_dir) in line]
    assert notice == [
        f"{run_dir}: no record file (*_rollouts*.jsonl) under this directory yet"
    ]


def test_index_skipped_rows_at_the_end_of_a_file_are_counted_once(rl_project, run_dir):
    # The last two rows are below the project's reward window: the index
    # skips them without their lines being read.
    rl_project.min_source_reward = 0.5
    rl_project.save()
    records = [
        multi_tool(f"{n:032x}", reward=reward).record()
        for n, reward in ((1, 1.0), (2, 0.0), (3, 0.0))
    ]
    path = write_records(run_dir / "rollouts" / "step_0", records)

    first = follow_once(rl_project, run_dir)
    again = follow_once(rl_project, run_dir)

    assert (first["imported"], first["skipped"]["source_reward"]) == (1, 2)
    assert (again["imported"], again["skipped"]["source_reward"]) == (0, 0)
    row = FollowedFile.objects.get()
    assert (row.offset, row.lines) == (path.stat().st_size, 3)
    # A record appended later is still read, and the old rows stay counted.
    write(path, line(record(4)), append=True)
    later = follow_once(rl_project, run_dir)
    assert (later["imported"], later["skipped"]["source_reward"]) == (1, 0)
