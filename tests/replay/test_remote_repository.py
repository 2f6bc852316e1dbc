"""Whole replays of a project whose repository lives on a git remote: the
scripted calculator served by git daemon on 127.0.0.1, registered by its URL,
replayed in the real sandbox from this host's mirror."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.ingest.preflight import preflight_runs
from replayhub.models import Preflight, Project, Replay
from tests.factories import make_calc_run
from tests.gitservers import GitDaemon
from tests.scripted import original_commit

pytestmark = pytest.mark.django_db


@pytest.fixture
def daemon(calc_repo):
    with GitDaemon(calc_repo.path.parent) as server:
        yield server


@pytest.fixture
def remote_project(daemon, calc_repo, mirror_dir):
    options = {
        "--repo": daemon.url(calc_repo.path.name),
        "--test-command": "python3 -m unittest -v",
        "--agent-command": "sh agent.sh",
        "--time-limit": "30",
    }
    call_command(
        "project_add",
        "calc",
        *[word for pair in options.items() for word in pair],
        "--allowed-paths",
        "calc.py",
        "test_*.py",
    )
    project = Project.objects.get(slug="calc")
    project.memory_limit_mb = 512
    project.save()
    # This host's mirror, made before the original below was pushed.
    project.repository()
    return project


def replay(run):
    replay = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=replay.pk)
    return Replay.objects.select_related("comparison").get(pk=replay.pk)


def test_a_commit_pushed_after_registration_is_fetched_and_replayed_to_a_verdict(
    remote_project, calc_repo, calc_base
):
    good = original_commit(calc_repo, GOOD, branch="agent/good")
    run = make_calc_run(remote_project, prompt="same", original=good, base=calc_base)
    assert remote_project.mirror().missing([good]) == [good]

    result = replay(run)

    assert (result.verdict, result.reason_code) == ("identical", "same_tree")
    assert result.comparison.identical
    assert remote_project.mirror().missing([good]) == []


def test_preflight_fetches_the_remote_before_it_resolves(
    remote_project, calc_repo, calc_base
):
    good = original_commit(calc_repo, GOOD, branch="agent/good")
    run = make_calc_run(remote_project, prompt="same", original=good, base=calc_base)

    result = preflight_runs(run_ids=[run.pk])

    run.refresh_from_db()
    assert (result.ready, run.preflight) == (1, Preflight.READY)
    assert run.provenance["original_commit"] == good


def test_a_remote_that_disappears_ends_the_replay_inconclusive_in_gits_words(
    remote_project, calc_repo, calc_base, daemon
):
    good = original_commit(calc_repo, GOOD, branch="agent/good")
    run = make_calc_run(remote_project, prompt="same", original=good, base=calc_base)
    daemon.stop()

    result = replay(run)
    checked = preflight_runs(run_ids=[run.pk])

    assert result.status == "finished"
    assert (result.verdict, result.reason_code) == ("inconclusive", "repo_unreachable")
    assert result.reason.startswith(
        "The project's repository could not be fetched from its remote"
    )
    assert "errno=Connection refused" in result.reason
    assert result.agent_output == ""
    # Preflight leaves the run pending, and says why.
    run.refresh_from_db()
    assert run.preflight == Preflight.PENDING
    assert checked.failed == 1
    assert checked.errors[0].startswith("calc: the repository could not be fetched")
    assert "Connection refused" in checked.errors[0]
