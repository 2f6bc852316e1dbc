"""A run's standing read from its replays, and what people see of it: the run
page's strip, rate and decision, the API's ``replicates``, and the queue's
band for runs that sometimes diverge."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from replayhub.models import Budget, Replay, ReviewBand, Run
from replayhub.replicates import standing
from replayhub.replicates.stopping import ReplicateDecision, ReplicatePolicy
from reviews.models import ReviewPolicy
from tests.factories import make_project, make_replay, make_user

POLICY = ReplicatePolicy(threshold=0.8, confidence=0.9, most=10)


def sampled(run: Run, *verdicts: str, tier: str = "agentic") -> list[Replay]:
    """Finished replicates of ``run`` with these verdicts."""
    made = [
        make_replay(verdict=verdict, run=run, project=run.project)
        for verdict in verdicts
    ]
    Replay.objects.filter(pk__in=[r.pk for r in made]).update(tier=tier, replicate=True)
    return made


@pytest.fixture
def run(db):
    project = make_project("shop")
    Budget.objects.create(
        project=project,
        replicate_threshold=0.8,
        replicate_confidence=0.9,
        replicate_most=10,
    )
    first = make_replay(verdict="identical", project=project, title="<b>Task</b>")
    return first.run


def test_identical_and_equivalent_succeed_divergent_fails_inconclusive_apart(run):
    sampled(run, "equivalent", "divergent", "inconclusive", "identical")
    sampled(run, "divergent", tier="tape")  # the environment's, not a sample
    Replay.objects.create(run=run, project=run.project)  # still queued

    found = standing.run_replicates(run, POLICY)

    assert (found.live.successes, found.live.failures, found.live.inconclusive) == (
        3,
        1,
        1,
    )
    assert found.standing is not None
    assert found.standing.decision is ReplicateDecision.UNDECIDED
    assert len(found.replays) == 7  # the queued one too, oldest first
    assert found.replays[0].verdict == "identical"


def test_six_successes_reproduce_and_a_second_failure_does_not(run):
    sampled(run, *["identical"] * 5)
    assert standing.run_replicates(run, POLICY).standing.decision == "reproduces"

    other = make_replay(verdict="divergent", project=run.project).run
    sampled(other, "identical", "divergent")
    decided = standing.run_replicates(other, POLICY).standing
    assert decided.decision is ReplicateDecision.DOES_NOT_REPRODUCE


@pytest.mark.parametrize(
    ("verdicts", "problem"),
    [
        (["identical", "identical", "identical"], False),
        (["identical", "divergent", "identical"], True),
        (["divergent", "divergent"], True),  # steadily not what was recorded
        (["identical", "inconclusive"], False),  # one conclusive is no comparison
    ],
)
def test_tape_replays_that_disagree_name_an_environment_problem(run, verdicts, problem):
    sampled(run, *verdicts, tier="tape")

    assert standing.run_replicates(run, POLICY).environment_problem is problem


def test_the_run_page_shows_its_strip_rate_and_decision(client, reviewer, run):
    made = sampled(run, "identical", "divergent", "inconclusive")
    tape = sampled(run, "identical", "divergent", tier="tape")
    client.force_login(reviewer)

    html = client.get(reverse("reviews:run_detail", args=[run.pk])).content.decode()

    # One cell per replay, each a link to it, by verdict and tier.
    for replay in [*made, *tape]:
        assert reverse("reviews:replay_detail", args=[replay.pk]) in html
    assert html.count('class="replicate-cell') == 6
    assert "replicate-cell tier-tape v-divergent" in html
    rate = "reproduced 2 of 3 samples, 90 % interval 25\N{EN DASH}92 %; 1 inconclusive"
    assert f"{rate[0].upper()}{rate[1:]}." in html
    assert "Undecided" in html
    assert "Environment problem" in html
    assert "<b>Task</b>" not in html  # escaped, as everything on the page


def test_a_run_of_a_project_without_replicates_shows_no_strip(client, reviewer):
    replay = make_replay(verdict="identical")
    client.force_login(reviewer)

    html = client.get(reverse("reviews:run_detail", args=[replay.run_id])).content

    assert b"replicate-strip" not in html


def test_the_api_carries_the_decision_counts_interval_and_replays(
    client, reviewer, run
):
    sampled(run, *["identical"] * 5)
    client.force_login(reviewer)

    data = client.get(reverse("api_run_detail", args=[run.pk])).json()

    replicates = data["replicates"]
    assert replicates["decision"] == "reproduces"
    assert (
        replicates["successes"],
        replicates["failures"],
        replicates["inconclusive"],
    ) == (6, 0, 0)
    low, high = replicates["interval"]
    assert 0.6 < low < 0.75 and high == 1.0
    assert [r["replicate"] for r in replicates["replays"]] == [False] + [True] * 5
    assert replicates["rate"].startswith("reproduced 6 of 6 samples")
    assert replicates["environment_problem"] is False


def test_blind_review_hides_the_rate_and_the_decision(client, run):
    ReviewPolicy.objects.create(project=run.project, blind=True)
    sampled(run, "divergent", "identical")
    rita = make_user("rita-blind", "reviewer")
    client.force_login(rita)

    html = client.get(reverse("reviews:run_detail", args=[run.pk])).content.decode()
    data = client.get(reverse("api_run_detail", args=[run.pk])).json()

    assert "v-divergent" not in html and "Reproduced" not in html
    assert "hidden until you have judged" in html
    assert "decision" not in data["replicates"]
    assert {r["verdict"] for r in data["replicates"]["replays"]} == {None}


def test_a_run_that_sometimes_diverges_queues_first_in_a_band_of_its_own(
    client, reviewer, run
):
    plain = make_replay(verdict="divergent", title="Always diverges")
    (divergent,) = sampled(run, "divergent")
    Replay.objects.filter(pk=divergent.pk).update(
        finished_at=plain.finished_at - timedelta(hours=1)
    )

    moved = Replay.objects.band_sometimes_divergent(run.pk)

    assert moved == 1
    divergent.refresh_from_db()
    assert divergent.review_band == ReviewBand.SOMETIMES_DIVERGES
    # A run with no replicate keeps the divergent band.
    assert Replay.objects.band_sometimes_divergent(plain.run_id) == 0
    client.force_login(reviewer)
    html = client.get(reverse("reviews:queue")).content.decode()
    assert "Sometimes diverges" in html
    # Older, but first: the band comes before the divergent one.
    assert html.index(f"/replays/{divergent.pk}/") < html.index(f"/replays/{plain.pk}/")
