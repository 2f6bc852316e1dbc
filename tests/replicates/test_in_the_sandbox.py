"""Replicates end to end in the real sandbox.

A night samples the scripted calculator's runs, whose agent is right with a
set probability (``sometimes P``, seeded per replay by its task and
``REPLAYHUB_SAMPLE``), until each is decided, within its replicate share;
and a run whose tests read the clock gets tape replicates that disagree.
"""

from __future__ import annotations

import time

from django.urls import reverse

from replayhub import services
from replayhub.demo.model_api import StandInProvider
from replayhub.models import Budget, Provider, Replay, ReplayStatus, Run
from replayhub.nights import tiers
from replayhub.replicates import standing
from tests.factories import make_calc_run, make_user, share_of

# A zone of 0.5 to 0.9 around p0 = 0.7, at 90 %, at most six samples.
POLICY = {
    "replicate_threshold": 0.7,
    "replicate_confidence": 0.9,
    "replicate_most": 6,
    "replicate_margin": 0.2,
}
# (task, true rate, decision, samples): the seeded draws make these paths
# ++++, -- and ++-++ (inside the zone: a sixth sample could not settle it
# either way, so it is never spent).
RUNS = [
    ("fixes", 0.95, "reproduces", (4, 0)),
    ("breaks", 0.05, "does_not_reproduce", (0, 2)),
    ("maybe", 0.75, "undecided", (4, 1)),
]
SHARE = 9


def run_queued() -> int:
    """Run every queued replay in the sandbox, as a worker would."""
    queued = list(
        Replay.objects.filter(status=ReplayStatus.QUEUED).values_list("pk", flat=True)
    )
    for replay_id in queued:
        services.replay_execute(replay_id=replay_id)
    return len(queued)


def night_until_quiet(project, rounds: int = 8):
    """The night's first replays, then a round of replicates after each
    round's verdicts, as the ticks of a night would admit them."""
    report = services.night_run(project=project, immediate=True)
    while run_queued() and rounds:
        rounds -= 1
        services.night_run(project=project, immediate=True)
    return report


def test_a_night_samples_each_run_until_its_true_rate_decides(
    db, client, calc_project, calc_base, calc_good
):
    calc_project.agentic_enabled = True
    calc_project.save()
    budget = Budget.objects.create(project=calc_project, **POLICY)
    budget.shares.create(
        tier=tiers.REPLICATE, max_replays=SHARE, max_sandbox_minutes=60, max_tokens=0
    )
    runs = {
        task: make_calc_run(
            calc_project,
            prompt=f"sometimes {rate}",
            external_id=task,
            original=calc_good,
            base=calc_base,
        )
        for task, rate, *_ in RUNS
    }
    Run.objects.filter(project=calc_project).update(preflight="ready")

    report = night_until_quiet(calc_project)

    client.force_login(make_user("rita", "reviewer"))
    policy = budget.replicate_policy()
    for task, _, decision, counts in RUNS:
        found = standing.run_replicates(runs[task], policy)
        assert found.standing is not None
        assert found.standing.decision == decision, task
        assert (found.live.successes, found.live.failures) == counts, task
        data = client.get(reverse("api_run_detail", args=[runs[task].pk])).json()
        assert data["replicates"]["decision"] == decision
        low, high = data["replicates"]["interval"]
        assert 0 <= low < high <= 1
        page = client.get(reverse("reviews:run_detail", args=[runs[task].pk]))
        rate = data["replicates"]["rate"]
        assert rate[0].upper() + rate[1:] in page.content.decode()
    assert data["replicates"]["rate"].startswith("reproduced 4 of 5 samples, 90 %")
    # Between five and ten replicates, on the share and within it.
    replicates = Replay.objects.filter(replicate=True)
    assert replicates.count() == sum(s + f - 1 for *_, (s, f) in RUNS) == 8
    share = share_of(report.night, tiers.REPLICATE)
    share.refresh_from_db()
    assert share.used_replays + share.reserved_replays == 8 < share.limit_replays
    services.night_run(project=calc_project, immediate=True)
    assert not Replay.objects.filter(status=ReplayStatus.QUEUED).exists()


# Right until a moment the test chooses, and wrong after it: what a test of
# an expiring date or certificate does, whatever the agent's change.
CLOCK_ANSWER = """```python
import time


def add(a, b):
    return a + b if time.time() < {deadline} else a - b
```"""
# Long enough for the live replay and the first tape replicate.
WINDOW_SECONDS = 15
KEY_ENV = "REPLAYHUB_TEST_REPLICATE_KEY"


def test_tape_replicates_of_a_run_whose_tests_read_the_clock_disagree(
    db, client, calc_project, calc_base, calc_good, monkeypatch
):
    calc_project.agentic_enabled = True
    calc_project.save()
    budget = Budget.objects.create(project=calc_project, **POLICY)
    budget.shares.create(
        tier=tiers.REPLICATE, max_replays=2, max_sandbox_minutes=60, max_tokens=0
    )
    monkeypatch.setenv(KEY_ENV, "sk-replicate-test")
    run = make_calc_run(
        calc_project,
        prompt="model\n\nImplement add() in calc.py.",
        external_id="clock",
        original=calc_good,
        base=calc_base,
        model="coder-large",
        preflight="ready",
    )
    with StandInProvider(key="sk-replicate-test") as provider:
        calc_project.providers.add(
            Provider.objects.create(
                name="stand-in",
                kind="anthropic",
                base_url=provider.base_url,
                key_env=KEY_ENV,
            )
        )
        deadline = time.time() + WINDOW_SECONDS
        provider.replies = [CLOCK_ANSWER.format(deadline=deadline)]
        # The live replay records the tape; a tape replicate follows it.
        services.night_run(project=calc_project, immediate=True)
        run_queued()
        services.night_run(project=calc_project, immediate=True)
        run_queued()
        assert time.time() < deadline, "the first two replays outlasted the window"
        time.sleep(deadline - time.time() + 0.5)
        services.night_run(project=calc_project, immediate=True)
        run_queued()
        assert provider.calls == 1  # the tape answered every later call

    replays = Replay.objects.filter(run=run).order_by("pk")
    assert [(r.tier, r.replicate, r.verdict) for r in replays] == [
        ("agentic", False, "equivalent"),
        ("tape", True, "equivalent"),
        ("tape", True, "divergent"),
    ]
    found = standing.run_replicates(run, budget.replicate_policy())
    assert found.environment_problem
    client.force_login(make_user("rita", "reviewer"))
    data = client.get(reverse("api_run_detail", args=[run.pk])).json()
    assert data["replicates"]["environment_problem"] is True
    assert data["replicates"]["tape"] == {
        "identical": 0,
        "samples": 2,
        "inconclusive": 0,
    }
    page = client.get(reverse("reviews:run_detail", args=[run.pk])).content.decode()
    assert "Environment problem: its tape replays disagree" in page
