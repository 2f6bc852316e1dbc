"""Preflight on import: which runs can ever reach a verdict (real git repositories)."""

from __future__ import annotations

import io
import json

from django.core.management import call_command

from replayhub.ingest.preflight import preflight_pending, preflight_runs
from replayhub.models import Preflight, Run
from replayhub.replay.provenance import NO_ORIGINAL
from tests.records import PINNED, jsonl, record, write


def import_file(tmp_path, *values, options=()):
    path = write(tmp_path / "runs.jsonl", jsonl(*values))
    out = io.StringIO()
    call_command(
        "import_runs", str(path), "--project", "shop", "--json", *options, stdout=out
    )
    return json.loads(out.getvalue())


def agent_commit(repo, name="agent/fix"):
    base = repo.head()
    original = repo.commit({"cart.py": "TOTAL = 1\n"}, "agent fix", branch=name)
    repo.checkout("main")
    return base, original


def test_a_run_whose_original_commit_is_in_the_repository_is_ready(
    git_project, git_repo, tmp_path
):
    base, original = agent_commit(git_repo)

    summary = import_file(tmp_path, record(1, base_sha=base, original_commit=original))

    assert summary["preflight"] == {
        "ready": 1,
        "unreproducible": 0,
        "failed": 0,
        "pending": 0,
    }
    run = Run.objects.get()
    assert (run.preflight, run.preflight_reason) == (Preflight.READY, "")
    assert run.provenance["reproducible"] is True
    assert run.provenance["original_commit"] == original
    assert run.provenance["base"]["sha"] == base
    assert run.provenance["base"]["source"] == "recorded"
    assert run.provenance["base"]["confirmed"] is True
    assert run.provenance["warnings"] == []


def test_a_short_original_sha_is_resolved_and_the_base_inferred(
    git_project, git_repo, tmp_path
):
    base, original = agent_commit(git_repo)

    import_file(tmp_path, record(1, original_commit=original[:10], drop=["base_sha"]))

    run = Run.objects.get()
    assert run.preflight == Preflight.READY
    assert run.provenance["base"]["sha"] == base
    assert run.provenance["base"]["source"] == "fork-point"
    assert any("inferred" in warning for warning in run.provenance["warnings"])


def test_a_run_without_an_original_commit_is_unreproducible_as_ran_on_the_host(
    git_project, tmp_path
):
    import_file(tmp_path, record(1, original_commit=None))

    run = Run.objects.get()
    assert run.preflight == Preflight.UNREPRODUCIBLE
    assert run.preflight_reason == NO_ORIGINAL
    assert "ran on the host" in run.preflight_reason
    assert run.provenance["reproducible"] is False


def test_a_run_whose_original_commit_is_missing_from_the_repository_is_unreproducible(
    git_project, tmp_path
):
    missing = "0123456789abcdef0123456789abcdef01234567"

    import_file(tmp_path, record(1, original_commit=missing))

    run = Run.objects.get()
    assert run.preflight == Preflight.UNREPRODUCIBLE
    assert run.preflight_reason == (
        f"the original commit {missing} is not in the project repository "
        "(the write-back was never pushed there, or was removed)"
    )


def test_a_floating_image_and_config_drift_are_warnings_not_refusals(
    git_project, git_repo, tmp_path
):
    base, original = agent_commit(git_repo)
    value = record(
        1,
        base_sha=base,
        original_commit=original,
        sandbox={"image": "ghcr.io/acme/agent:latest", "config_sha256": "d" * 64},
    )

    import_file(tmp_path, value)

    run = Run.objects.get()
    assert run.preflight == Preflight.READY
    warnings = " | ".join(run.provenance["warnings"])
    assert "floating tag" in warnings
    assert "configuration drifted" in warnings


def test_no_preflight_leaves_runs_pending_until_preflight_only(
    git_project, git_repo, tmp_path
):
    base, original = agent_commit(git_repo)
    values = [
        record(1, base_sha=base, original_commit=original),
        record(2, original_commit=None),
    ]

    summary = import_file(tmp_path, *values, options=["--no-preflight"])

    assert summary["preflight"] is None
    assert set(Run.objects.values_list("preflight", flat=True)) == {Preflight.PENDING}

    out = io.StringIO()
    call_command("import_runs", "--preflight-only", "--project", "shop", stdout=out)
    assert "1 ready, 1 unreproducible (0 pending)" in out.getvalue()
    assert dict(Run.objects.values_list("external_id", "preflight")) == {
        "run-0001": Preflight.READY,
        "run-0002": Preflight.UNREPRODUCIBLE,
    }


def test_an_unreadable_repository_leaves_runs_pending_and_says_why(
    git_project, tmp_path
):
    git_project.repo_path = str(tmp_path / "gone")
    git_project.save()

    summary = import_file(tmp_path, record(1))

    assert summary["preflight"] == {
        "ready": 0,
        "unreproducible": 0,
        "failed": 1,
        "pending": 1,
    }
    assert Run.objects.get().preflight == Preflight.PENDING


def test_runs_with_the_same_inputs_share_one_resolution_and_all_get_it(
    git_project, git_repo, tmp_path
):
    _, original = agent_commit(git_repo)
    values = [record(n, original_commit=original, drop=["base_sha"]) for n in range(5)]
    import_file(tmp_path, *values, options=["--no-preflight"])

    result = preflight_runs(run_ids=Run.objects.values_list("pk", flat=True))

    assert (result.ready, result.unreproducible, result.failed) == (5, 0, 0)
    snapshots = {
        json.dumps(p, sort_keys=True)
        for p in Run.objects.values_list("provenance", flat=True)
    }
    assert len(snapshots) == 1


def test_preflight_pending_stops_at_its_limit_oldest_first(git_project, tmp_path):
    values = [record(n, original_commit=None) for n in range(1, 6)]
    import_file(tmp_path, *values, options=["--no-preflight"])

    result = preflight_pending(project_ids=[git_project.pk], limit=2)

    assert (result.unreproducible, result.pending) == (2, 3)
    done = Run.objects.exclude(preflight=Preflight.PENDING)
    assert sorted(done.values_list("external_id", flat=True)) == [
        "run-0001",
        "run-0002",
    ]


def test_preflight_refreshes_a_run_once_its_commit_arrives(
    git_project, git_repo, tmp_path
):
    value = record(1, original_commit="f" * 40)
    import_file(tmp_path, value)
    run = Run.objects.get()
    assert run.preflight == Preflight.UNREPRODUCIBLE

    _, original = agent_commit(git_repo)
    Run.objects.filter(pk=run.pk).update(original_commit=original)
    preflight_runs(run_ids=[run.pk])

    run.refresh_from_db()
    assert (run.preflight, run.preflight_reason) == (Preflight.READY, "")
    assert run.provenance["original_commit"] == original
    assert run.provenance["image"] == PINNED
