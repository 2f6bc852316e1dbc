"""The Responses API (Codex's wire) on tapes: a streamed answer taped as the
response object, served back as ``response.*`` events or JSON, read by the
official SDK; and real Codex 0.171.0 requests from two runs (another folder,
HOME, branch and time zone) answered from one run's tape with nothing going
up, under the declared rules only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from replayhub.agents.rules import RULES
from replayhub.gateway import Caps, Upstream, tape, tape_rules
from replayhub.gateway.playback import TapePlayer, TapeRecorder
from tests.gateway.client import PLACEHOLDER, UnixHTTPConnection
from tests.gateway.responses_model import KEY, ResponsesModel, stream_of

CODEX = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "codex"
SCRIPT = json.loads((CODEX / "script.json").read_text())["answers"]
RUNS = "/work/notes/agents-cache/runs"
# Where the two recorded runs ran (the capture's own paths).
SEEN = {
    run: {"cwd": f"{RUNS}/codex-{run}/work-{run}", "home": f"{RUNS}/codex-{run}/home"}
    for run in "CD"
}


def codex_requests(run: str) -> list[bytes]:
    """The request bodies real Codex sent in run ``run``, as it sent them."""
    files = sorted((CODEX / f"cap-{run}").glob("*-POST-v1_responses.json"))
    return [json.dumps(json.loads(f.read_text())["body"]).encode() for f in files]


@pytest.fixture
def model():
    with ResponsesModel(SCRIPT) as fake:
        yield fake


def gateway_to(make_gateway, model, **kwargs):
    upstreams = [Upstream("gpt", "openai", model.base_url + "/v1", KEY, {})]
    return make_gateway(upstreams=upstreams, **kwargs)


def post(gateway, body: bytes) -> tuple[int, str, bytes]:
    conn = UnixHTTPConnection(gateway.socket_path)
    conn.request(
        "POST",
        "/gpt/v1/responses",
        body=body,
        headers={
            "Authorization": f"Bearer {PLACEHOLDER}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        },
    )
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, response.getheader("Content-Type") or "", data


def events_of(data: bytes) -> list[dict]:
    return [
        json.loads(line[6:])
        for line in data.decode().splitlines()
        if line.startswith("data: ")
    ]


def record_codex_run(make_gateway, model, run: str = "C"):
    recorder = TapeRecorder()
    live = gateway_to(make_gateway, model, recorder=recorder)
    for body in codex_requests(run):
        assert post(live, body)[0] == 200
    live.close()  # a streamed call is recorded once its stream is through
    return recorder.exchanges()[0]


def test_a_streamed_codex_answer_is_taped_as_the_response_it_streamed(
    make_gateway, model
):
    recorded = record_codex_run(make_gateway, model)

    assert [e.response for e in recorded] == SCRIPT
    assert all(e.streamed and e.endpoint == "/responses" for e in recorded)
    assert recorded[0].response["output"][0]["type"] == "custom_tool_call"
    assert recorded[1].usage == {"input_tokens": 10, "output_tokens": 5}


def test_a_stream_cut_before_its_completed_event_keeps_its_output_items():
    whole = stream_of(SCRIPT[0])
    cut = whole[: whole.rindex(b"event: response.completed")]

    rebuilt = tape.response_of("openai", cut, streamed=True)

    assert rebuilt["object"] == "response" and rebuilt["id"] == "resp_fake_1"
    assert rebuilt["output"] == SCRIPT[0]["output"]


def test_another_codex_run_replays_from_the_tape_with_no_upstream_call(
    make_gateway, model
):
    recorded = record_codex_run(make_gateway, model, "C")
    assert model.calls == 2
    rules = (*tape_rules.path_rules(SEEN["C"], SEEN["D"]), *RULES["codex"])
    player = TapePlayer(recorded, rules=rules)
    again = TapeRecorder()
    played = gateway_to(
        make_gateway, model, player=player, recorder=again, caps=Caps(max_tokens=1)
    )

    answers = [post(played, body) for body in codex_requests("D")]
    played.close()

    assert model.calls == 2  # nothing more reached the model
    assert player.finish() is None and player.served == 2
    for (status, kind, data), expected in zip(answers, SCRIPT, strict=True):
        assert status == 200 and kind.startswith("text/event-stream")
        events = events_of(data)
        assert events[0]["type"] == "response.created"
        assert events[-1] == {
            "type": "response.completed",
            "sequence_number": len(events) - 1,
            "response": expected,
        }
    names = [e["type"] for e in events_of(answers[0][2])]
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert "response.output_text.delta" in [e["type"] for e in events_of(answers[1][2])]
    assert [e.response for e in again.exchanges()[0]] == SCRIPT
    # Every rule that set something aside is named, and nothing else.
    assert set(player.applied) == {
        "Responses: client_metadata (per-run ids, the working directory, "
        "the turn's start time)",
        "Responses: input item ids (made per run)",
        f"path: the working directory {SEEN['C']['cwd']} read as {SEEN['D']['cwd']}",
        f"path: HOME {SEEN['C']['home']} read as {SEEN['D']['home']}",
        "Codex: <current_date>",
        "Codex: a tool's Wall time: N seconds",
    }


def test_without_the_declared_rules_the_other_run_leaves_the_tape_at_call_1(
    make_gateway, model
):
    recorded = record_codex_run(make_gateway, model, "C")
    player = TapePlayer(recorded)
    played = gateway_to(make_gateway, model, player=player)

    status, _, _ = post(played, codex_requests("D")[0])

    assert status == 409
    assert player.divergence is not None and player.divergence.index == 0
    assert "<current_date>2026-12-02" in player.divergence.diff
    assert "client_metadata" not in player.divergence.diff  # the wire's rule held
    assert model.calls == 2


def sdk(gateway) -> openai.OpenAI:
    client = httpx2.Client(transport=httpx2.HTTPTransport(uds=gateway.socket_path))
    return openai.OpenAI(
        api_key=PLACEHOLDER,
        base_url="http://127.0.0.1/gpt/v1",
        http_client=client,
        max_retries=0,
    )


@pytest.mark.parametrize("stream", [True, False])
def test_the_openai_sdk_reads_a_served_responses_answer(make_gateway, model, stream):
    recorder = TapeRecorder()
    live = gateway_to(make_gateway, model, recorder=recorder)
    list(
        sdk(live).responses.create(model="gpt-5.5", input="write calc.py", stream=True)
    )
    live.close()
    recorded, _ = recorder.exchanges()
    played = gateway_to(make_gateway, model, player=TapePlayer(recorded))

    client = sdk(played)
    final: Any
    if stream:
        with client.responses.stream(model="gpt-5.5", input="write calc.py") as s:
            kinds = [event.type for event in s]
            final = s.get_final_response()
        assert "response.custom_tool_call_input.delta" in kinds
    else:
        final = client.responses.create(model="gpt-5.5", input="write calc.py")

    assert model.calls == 1
    call = final.output[0]
    assert call.type == "custom_tool_call" and call.name == "apply_patch"
    assert call.input == SCRIPT[0]["output"][0]["input"]
    assert final.usage.output_tokens == 10
