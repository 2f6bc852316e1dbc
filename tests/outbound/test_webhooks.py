"""Webhooks: CloudEvents or Slack bodies, signed over the raw body; one
``trends.signal`` per night out of control; no URL on a private address."""

from __future__ import annotations

import hashlib
import hmac
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from replayhub import signals
from replayhub.models import Delivery, Replay, Rollup, Webhook
from replayhub.nights import scheduler
from replayhub.outbound import services
from replayhub.outbound.services import OutboundInvalid, delivery_send, webhook_add
from tests.factories import make_night, make_project, make_replay
from tests.outbound.conftest import SECRET, SECRET_ENV

pytestmark = pytest.mark.usefixtures("outbound_settings")


def signed_by_secret(request) -> bool:
    """What a receiver does: HMAC the raw body, compare in constant time."""
    expected = (
        "sha256=" + hmac.new(SECRET.encode(), request.raw, hashlib.sha256).hexdigest()
    )
    return hmac.compare_digest(
        request.headers.get("X-ReplayHub-Signature-256", ""), expected
    )


def hook(stand, events, **fields):
    return webhook_add(
        project=make_project("shop"),
        url=f"{stand.url}/hook",
        events_wanted=events,
        secret_env=fields.pop("secret_env", SECRET_ENV),
        **fields,
    )


def send_all():
    for delivery in Delivery.objects.filter(status="pending").order_by("id"):
        assert delivery_send(delivery_id=delivery.pk) is None


def test_a_finished_replay_is_a_signed_cloudevent(db, stand):
    hook(stand, ["replay.finished"])
    replay = make_replay(verdict="divergent", project=make_project("shop"))
    signals.replay_finished.send(Replay, replay_id=replay.pk)
    send_all()

    (request,) = stand.received
    assert request.path == "/hook"
    assert request.headers["Content-Type"] == "application/cloudevents+json"
    assert signed_by_secret(request)
    event = request.json
    assert event["specversion"] == "1.0"
    assert event["type"] == "dev.replayhub.replay.finished"
    assert event["datacontenttype"] == "application/json"
    assert {"id", "source", "time"} <= set(event)
    assert event["data"]["verdict"] == "divergent"
    assert event["data"]["replay"] == replay.pk
    delivery = Delivery.objects.get()
    assert event["id"] == delivery.key
    # The row keeps the body, never the key it is signed with.
    assert SECRET not in str(Delivery.objects.values().get())


def test_one_byte_changed_fails_the_signature(db, stand):
    hook(stand, ["replay.finished"])
    replay = make_replay(verdict="identical", project=make_project("shop"))
    signals.replay_finished.send(Replay, replay_id=replay.pk)
    send_all()
    (request,) = stand.received
    request.raw = request.raw.replace(b"identical", b"idenTical")
    assert not signed_by_secret(request)


def test_a_slack_webhook_gets_text_and_only_its_events(db, stand):
    hook(stand, ["review.decided"], format="slack", secret_env="")
    replay = make_replay(verdict="divergent", project=make_project("shop"))
    signals.replay_finished.send(Replay, replay_id=replay.pk)
    assert not Delivery.objects.exists()
    signals.review_decided.send(
        None, replay_id=replay.pk, review_id=7, decision="confirm", verdict="divergent"
    )
    signals.review_decided.send(
        None, replay_id=replay.pk, review_id=7, decision="confirm", verdict="divergent"
    )
    send_all()
    (request,) = stand.received
    assert set(request.json) == {"text"}
    assert f"replay {replay.pk} confirm, verdict divergent" in request.json["text"]
    assert "X-ReplayHub-Signature-256" not in request.headers


def close_a_bad_night(project, day):
    """Four quiet weeks of rollups, then a night that closes with most of its
    replays inconclusive."""
    for back in range(2, 26):
        Rollup.objects.create(
            project=project,
            date=day - timedelta(days=back),
            attempted=20,
            identical=19,
            inconclusive=1,
            by_reason={"flaky_tests": 1},
        )
    start = timezone.now() - timedelta(hours=9)
    night = make_night(project, start=start, hours=8)
    for verdict in ["inconclusive"] * 8 + ["identical"] * 2:
        replay = make_replay(verdict=verdict, project=project)
        Replay.objects.filter(pk=replay.pk).update(
            night=night, finished_at=start + timedelta(hours=1)
        )
    return night


