"""Replicates end to end in the real sandbox: a night samples the scripted
calculator's runs until each is decided, within its replicate share."""

from __future__ import annotations

from django.urls import reverse

from replayhub import services
from replayhub.models import Budget, Replay, ReplayStatus, Run
from replayhub.nights import tiers
from replayhub.replicates import standing
from tests.factories import make_calc_run, make_user, share_of

# Three successes reproduce, two failures do not (a wide zone keeps the test
# to a few replays); three replicates fit the share, exactly as many as needed.
POLICY = {
    "replicate_threshold": 0.6,
    "replicate_confidence": 0.9,
    "replicate_most": 6,
    "replicate_margin": 0.3,
}


def run_queued() -> int:
    """Run every queued replay in the sandbox, as a worker would."""
    queued = list(
        Replay.objects.filter(status=ReplayStatus.QUEUED).values_list("pk", flat=True)
    )
    for replay_id in queued:
        services.replay_execute(replay_id=replay_id)
    return len(queued)


def test_a_night_samples_each_run_until_it_is_decided(
    db, client, calc_project, calc_base, calc_good
):
    calc_project.agentic_enabled = True
    calc_project.save()
    budget = Budget.objects.create(project=calc_project, **POLICY)
    budget.shares.create(
        tier=tiers.REPLICATE, max_replays=3, max_sandbox_minutes=60, max_tokens=0
    )
    fixes = make_calc_run(
        calc_project, prompt="same", original=calc_good, base=calc_base
    )
    breaks = make_calc_run(
        calc_project, prompt="bad", original=calc_good, base=calc_base
    )
    Run.objects.filter(pk__in=[fixes.pk, breaks.pk]).update(preflight="ready")

    # The night's first replays, then a round of replicates after each
    # round's verdicts, as the ticks of a night would admit them.
    report = services.night_run(project=calc_project, immediate=True)
    rounds = 0
    while run_queued() and rounds < 5:
        rounds += 1
        services.night_run(project=calc_project, immediate=True)

    policy = budget.replicate_policy()
    fixed = standing.run_replicates(fixes, policy)
    broken = standing.run_replicates(breaks, policy)
    assert fixed.standing.decision == "reproduces"
    assert (fixed.live.successes, fixed.live.failures) == (3, 0)
    assert broken.standing.decision == "does_not_reproduce"
    assert (broken.live.successes, broken.live.failures) == (0, 2)
    assert Replay.objects.filter(replicate=True).count() == 3
    share = share_of(report.night, tiers.REPLICATE)
    assert share.used_replays + share.reserved_replays <= share.limit_replays == 3
    client.force_login(make_user("rita", "reviewer"))
    data = client.get(reverse("api_run_detail", args=[fixes.pk])).json()
    assert data["replicates"]["decision"] == "reproduces"
    assert data["replicates"]["rate"].startswith("reproduced 3 of 3 samples")
