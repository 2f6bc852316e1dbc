"""A worker whose broker goes away while it runs one task and holds another
(acks late: how every replay is taken; the other due later, as a replay
tried again is) keeps running, and takes work again once the broker is
back.

Celery 5.7 stopped such a worker for good ("Unrecoverable error:
AttributeError"), which a night met whenever Redis restarted under a busy
host: ``replayhub.lib.consumer.Consumer`` is what keeps it running.
"""

from __future__ import annotations

import time
import uuid

from tests.conftest import spawn_worker, stop_worker, wait_for
from tests.servers import Redis, celery_client, need_servers

# tests/nights/sleeper.py's task, known to the worker alone: imported here, it
# would join the app's own tasks in this process.
SLEEPER = "tests.nights.sleeper"
SLEEP = "tests.nights.sleep"


def test_a_worker_holding_messages_when_redis_restarts_takes_work_after(tmp_path):
    need_servers("the broker-lost test")
    redis = Redis().start()
    log = tmp_path / "broker-lost" / "worker.log"
    log.parent.mkdir()
    worker = spawn_worker(
        log,
        include=SLEEPER,
        CELERY_BROKER_URL=redis.url,
        REPLAYHUB_VAR_DIR=str(tmp_path / "var"),
    )
    try:
        before = celery_client(redis.url)
        # One runs; the other, due later (as a replay tried again after a
        # remote was out of reach is), waits in the worker: both taken, and
        # neither acknowledged.
        before.send_task(SLEEP, args=(4,), queue="default")
        before.send_task(SLEEP, args=(0,), queue="default", countdown=60)
        wait_for(lambda: log.read_text().count(" received") >= 2, timeout=60)
        before.close()

        # Away for a moment, as a restarting Redis is: the worker finds it
        # gone while it still holds both messages.
        redis.stop()
        time.sleep(2)
        redis.start()
        after = celery_client(redis.url)
        task_id = str(uuid.uuid4())
        # Sent at once: it waits in Redis until the worker is back.
        after.send_task(SLEEP, args=(0,), queue="default", task_id=task_id)
        wait_for(
            lambda: (
                f"{SLEEP}[{task_id}] succeeded" in log.read_text()
                or worker.poll() is not None
            ),
            timeout=90,
        )
        after.close()
        said = log.read_text()
        assert "Unrecoverable error" not in said, said[-3000:]
        assert worker.poll() is None, said[-3000:]
        assert f"{SLEEP}[{task_id}] succeeded" in said
    finally:
        if worker.poll() is None:
            stop_worker(worker)
        redis.stop()
