"""The tape on the pages: a run's recorded tape and a replay's own as the
conversation they were, escaped; the divergence's diff; the button beside
Rerun that queues a tape replay."""

from __future__ import annotations

import pytest
from django.urls import reverse

from replayhub.gateway import tape
from replayhub.models import Replay, Tape
from reviews.models import AuditEvent
from tests.factories import make_replay

pytestmark = pytest.mark.django_db

PAYLOAD = "<script>window.__pwned=1</script>"

RECORDED = [
    {
        "provider_kind": "anthropic",
        "method": "POST",
        "path": "/v1/messages",
        "request": {
            "model": "claude-x",
            "system": "be careful",
            "messages": [{"role": "user", "content": f"fix it {PAYLOAD}"}],
        },
        "status": 200,
        "stream": False,
        "response": {
            "content": [
                {"type": "text", "text": f"running {PAYLOAD}"},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "bash",
                    "input": {"cmd": PAYLOAD},
                },
            ]
        },
        "usage": {"input_tokens": 12, "output_tokens": 5},
        "model": "claude-x",
    }
]


@pytest.fixture
def replay():
    replay = make_replay(verdict="inconclusive", reason_code="tape_diverged")
    replay.run.raw = {"tape": RECORDED}
    replay.run.save(update_fields=["raw"])
    exchanges = tape.from_record_tape(RECORDED)
    row = Tape.of(exchanges, truncated=False)
    row.replay = replay
    row.save()
    replay.evidence = {
        **replay.evidence,
        "tape": {
            "source": "the run's record",
            "divergence": {
                "call": 2,
                "why": "differs",
                "detail": "call 2's request differs from the tape's",
                "diff": f"--- recorded call 2\n+++ replay call 2\n-{PAYLOAD}\n",
            },
        },
    }
    replay.save(update_fields=["evidence"])
    return replay


def test_a_replays_tape_shows_as_an_escaped_conversation_with_its_diff(
    client, reviewer, replay
):
    client.force_login(reviewer)
    html = client.get(
        reverse("reviews:replay_detail", args=[replay.pk])
    ).content.decode()

    assert PAYLOAD not in html
    assert "fix it &lt;script&gt;" in html
    assert "<summary>tool_use bash</summary>" in html
    assert "Left the tape at call 2" in html
    assert "-&lt;script&gt;" in html
    assert "Replay from tape" in html


def test_a_runs_page_shows_its_recorded_tape(client, reviewer, replay):
    client.force_login(reviewer)
    html = client.get(
        reverse("reviews:run_detail", args=[replay.run_id])
    ).content.decode()

    assert PAYLOAD not in html
    assert "Model conversation" in html and "running &lt;script&gt;" in html


def test_the_tape_button_queues_a_tape_replay_on_the_trail(client, reviewer, replay):
    client.force_login(reviewer)
    response = client.post(reverse("reviews:replay_tape", args=[replay.pk]))

    queued = Replay.objects.exclude(pk=replay.pk).get(run=replay.run)
    assert queued.tier == "tape" and queued.status == "queued"
    assert response.status_code == 302
    assert AuditEvent.objects.filter(
        object_id=str(replay.pk), action="tape_replay"
    ).exists()


def test_the_tape_button_is_a_post_for_deciders_only(client, lead, replay):
    client.force_login(lead)
    assert (
        client.get(reverse("reviews:replay_tape", args=[replay.pk])).status_code == 405
    )
    assert (
        client.post(reverse("reviews:replay_tape", args=[replay.pk])).status_code == 403
    )
