"""The deliveries as a real worker sends them: retried through the forge's bad
moments by the task's own retries, and sent once however often asked."""

from __future__ import annotations

import time

from replayhub import signals
from replayhub.celery import Task, enqueue
from replayhub.models import Delivery, Replay, Run
from replayhub.outbound.services import forge_set
from tests.conftest import wait_for
from tests.factories import make_project, make_replay
from tests.outbound.conftest import BASE_URL, TOKEN_ENV


def test_a_worker_sets_the_status_through_two_502s_and_only_once(
    celery_worker, transactional_db, stand, outbound_settings
):
    project = make_project("shop")
    forge_set(
        project=project,
        kind="github",
        repo="acme/shop",
        token_env=TOKEN_ENV,
        api_url=stand.url,
    )
    run = Run.objects.create(project=project, external_id="r", original_commit="f" * 40)
    replay = make_replay(verdict="equivalent", project=project, run=run)
    stand.script = [502, 502]

    signals.replay_finished.send(Replay, replay_id=replay.pk)

    delivered = wait_for(
        lambda: Delivery.objects.filter(status="delivered").first(), timeout=60
    )
    assert (delivered.http_status, delivered.attempts) == (201, 3)
    assert len(stand.received) == 3
    (status,) = {r.path: r.json for r in stand.received}.items()
    assert status[0] == f"/repos/acme/shop/statuses/{'f' * 40}"
    assert status[1]["state"] == "success"
    assert status[1]["target_url"] == f"{BASE_URL}/replays/{replay.pk}/"

    # The news again, and the task's message again: nothing more goes out.
    signals.replay_finished.send(Replay, replay_id=replay.pk)
    enqueue(Task.DELIVER, delivered.pk)
    time.sleep(3)
    assert Delivery.objects.count() == 1
    assert len(stand.received) == 3
