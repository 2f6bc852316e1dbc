"""Commit statuses on a project's forge: one per replayed commit with the right
state and link, updated when a reviewer decides, retried through a forge's bad
moments, and never sent twice."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from replayhub import services, signals
from replayhub.models import Delivery, Replay, ReplayStatus, Run
from replayhub.outbound.services import (
    delivery_cut,
    delivery_send,
    delivery_sweep,
    forge_set,
)
from replayhub.verdicts import Facts, Reason, decide
from reviews.services import review_decide, review_undo
from tests.factories import make_project, make_replay, make_user
from tests.outbound.conftest import BASE_URL, TOKEN, TOKEN_ENV

pytestmark = pytest.mark.usefixtures("outbound_settings")
API = {"github": "/api/v3", "gitlab": "/api/v4"}


def with_forge(stand, kind="github", slug="shop"):
    project = make_project(slug)
    repo = "acme/shop" if kind == "github" else "acme/tools/shop"
    forge_set(
        project=project,
        kind=kind,
        repo=repo,
        token_env=TOKEN_ENV,
        api_url=stand.url + API[kind],
    )
    return project


def replayed(project, verdict, sha):
    run = Run.objects.create(
        project=project, external_id=f"run-{sha[:6]}", original_commit=sha
    )
    return make_replay(verdict=verdict, project=project, run=run)


def finished(replay):
    signals.replay_finished.send(Replay, replay_id=replay.pk)


def later(seconds: float):
    """The time a retry's message is due, ``seconds`` from now."""
    return timezone.now() + timedelta(seconds=seconds)


def send_all():
    for delivery in Delivery.objects.filter(status="pending").order_by("id"):
        assert delivery_send(delivery_id=delivery.pk) is None


def test_each_replayed_commit_gets_one_github_status_with_its_state_and_link(db, stand):
    project = with_forge(stand)
    verdicts = {"1" * 40: "identical", "2" * 40: "divergent", "3" * 40: "inconclusive"}
    replays = {sha: replayed(project, v, sha) for sha, v in verdicts.items()}
    for replay in replays.values():
        finished(replay)
    send_all()

    assert len(stand.received) == 3
    by_path = {r.path: r for r in stand.received}
    expected = {"1" * 40: "success", "2" * 40: "failure", "3" * 40: "error"}
    for sha, state in expected.items():
        request = by_path[f"/api/v3/repos/acme/shop/statuses/{sha}"]
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        assert request.headers["Accept"] == "application/vnd.github+json"
        body = request.json
        assert body["state"] == state
        assert body["context"] == "replayhub/shop"
        assert body["target_url"] == f"{BASE_URL}/replays/{replays[sha].pk}/"
        assert len(body["description"]) <= 140
    inconclusive = by_path[f"/api/v3/repos/acme/shop/statuses/{'3' * 40}"]
    assert "flaky_tests" in inconclusive.json["description"]
    assert set(Delivery.objects.values_list("status", "http_status")) == {
        ("delivered", 201)
    }


def test_gitlab_gets_its_own_states_on_the_project_path(db, stand):
    project = with_forge(stand, "gitlab")
    finished(replayed(project, "divergent", "4" * 40))
    send_all()

    (request,) = stand.received
    assert request.path == f"/api/v4/projects/acme%2Ftools%2Fshop/statuses/{'4' * 40}"
    assert request.headers["PRIVATE-TOKEN"] == TOKEN
    assert request.json["state"] == "failed"
    assert request.json["name"] == "replayhub/shop"


def test_a_reviewer_overturning_the_verdict_updates_the_status(db, stand):
    project = with_forge(stand)
    replay = replayed(project, "identical", "5" * 40)
    finished(replay)
    send_all()
    review = review_decide(
        replay=replay,
        reviewer=make_user("rita", "reviewer"),
        decision="overturn",
        verdict_after="divergent",
    )
    # review_decide sends review_decided after commit; a test's transaction
    # never commits, so the signal is sent here as the commit would.
    signals.review_decided.send(
        None,
        replay_id=replay.pk,
        review_id=review.pk,
        decision="overturn",
        verdict="divergent",
    )
    send_all()

    first, second = (r.json for r in stand.received)
    assert first["state"] == "success"
    assert second["state"] == "failure"
    assert "overturned identical" in second["description"]
    assert second["target_url"] == first["target_url"]


def test_the_decision_is_announced_once_it_is_committed(
    db, stand, django_capture_on_commit_callbacks
):
    project = with_forge(stand)
    replay = replayed(project, "divergent", "6" * 40)
    with django_capture_on_commit_callbacks(execute=True):
        review_decide(
            replay=replay, reviewer=make_user("rita", "reviewer"), decision="confirm"
        )
    (delivery,) = Delivery.objects.all()
    assert delivery.body["state"] == "failure"
    assert "confirmed by a reviewer" in delivery.body["description"]


def test_a_replay_ending_announces_itself_after_commit(
    db, stand, django_capture_on_commit_callbacks
):
    project = with_forge(stand)
    run = Run.objects.create(project=project, external_id="r", original_commit="7" * 40)
    replay = Replay.objects.create(run=run, project=project)
    assert Replay.objects.claim(replay.pk, owner="w1")
    ruling = decide(Facts(harness_failure=Reason.HARNESS_ERROR, harness_detail="x"))
    with django_capture_on_commit_callbacks(execute=True):
        assert services.replay_finish(replay=replay, outcome=ruling, owner="w1")
        assert not Delivery.objects.exists()  # not before the commit
    (delivery,) = Delivery.objects.all()
    assert Replay.objects.get(pk=replay.pk).status == ReplayStatus.FINISHED
    assert (delivery.commit, delivery.body["state"]) == ("7" * 40, "error")