def test_a_night_out_of_control_sends_exactly_one_signed_trends_signal(db, stand):
    hook(stand, ["trends.signal"])
    project = make_project("shop")
    night = close_a_bad_night(project, (timezone.now() - timedelta(hours=9)).date())

    closed = scheduler.night_close_ended(now=timezone.now())
    assert [n.pk for n in closed] == [night.pk]
    # Closed again, or announced again: still one signal for the night.
    scheduler.night_close_ended(now=timezone.now())
    signals.night_closed.send(type(night), night=night)
    send_all()

    (request,) = stand.received
    assert signed_by_secret(request)
    event = request.json
    assert event["type"] == "dev.replayhub.trends.signal"
    assert event["data"]["night"] == night.date.isoformat()
    assert event["data"]["inconclusive_rate"] == 0.8
    assert event["data"]["out_of_control"] == "above"


def test_a_night_in_control_sends_no_signal_but_its_close(db, stand):
    hook(stand, ["trends.signal", "night.closed"])
    project = make_project("shop")
    start = timezone.now() - timedelta(hours=9)
    make_night(project, start=start, hours=8)
    scheduler.night_close_ended(now=timezone.now())
    send_all()
    assert [r.json["type"] for r in stand.received] == ["dev.replayhub.night.closed"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "http://localhost/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://10.0.0.5/hook",
    ],
)
def test_a_webhook_url_on_a_private_address_is_refused(db, settings, url):
    settings.REPLAYHUB_OUTBOUND_ALLOW_PRIVATE = []
    with pytest.raises(OutboundInvalid, match="not a public address"):
        webhook_add(
            project=make_project("shop"),
            url=url,
            events_wanted=["replay.finished"],
            secret_env=SECRET_ENV,
        )


def test_an_address_allowed_when_saved_is_checked_again_when_sent(db, stand, settings):
    hook(stand, ["replay.finished"])
    settings.REPLAYHUB_OUTBOUND_ALLOW_PRIVATE = []
    replay = make_replay(verdict="divergent", project=make_project("shop"))
    signals.replay_finished.send(Replay, replay_id=replay.pk)
    send_all()
    assert stand.received == []
    delivery = Delivery.objects.get()
    assert delivery.status == "failed"
    assert "not a public address" in delivery.answer


@pytest.mark.parametrize(
    ("fields", "refusal"),
    [
        ({"events_wanted": ["replay.exploded"]}, "unknown event"),
        ({"events_wanted": []}, "at least one event"),
        ({"secret_env": ""}, "is signed"),
        ({"secret_env": "SECRET_KEY"}, "never sent"),
        ({"secret_env": "HOME"}, "not a variable this deployment allows"),
        ({"format": "xml"}, "one of"),
    ],
)
def test_a_webhook_is_refused_in_one_sentence(db, stand, fields, refusal):
    values = {
        "project": make_project("shop"),
        "url": f"{stand.url}/hook",
        "events_wanted": ["replay.finished"],
        "secret_env": SECRET_ENV,
        **fields,
    }
    with pytest.raises(OutboundInvalid, match=refusal):
        webhook_add(**values)


def test_a_bad_night_signals_only_to_the_webhooks_that_take_the_signal(db, stand):
    hook(stand, ["night.closed"])
    project = make_project("shop")
    close_a_bad_night(project, (timezone.now() - timedelta(hours=9)).date())
    scheduler.night_close_ended(now=timezone.now())
    send_all()
    assert [r.json["type"] for r in stand.received] == ["dev.replayhub.night.closed"]


def test_a_failed_delivery_logs_its_reason_without_the_urls_secret(
    db, stand, settings, caplog
):
    webhook_add(
        project=make_project("shop"),
        url=f"{stand.url}/services/the-path-is-the-secret?key=k",
        events_wanted=["replay.finished"],
        secret_env=SECRET_ENV,
    )
    settings.REPLAYHUB_OUTBOUND_ALLOW_PRIVATE = []
    replay = make_replay(verdict="divergent", project=make_project("shop"))
    signals.replay_finished.send(Replay, replay_id=replay.pk)

    with caplog.at_level(logging.INFO, logger="replayhub.outbound.services"):
        send_all()

    delivery = Delivery.objects.get()
    assert delivery.status == "failed"
    (line,) = [r.getMessage() for r in caplog.records if "delivery " in r.getMessage()]
    # The line the page shows, after the status: the same reason.
    assert line.startswith(f"delivery {delivery.pk} (")
    assert line.endswith(f"attempt 1: - failed: {delivery.answer}")
    assert "not a public address" in line
    assert "the-path-is-the-secret" not in caplog.text
    assert "key=k" not in caplog.text


def test_a_logged_reason_names_an_address_by_its_host_alone():
    url = "https://hooks.example.com/services/T0/the-secret?key=k"
    delivery = Delivery(webhook=Webhook(url=url))
    answer = f"{url!r} is not a URL:\nbad\tport; also https://other.example/p?q=1"

    said = services._loggable(answer, delivery)

    assert said == ("'…' is not a URL: bad port; also https://other.example/…")
    bare = services._loggable("echoed /services/T0/the-secret back", delivery)
    assert "the-secret" not in bare
