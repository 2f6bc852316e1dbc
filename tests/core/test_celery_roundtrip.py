"""A task enqueued from the web process reaches a real worker process."""

from __future__ import annotations

import pytest

from replayhub import services
from replayhub.models import WorkerCheck
from tests.conftest import wait_for


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_answers_a_task_enqueued_on_commit(celery_worker, admin_user):
    check = services.worker_check_request(user=admin_user)

    answered = wait_for(
        lambda: WorkerCheck.objects.filter(
            pk=check.pk, answered_at__isnull=False
        ).first(),
        timeout=60,
    )
    assert answered.worker
    assert answered.latency_seconds >= 0


@pytest.mark.django_db(transaction=True)
def test_the_status_page_shows_the_worker_answer(celery_worker, admin_user, client):
    client.force_login(admin_user)
    response = client.post("/status/worker-checks/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    check = WorkerCheck.objects.get()
    wait_for(lambda: WorkerCheck.objects.filter(pk=check.pk, answered_at__isnull=False))
    poll = client.get(
        f"/status/worker-checks/{check.pk}/", headers={"HX-Request": "true"}
    )
    assert poll.status_code == 286  # htmx stops polling
    assert b"answered" in poll.content
    # Which backend caps the sandbox's memory and processes on that worker.
    assert b"sandbox: " in poll.content
    assert b"memory and processes capped by" in poll.content
    # The runner's isolation, and whether each other runner passes its
    # self-check on that worker.
    assert b"bwrap (bwrap)" in poll.content
    assert b"docker " in poll.content and b"gvisor " in poll.content
