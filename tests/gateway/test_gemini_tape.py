"""Gemini's ``generateContent`` wire through the gateway (Gemini CLI's):
routed with the key in ``x-goog-api-key``, metered from ``usageMetadata``,
taped (a streamed answer rebuilt from its ``data:`` chunks) and served back
as a stream; real Gemini CLI 0.61.0 requests of another run (another folder,
HOME and date) answered from one run's tape with nothing going up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayhub.agents.rules import RULES
from replayhub.gateway import Caps, Upstream, tape, tape_rules
from replayhub.gateway.playback import TapePlayer, TapeRecorder
from tests.gateway.client import PLACEHOLDER, UnixHTTPConnection
from tests.gateway.gemini_model import KEY, GeminiModel, chunks_of

GEMINI = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "gemini-cli"
SCRIPT = json.loads((GEMINI / "script.json").read_text())["answers"]
RUNS = "/work/notes/agents-cache/runs"
SEEN = {
    run: {"cwd": f"{RUNS}/gemini-{run}/work-{run}", "home": f"{RUNS}/gemini-{run}/home"}
    for run in "CD"
}
PATH = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


# Where the CLI was installed when the requests were captured, and where a
# replay installs it: run D's requests are given the replay's.
INSTALLED = "/work/notes/agents-cache/gemini/node_modules/@google/gemini-cli/"
REPLAY_INSTALL = "/replayhub-env/agent/node_modules/@google/gemini-cli/"


def cli_requests(run: str) -> list[bytes]:
    files = sorted((GEMINI / f"cap-{run}").glob("*-POST-*.json"))
    bodies = [json.dumps(json.loads(f.read_text())["body"]) for f in files]
    if run == "D":
        bodies = [b.replace(INSTALLED, REPLAY_INSTALL) for b in bodies]
    return [body.encode() for body in bodies]


@pytest.fixture
def model():
    with GeminiModel(SCRIPT) as fake:
        yield fake


def gateway_to(make_gateway, model, **kwargs):
    upstreams = [Upstream("gem", "gemini", model.base_url, KEY, {})]
    return make_gateway(upstreams=upstreams, **kwargs)


def post(gateway, body: bytes, path: str = PATH, key: str = PLACEHOLDER):
    conn = UnixHTTPConnection(gateway.socket_path)
    conn.request(
        "POST",
        "/gem" + path,
        body=body,
        headers={"x-goog-api-key": key, "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, response.getheader("Content-Type") or "", data


def chunks(data: bytes) -> list[dict]:
    return [
        json.loads(line[6:])
        for line in data.decode().splitlines()
        if line.startswith("data: ")
    ]


def test_a_gemini_call_goes_up_with_the_real_key_and_is_metered(make_gateway, model):
    gateway = gateway_to(make_gateway, model)

    status, kind, data = post(gateway, cli_requests("C")[0])

    assert status == 200 and kind.startswith("text/event-stream")
    assert chunks(data)[0]["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert model.keys == [KEY]
    (call,) = gateway.calls
    assert call.model_requested == "gemini-2.5-pro"
    assert call.model_answered == "gemini-2.5-pro"
    assert (call.input_tokens, call.output_tokens) == (10, 10)
    assert call.streamed


def test_a_wrong_key_or_another_method_is_refused_in_geminis_shape(make_gateway, model):
    gateway = gateway_to(make_gateway, model)

    status, _, data = post(gateway, b"{}", key="not-the-placeholder")
    assert status == 401
    assert json.loads(data)["error"]["status"] == "UNAUTHENTICATED"
    status, _, _ = post(gateway, b"{}", path="/v1beta/models/m:deleteEverything")
    assert status == 403
    assert model.calls == 0


def test_a_streamed_answer_is_taped_whole_and_served_from_the_tape(make_gateway, model):
    recorder = TapeRecorder()
    live = gateway_to(make_gateway, model, recorder=recorder)
    for body in cli_requests("C"):
        assert post(live, body)[0] == 200
    live.close()  # a streamed call is recorded once its stream is through
    recorded, _ = recorder.exchanges()
    assert [e.response["candidates"] for e in recorded] == [
        a["candidates"] for a in SCRIPT
    ]
    assert recorded[1].response["candidates"][0]["content"]["parts"] == [
        {"text": "Created calc.py."}
    ]
    assert model.calls == 2

    rules = (*tape_rules.path_rules(SEEN["C"], SEEN["D"]), *RULES["gemini-cli"])
    player = TapePlayer(recorded, rules=rules)
    played = gateway_to(make_gateway, model, player=player, caps=Caps(max_tokens=1))
    answers = [post(played, body) for body in cli_requests("D")]

    assert model.calls == 2  # nothing more went up
    assert player.finish() is None and player.served == 2
    for (status, kind, data), expected in zip(answers, SCRIPT, strict=True):
        assert status == 200 and kind.startswith("text/event-stream")
        assert tape.response_of("gemini", data, streamed=True) == expected
    assert "Gemini CLI: the date sentence (Today's date is …)" in player.applied
    assert INSTALLED.encode() in cli_requests("C")[0]
    assert (
        "Gemini CLI: where it is installed (…/node_modules/@google/gemini-cli)"
        in player.applied
    )


def test_a_plain_generate_content_call_is_served_as_json(make_gateway, model):
    path = "/v1beta/models/gemini-2.5-pro:generateContent"
    recorder = TapeRecorder()
    body = cli_requests("C")[0]
    assert (
        post(gateway_to(make_gateway, model, recorder=recorder), body, path)[0] == 200
    )
    recorded, _ = recorder.exchanges()
    played = gateway_to(make_gateway, model, player=TapePlayer(recorded))

    status, kind, data = post(played, body, path)

    assert status == 200 and kind == "application/json"
    assert json.loads(data) == SCRIPT[0]
    assert model.calls == 1


def test_chunks_cut_anywhere_rebuild_the_answer():
    answer = SCRIPT[1]
    events = [f"data: {json.dumps(c)}" for c in chunks_of(answer)]

    assert tape.reassemble("gemini", events) == answer
