"""A night, end to end: the worker replays each run in the sandbox, and the
forge stand-in gets one commit status per replayed commit, with the verdict's
state and the replay page's link, through its bad moments, and again when a
reviewer overturns a verdict."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.models import Delivery, Replay
from replayhub.nights import scheduler
from replayhub.outbound.services import forge_set
from reviews.services import review_decide
from tests.conftest import wait_for
from tests.factories import make_budget, make_calc_project, make_calc_run
from tests.outbound.conftest import TOKEN_ENV
from tests.scripted import TESTS, make_project_repo

pytestmark = pytest.mark.django_db(transaction=True)

# prompt (what the scripted agent writes) -> the original it is compared with,
# and the state the forge is told.
RUNS = {
    "same": (GOOD, "success"),
    "other": (GOOD, "success"),
    "bad": (GOOD, "failure"),
}


def test_a_night_sets_one_status_per_replayed_commit_and_a_reviewer_updates_it(
    celery_worker, tmp_path, stand, outbound_settings, reviewer
):
    repo = make_project_repo(tmp_path)
    base = repo.rev("main")
    project = make_calc_project(repo, agentic_enabled=True)
    forge_set(
        project=project,
        kind="github",
        repo="acme/calc",
        token_env=TOKEN_ENV,
        api_url=stand.url,
    )
    commits = {}
    for prompt, (content, _) in RUNS.items():
        repo.checkout("main")
        commits[prompt] = repo.commit(
            {"calc.py": content, "test_calc.py": TESTS},
            f"agent: {prompt}",
            branch=f"agent/{prompt}",
        )
        repo.checkout("main")
        make_calc_run(
            project,
            prompt=prompt,
            original=commits[prompt],
            base=base,
            preflight="ready",
        )
    # The forge's first two answers are bad gateways.
    stand.script = [502, 502]
    now = timezone.now()
    make_budget(
        project,
        window_start_hour=0,
        window_end_hour=0,
        timezone="UTC",
        shares={"agentic": {"max_replays": 5}},
    )
    scheduler.night_open(project=project, now=now)
    report = services.night_run(project=project, now=now)
    assert len(report.admitted) == 3

    wait_for(
        lambda: Delivery.objects.filter(status="delivered").count() == 3,
        timeout=240,
        interval=1.0,
    )
    replays = {r.run.prompt: r for r in Replay.objects.select_related("run")}
    assert {p: r.verdict for p, r in replays.items()} == {
        "same": "identical",
        "other": "equivalent",
        "bad": "divergent",
    }
    last = {}
    for request in stand.received:
        last[request.path] = request.json
    assert len(set(commits.values())) == 3
    assert set(last) == {f"/repos/acme/calc/statuses/{c}" for c in commits.values()}
    for prompt, (_, state) in RUNS.items():
        status = last[f"/repos/acme/calc/statuses/{commits[prompt]}"]
        assert status["state"] == state, (prompt, status)
        assert status["context"] == "replayhub/calc"
        assert status["target_url"].endswith(f"/replays/{replays[prompt].pk}/")
    # Three statuses and the two bad gateways: nothing went out twice.
    assert len(stand.received) == 5

    # The reviewer finds the divergent replay's change acceptable after all.
    review_decide(
        replay=replays["bad"],
        reviewer=reviewer,
        decision="overturn",
        verdict_after="equivalent",
    )
    wait_for(
        lambda: Delivery.objects.filter(status="delivered").count() == 4,
        timeout=60,
    )
    overturned = stand.received[-1]
    assert overturned.path == f"/repos/acme/calc/statuses/{commits['bad']}"
    assert overturned.json["state"] == "success"
    time.sleep(2)
    assert len(stand.received) == 6
