"""The database itself refuses rows that break the domain's invariants."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from replayhub.models import (
    Budget,
    BudgetShare,
    Night,
    NightShare,
    Project,
    Replay,
    Run,
    Seed,
    TestOutcome,
)
from reviews.models import Review


@pytest.fixture
def project(db):
    return Project.objects.create(slug="demo", repo_path="/srv/demo.git")


@pytest.fixture
def run(project):
    return Run.objects.create(
        project=project, external_id="r-1", original_commit="a" * 40
    )


def test_database_rejects_an_unknown_replay_status(run):
    replay = Replay.objects.create(run=run, project=run.project)
    with pytest.raises(IntegrityError), transaction.atomic():
        Replay.objects.filter(pk=replay.pk).update(status="exploded")


def test_database_rejects_an_unknown_verdict(run):
    replay = Replay.objects.create(run=run, project=run.project)
    with pytest.raises(IntegrityError), transaction.atomic():
        Replay.objects.filter(pk=replay.pk).update(
            status="finished", verdict="probably-fine", reason="It looked fine."
        )


def test_finished_replay_without_a_reason_is_refused(run):
    replay = Replay.objects.create(run=run, project=run.project)
    with pytest.raises(IntegrityError), transaction.atomic():
        Replay.objects.filter(pk=replay.pk).update(
            status="finished", verdict="identical"
        )


def test_a_finished_replay_with_verdict_and_reason_is_accepted(run):
    replay = Replay.objects.create(run=run, project=run.project)
    Replay.objects.filter(pk=replay.pk).update(
        status="finished",
        verdict="identical",
        reason_code="same_tree",
        reason="Both trees are identical.",
        finished_at=timezone.now(),
    )
    replay.refresh_from_db()
    assert replay.verdict == "identical"


def test_a_run_external_id_is_unique_within_its_project(run):
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(project=run.project, external_id="r-1")


def test_the_same_external_id_may_exist_in_another_project(run):
    other = Project.objects.create(slug="other", repo_path="/srv/other.git")
    assert Run.objects.create(project=other, external_id="r-1").pk


def test_a_test_outcome_cannot_pass_without_having_run(run):
    replay = Replay.objects.create(run=run, project=run.project)
    with pytest.raises(IntegrityError), transaction.atomic():
        TestOutcome.objects.create(
            replay=replay, tree="original", ran=False, passed=True
        )


def test_an_unknown_runner_is_refused(project):
    with pytest.raises(IntegrityError), transaction.atomic():
        Project.objects.filter(pk=project.pk).update(runner="chroot")


@pytest.mark.parametrize(
    "dimension", ["replays", "sandbox_seconds", "tokens", "cost_usd"]
)
def test_a_nights_share_can_never_reserve_more_than_its_limit(project, dimension):
    now = timezone.now()
    night = Night.objects.create(
        project=project, date=now.date(), window_start=now, window_end=now
    )
    share = NightShare.objects.create(
        night=night,
        tier="tape",
        limit_replays=2,
        limit_sandbox_seconds=600,
        limit_tokens=1000,
        limit_cost_usd=5,
    )
    limit = getattr(share, f"limit_{dimension}")
    NightShare.objects.filter(pk=share.pk).update(**{f"reserved_{dimension}": limit})
    with pytest.raises(IntegrityError), transaction.atomic():
        NightShare.objects.filter(pk=share.pk).update(
            **{f"reserved_{dimension}": limit + 1}
        )


def test_a_share_is_one_per_tier_and_only_of_a_tier_with_a_share(project):
    now = timezone.now()
    night = Night.objects.create(
        project=project, date=now.date(), window_start=now, window_end=now
    )
    NightShare.objects.create(night=night, tier="text")
    with pytest.raises(IntegrityError), transaction.atomic():
        NightShare.objects.create(night=night, tier="text")
    with pytest.raises(IntegrityError), transaction.atomic():
        NightShare.objects.create(night=night, tier="preflight")
    budget = Budget.objects.create(project=project)
    BudgetShare.objects.create(budget=budget, tier="tape")
    with pytest.raises(IntegrityError), transaction.atomic():
        BudgetShare.objects.create(budget=budget, tier="tape")
    with pytest.raises(IntegrityError), transaction.atomic():
        BudgetShare.objects.create(budget=budget, tier="replicates")


def test_an_overturn_must_name_a_different_verdict(run, reviewer):
    replay = Replay.objects.create(run=run, project=run.project)
    with pytest.raises(IntegrityError), transaction.atomic():
        Review.objects.create(
            replay=replay,
            reviewer=reviewer,
            decision="overturn",
            verdict_before="equivalent",
            verdict_after="equivalent",
        )


def test_a_source_reward_window_must_not_be_empty(project):
    with pytest.raises(IntegrityError), transaction.atomic():
        Project.objects.filter(pk=project.pk).update(
            min_source_reward=1.0, max_source_reward=0.0
        )


def test_a_run_comes_from_a_known_source(run):
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(source="telepathy")


def test_two_seeds_of_a_rollout_never_share_a_key(run):

    Seed.objects.create(
        run=run,
        number=1,
        key="t:continue:compaction@6",
        kind="continue",
        anchor="compaction",
        anchor_node=6,
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        Seed.objects.create(
            run=run,
            number=2,
            key="t:continue:compaction@6",
            kind="continue",
            anchor="compaction",
            anchor_node=6,
        )
