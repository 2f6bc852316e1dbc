"""The tape on the pages: a run's recorded tape and a replay's own as the
conversation they were, escaped; the divergence's diff; the button beside
Rerun that queues a tape replay."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from replayhub.gateway import tape
from replayhub.models import Replay, Tape
from reviews.models import AuditEvent
from tests.factories import make_replay
from tests.gateway.responses_model import stream_of

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
    # Who asked is the tape button, not a reviewer's rerun.
    assert queued.trigger == "tape"
    assert response.status_code == 302
    assert AuditEvent.objects.filter(
        object_id=str(replay.pk), action="tape_replay"
    ).exists()
    trail = client.get(reverse("reviews:replay_detail", args=[replay.pk]))
    assert (
        f"asked for a replay of this run from its tape (replay #{queued.pk})"
        in " ".join(trail.content.decode().split())
    )


def test_the_tape_button_is_a_post_for_deciders_only(client, lead, replay):
    client.force_login(lead)
    assert (
        client.get(reverse("reviews:replay_tape", args=[replay.pk])).status_code == 405
    )
    assert (
        client.post(reverse("reviews:replay_tape", args=[replay.pk])).status_code == 403
    )


# -- the Responses API (Codex) and what a tape replay set aside ---------------

CODEX_ANSWER = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "gpt-5.5",
    "output": [
        {
            "type": "custom_tool_call",
            "id": "ctc_1",
            "call_id": "call_2",
            "name": "apply_patch",
            "input": f"*** Begin Patch\n+{PAYLOAD}\n*** End Patch\n",
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": f"done {PAYLOAD}"}],
        },
    ],
    "usage": {"input_tokens": 10, "output_tokens": 4},
}
CODEX_TAPE = [
    {
        "provider_kind": "openai",
        "path": "/v1/responses",
        "stream": True,
        "status": 200,
        "request": {
            "model": "gpt-5.5",
            "stream": True,
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": f"make {PAYLOAD}"}],
                },
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "exec_command",
                    "arguments": '{"cmd": "ls"}',
                },
                {
                    "type": "function_call_output",
                    "call_id": "call_1",
                    "output": f"calc.py {PAYLOAD}",
                },
            ],
        },
        "response": tape.split_events(stream_of(CODEX_ANSWER)),
    }
]


def test_a_codex_runs_page_draws_its_input_items_and_output_items(client, reviewer):
    replay = make_replay()
    replay.run.raw = {"tape": CODEX_TAPE}
    replay.run.save(update_fields=["raw"])
    client.force_login(reviewer)

    html = client.get(
        reverse("reviews:run_detail", args=[replay.run_id])
    ).content.decode()

    assert PAYLOAD not in html
    assert "make &lt;script&gt;" in html  # the user's input_text
    assert "<summary>function call exec_command</summary>" in html
    assert "<summary>tool output call_1</summary>" in html
    assert "calc.py &lt;script&gt;" in html
    assert "<summary>custom tool call apply_patch</summary>" in html
    assert "+&lt;script&gt;" in html  # the patch the model sent
    assert "done &lt;script&gt;" in html  # its closing message


def test_the_replay_page_names_the_tape_played_the_rules_and_where_it_went_live(
    client, reviewer, replay
):
    replay.evidence = {
        **replay.evidence,
        "tape": {
            "source": "replay 12",
            "chosen": "replay 12 was played: call 1 differs from the run's "
            "record's and matches this one's",
            "rules_applied": [
                "Codex: <current_date>",
                f"path: the working directory /home/{PAYLOAD} read as /workspace",
            ],
            "live_from": 1,
            "divergence": None,
        },
    }
    replay.save(update_fields=["evidence"])
    client.force_login(reviewer)

    html = client.get(
        reverse("reviews:replay_detail", args=[replay.pk])
    ).content.decode()

    assert PAYLOAD not in html
    assert "played from replay 12" in html
    assert "call 1 differs from the run&#x27;s record&#x27;s" in html
    assert "2 declared rules" in html
    assert "<li>Codex: &lt;current_date&gt;</li>" in html
    assert "/home/&lt;script&gt;" in html
    assert "Live, not from the tape:" in html


GEMINI_TAPE = [
    {
        "provider_kind": "gemini",
        "path": "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
        "stream": True,
        "status": 200,
        "request": {
            "systemInstruction": {"parts": [{"text": "be a careful agent"}]},
            "contents": [
                {"role": "user", "parts": [{"text": f"make {PAYLOAD}"}]},
            ],
        },
        "response": [
            "data: "
            + json.dumps(
                {
                    "candidates": [
                        {
                            "content": {
                                "role": "model",
                                "parts": [
                                    {
                                        "functionCall": {
                                            "name": "write_file",
                                            "args": {"content": PAYLOAD},
                                        }
                                    }
                                ],
                            },
                            "finishReason": "STOP",
                        }
                    ]
                }
            )
        ],
    }
]


def test_a_gemini_runs_page_draws_its_contents_and_function_calls(client, reviewer):
    replay = make_replay()
    replay.run.raw = {"tape": GEMINI_TAPE}
    replay.run.save(update_fields=["raw"])
    client.force_login(reviewer)

    html = client.get(
        reverse("reviews:run_detail", args=[replay.run_id])
    ).content.decode()

    assert PAYLOAD not in html
    assert "be a careful agent" in html
    assert "make &lt;script&gt;" in html
    assert "<summary>function call write_file</summary>" in html
