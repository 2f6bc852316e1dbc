"""Tapes through the real gateway, with the official SDKs as the agent: a live
conversation recorded, then played back from its tape with nothing reaching
the (fake, counting) provider, in both wire formats, streamed and not."""

from __future__ import annotations

import anthropic
import httpx2
import openai
import pytest

from replayhub.gateway import Caps
from replayhub.gateway.playback import TapePlayer, TapeRecorder
from tests.gateway.client import PLACEHOLDER, ask_claude, error_message


def sdk(kind: str, gateway):
    """The SDK of ``kind`` speaking to the gateway's unix socket."""
    client = httpx2.Client(transport=httpx2.HTTPTransport(uds=gateway.socket_path))
    if kind == "anthropic":
        return anthropic.Anthropic(
            api_key=PLACEHOLDER,
            base_url="http://127.0.0.1/claude",
            http_client=client,
            max_retries=0,
        )
    return openai.OpenAI(
        api_key=PLACEHOLDER,
        base_url="http://127.0.0.1/gpt/v1",
        http_client=client,
        max_retries=0,
    )


def conversation(kind: str, gateway, *, stream: bool, second: str = "tell me more"):
    """Two turns, the second carrying the first's answer; what the agent heard."""
    client = sdk(kind, gateway)
    heard = []
    messages = [{"role": "user", "content": "hello there"}]
    for turn in ("first", second):
        if kind == "anthropic":
            if stream:
                with client.messages.stream(
                    model="claude-test", max_tokens=64, messages=messages
                ) as s:
                    text = "".join(s.text_stream)
                    usage = s.get_final_message().usage.output_tokens
            else:
                reply = client.messages.create(
                    model="claude-test", max_tokens=64, messages=messages
                )
                text, usage = reply.content[0].text, reply.usage.output_tokens
        else:
            if stream:
                chunks = list(
                    client.chat.completions.create(
                        model="gpt-test",
                        messages=messages,
                        stream=True,
                        stream_options={"include_usage": True},
                    )
                )
                text = "".join(
                    c.choices[0].delta.content or "" for c in chunks if c.choices
                )
                usage = next(c.usage for c in chunks if c.usage).completion_tokens
            else:
                reply = client.chat.completions.create(
                    model="gpt-test", messages=messages
                )
                text = reply.choices[0].message.content
                usage = reply.usage.completion_tokens
        heard.append((text, usage))
        messages = [
            *messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": f"{turn}: {second}"},
        ]
    return heard


def recording(kind: str, make_gateway, *, stream: bool):
    """A live conversation through a recording gateway, closed as a replay
    closes it before its tape is read: a streamed call is recorded once its
    stream is through, which may be after the client has read the end."""
    recorder = TapeRecorder()
    gateway = make_gateway(recorder=recorder)
    heard = conversation(kind, gateway, stream=stream)
    gateway.close()
    recorded, truncated = recorder.exchanges()
    return heard, recorded, truncated


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_live_conversation_replays_from_its_tape_with_no_upstream_call(
    make_gateway, upstream, kind, stream
):
    heard, recorded, truncated = recording(kind, make_gateway, stream=stream)
    assert len(recorded) == 2 and not truncated
    assert upstream.calls == 2

    again = TapeRecorder()
    player = TapePlayer(recorded)
    played = make_gateway(recorder=again, player=player, caps=Caps(max_tokens=1))
    replayed = conversation(kind, played, stream=stream)
    played.close()

    assert replayed == heard
    assert upstream.calls == 2  # nothing more reached the provider
    assert player.finish() is None and player.served == 2
    assert [c.cost_usd for c in played.calls] == [0, 0]
    assert played.totals.tokens == 0
    assert [e.served for e in again.exchanges()[0]] == [True, True]
    assert [e.request for e in again.exchanges()[0]] == [e.request for e in recorded]


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_streamed_recording_serves_a_plain_request_and_back(
    make_gateway, upstream, kind
):
    heard, recorded, _ = recording(kind, make_gateway, stream=True)

    played = make_gateway(player=TapePlayer(recorded))
    assert conversation(kind, played, stream=False) == heard
    assert upstream.calls == 2


def test_a_differing_request_is_refused_and_named(make_gateway, upstream):
    recorder = TapeRecorder()
    conversation("anthropic", make_gateway(recorder=recorder), stream=False)
    recorded, _ = recorder.exchanges()
    player = TapePlayer(recorded)
    played = make_gateway(player=player)

    with pytest.raises(anthropic.APIStatusError) as refused:
        conversation("anthropic", played, stream=False, second="something else")

    assert refused.value.status_code == 409
    assert "call 2's request differs" in str(refused.value)
    assert upstream.calls == 2
    divergence = player.finish()
    assert divergence is not None and divergence.index == 1
    assert "tell me more" in divergence.diff and "something else" in divergence.diff


def test_tape_then_live_goes_to_the_model_from_the_first_difference(
    make_gateway, upstream
):
    _, recorded, _ = recording("openai", make_gateway, stream=True)
    player = TapePlayer(recorded, then_live=True)
    again = TapeRecorder()
    played = make_gateway(player=player, recorder=again)

    conversation("openai", played, stream=True, second="something else")
    # As a replay does: the calls in flight end before the tape is read (the
    # last one is recorded once its stream is through, which may be after the
    # client has read it).
    played.close()

    assert upstream.calls == 3  # the first call served, the second live
    assert player.divergence is not None and player.divergence.index == 1
    assert [e.served for e in again.exchanges()[0]] == [True, False]
    assert played.calls[1].cost_usd and played.calls[1].cost_usd > 0


def test_the_requests_cap_still_holds_in_a_tape_replay(make_gateway, upstream):
    recorder = TapeRecorder()
    live = make_gateway(recorder=recorder)
    assert [ask_claude(live)[0] for _ in range(2)] == [200, 200]
    recorded, _ = recorder.exchanges()
    played = make_gateway(player=TapePlayer(recorded), caps=Caps(max_requests=1))

    status, _, _ = ask_claude(played)
    assert status == 200
    status, _, body = ask_claude(played)

    assert status == 429
    assert "requests cap" in error_message("anthropic", body)
    assert upstream.calls == 2
