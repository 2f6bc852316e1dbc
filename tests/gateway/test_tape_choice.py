"""Which tape a tape replay plays: the first one, unless its call 1 differs
and another tape of the run (a live replay's) matches it; then that one, and
the player says so. A replay that goes live says from which call."""

from __future__ import annotations

import json

from replayhub.gateway import tape
from replayhub.gateway.playback import Candidate, TapePlayer
from replayhub.gateway.tape import Exchange


def exchange(text: str, answer: str) -> Exchange:
    request = tape.normalise(
        "openai",
        "/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": text}]},
    )
    return Exchange(request, {"choices": [{"message": {"content": answer}}]})


def body(text: str) -> bytes:
    return json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": text}]}
    ).encode()


def take(player: TapePlayer, text: str):
    return player.take("openai", "/chat/completions", body(text), stream=False)


def test_a_live_replays_tape_is_played_when_the_records_differs_at_call_1():
    record = [exchange("cwd is /home/dev/shop", "from the record")]
    live = [exchange("cwd is /workspace", "from replay 7")]
    player = TapePlayer(
        record,
        origin="the run's record",
        alternates=(Candidate(live, "replay 7", 7),),
    )

    served = take(player, "cwd is /workspace")

    assert isinstance(served, Exchange)
    assert served.response["choices"][0]["message"]["content"] == "from replay 7"
    assert player.finish() is None
    evidence = player.evidence()
    assert evidence["source"] == "replay 7"
    assert evidence["chosen"] == (
        "replay 7 was played: call 1 differs from the run's record's "
        "and matches this one's"
    )
    assert player.replay_id == 7


def test_the_records_tape_stands_when_no_other_matches_and_its_diff_is_kept():
    record = [exchange("cwd is /home/dev/shop", "a")]
    player = TapePlayer(
        record,
        origin="the run's record",
        alternates=(Candidate([exchange("cwd is /elsewhere", "b")], "replay 3"),),
    )

    refused = take(player, "cwd is /workspace")

    assert isinstance(refused, tape.Divergence) and refused.index == 0
    assert "/home/dev/shop" in refused.diff  # the record's diff, not replay 3's
    assert player.evidence()["source"] == "the run's record"
    assert player.evidence()["chosen"] == ""


def test_the_choice_is_made_at_call_1_only():
    record = [exchange("one", "a"), exchange("two", "b")]
    other = [exchange("one", "a"), exchange("2", "c")]
    player = TapePlayer(record, alternates=(Candidate(other, "replay 4"),))

    assert isinstance(take(player, "one"), Exchange)
    assert isinstance(take(player, "2"), tape.Divergence)
    assert player.evidence()["chosen"] == ""


def test_a_tape_then_live_replay_that_left_at_call_1_is_live_from_call_1():
    player = TapePlayer([exchange("one", "a")], then_live=True)

    assert take(player, "something else") is None  # it goes to the model

    assert player.evidence()["live_from"] == 1
    assert player.served == 0


def test_a_replay_that_stayed_on_its_tape_was_never_live():
    player = TapePlayer([exchange("one", "a")], then_live=True)
    take(player, "one")

    assert player.finish() is None
    assert player.evidence()["live_from"] is None