def test_the_forge_answering_502_twice_is_tried_again_until_it_takes_it(db, stand):
    project = with_forge(stand)
    stand.script = [502, 502]
    finished(replayed(project, "equivalent", "8" * 40))
    (delivery,) = Delivery.objects.all()

    # The task retries after the wait each attempt returns, doubling.
    assert delivery_send(delivery_id=delivery.pk) == 1.0
    assert delivery_send(delivery_id=delivery.pk, now=later(1)) == 2.0
    assert delivery_send(delivery_id=delivery.pk, now=later(3)) is None

    delivery.refresh_from_db()
    assert (delivery.status, delivery.http_status, delivery.attempts) == (
        "delivered",
        201,
        3,
    )
    assert [r.json["state"] for r in stand.received] == ["success"] * 3


def test_attempts_are_bounded_and_a_4xx_is_not_retried(db, stand, settings):
    settings.REPLAYHUB_OUTBOUND_ATTEMPTS = 2
    project = with_forge(stand)
    stand.script = [503, 503, 422]
    finished(replayed(project, "equivalent", "9" * 40))
    finished(replayed(project, "divergent", "b" * 40))
    first, second = Delivery.objects.order_by("id")

    assert delivery_send(delivery_id=first.pk) == 1.0
    assert delivery_send(delivery_id=first.pk, now=later(1)) is None
    first.refresh_from_db()
    assert (first.status, first.attempts) == ("failed", 2)
    assert "gave up after 2 attempts" in first.answer
    assert delivery_send(delivery_id=second.pk) is None
    second.refresh_from_db()
    assert (second.status, second.http_status) == ("failed", 422)


def test_nothing_is_sent_twice(db, stand):
    project = with_forge(stand)
    replay = replayed(project, "divergent", "c" * 40)
    finished(replay)
    finished(replay)  # the signal sent again
    (delivery,) = Delivery.objects.all()
    assert delivery_send(delivery_id=delivery.pk) is None
    assert delivery_send(delivery_id=delivery.pk) is None  # the task run again
    assert len(stand.received) == 1


def test_an_unreachable_forge_is_a_network_error_and_tried_again(db, stand):
    project = with_forge(stand)
    Delivery.objects.all().delete()
    finished(replayed(project, "identical", "d" * 40))
    project.forge.api_url = "http://127.0.0.1:9/api/v3"  # the discard port: closed
    project.forge.save()
    (delivery,) = Delivery.objects.all()
    assert delivery_send(delivery_id=delivery.pk) == 1.0
    delivery.refresh_from_db()
    assert delivery.status == "pending"
    assert delivery.http_status is None
    assert "Error" in delivery.answer


def test_no_status_without_an_original_commit_or_a_forge(db, stand):
    finished(make_replay(verdict="divergent", project=make_project("plain")))
    project = with_forge(stand)
    finished(replayed(project, "divergent", ""))
    assert not Delivery.objects.exists()


def test_a_missing_token_fails_the_delivery_without_sending(db, stand, monkeypatch):
    project = with_forge(stand)
    monkeypatch.delenv(TOKEN_ENV)
    finished(replayed(project, "divergent", "e" * 40))
    (delivery,) = Delivery.objects.all()
    assert delivery_send(delivery_id=delivery.pk) is None
    delivery.refresh_from_db()
    assert delivery.status == "failed"
    assert delivery.answer == f"{TOKEN_ENV} is not set on this worker."
    assert stand.received == []
    assert TOKEN not in str(Delivery.objects.values().get())


def test_a_decision_taken_back_sets_the_status_back(
    db, stand, django_capture_on_commit_callbacks
):
    project = with_forge(stand)
    replay = replayed(project, "identical", "1" * 40)
    rita = make_user("rita", "reviewer")
    with django_capture_on_commit_callbacks(execute=True):
        review = review_decide(
            replay=replay,
            reviewer=rita,
            decision="overturn",
            verdict_after="divergent",
        )
    with django_capture_on_commit_callbacks(execute=True):
        review_undo(review=review, reviewer=rita)
    send_all()
    overturned, undone = (r.json for r in stand.received)
    assert overturned["state"] == "failure"
    assert undone["state"] == "success"
    assert "taken back" in undone["description"]


def test_the_sweep_sends_again_what_no_worker_holds(db, stand):
    project = with_forge(stand)
    finished(replayed(project, "identical", "2" * 40))
    finished(replayed(project, "divergent", "3" * 40))
    lost, retrying = Delivery.objects.order_by("id")
    stand.script = [503]
    assert delivery_send(delivery_id=retrying.pk) == 1.0

    assert delivery_sweep() == []  # both are young
    soon = later(16 * 60)
    assert delivery_sweep(now=soon) == [lost.pk, retrying.pk]
    Delivery.objects.filter(pk=lost.pk).update(status="delivered")
    assert delivery_sweep(now=soon) == [retrying.pk]


def test_an_attempt_cut_by_the_time_limit_is_tried_again(db, stand):
    project = with_forge(stand)
    finished(replayed(project, "identical", "4" * 40))
    (delivery,) = Delivery.objects.all()
    assert Delivery.objects.claim(delivery.pk, now=later(0), until=later(90))
    assert delivery_cut(delivery_id=delivery.pk, seconds=30) == 1.0
    delivery.refresh_from_db()
    assert (delivery.status, delivery.answer) == (
        "pending",
        "no whole answer within 30 s",
    )
