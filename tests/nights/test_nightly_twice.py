"""Operator actions are idempotent: ``nightly --now`` twice in a day admits once."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.utils import timezone

from replayhub.models import Night, Project, Replay
from tests.factories import make_budget, make_runs, share_of


@pytest.fixture
def project(db):
    project = Project.objects.create(
        slug="shop",
        repo_path="/srv/shop.git",
        agentic_enabled=True,
        time_limit_seconds=300,
        flake_reruns=0,
    )
    make_budget(
        project,
        window_start_hour=22,
        window_end_hour=6,
        timezone="UTC",
        shares={"agentic": {"max_replays": 10}},
    )
    make_runs(project, 4, now=timezone.now())
    return project


def nightly_now(capsys) -> str:
    call_command("nightly", "--project", "shop", "--now")
    return capsys.readouterr().out


def replayed(replays) -> None:
    """The admitted replays ran to their end, as a worker leaves them."""
    replays.update(
        status="finished",
        verdict="identical",
        reason_code="tree_identical",
        reason="The replay's tree is the original's.",
        finished_at=timezone.now(),
    )


def test_a_second_run_of_tonight_admits_nothing_once_the_first_has_replayed(
    project, capsys
):
    first = nightly_now(capsys)
    assert "admitted 4, deferred 0" in first
    assert "already admitted tonight" not in first
    replayed(Replay.objects.filter(project=project))

    second = nightly_now(capsys)

    assert "admitted 0, deferred 0" in second
    assert "already admitted tonight: 4" in second
    assert Replay.objects.filter(project=project).count() == 4
    share = share_of(Night.objects.get(project=project))
    assert share.reserved_replays == 4  # reserved by the first run only


def test_a_second_run_while_the_first_is_queued_admits_nothing_and_says_so(
    project, capsys
):
    nightly_now(capsys)
    call_command("nightly", "--project", "shop", "--now", "--json")
    result = json.loads(capsys.readouterr().out)[0]
    assert (result["admitted"], result["already_admitted"]) == (0, 4)
    assert result["reserved_replays"] == 4
    assert Replay.objects.filter(project=project).count() == 4


def test_a_run_imported_between_the_two_is_admitted_by_the_second(project, capsys):
    nightly_now(capsys)
    replayed(Replay.objects.filter(project=project))
    make_runs(project, 1, now=timezone.now(), prefix="late")

    second = nightly_now(capsys)

    assert "admitted 1, deferred 0" in second
    assert "already admitted tonight: 4" in second
    assert Replay.objects.filter(project=project).count() == 5
