"""Which tape a tape replay of a run plays, and the rules it is matched
under: the record's tape with the live replays' tapes as alternates, the
agent's rules by the CLI the record names, the record's working directory and
HOME read as the sandbox's."""

from __future__ import annotations

import pytest

from replayhub.gateway import tape
from replayhub.models import Tape
from replayhub.replay import tapes
from replayhub.sandbox.base import HOME, WORKSPACE
from replayhub.verdicts.facts import Reason, Ruling, Verdict
from replayhub.verdicts.tape import REPRODUCED, on_tape
from tests.factories import make_replay

pytestmark = pytest.mark.django_db

RECORDED = [
    {
        "provider_kind": "openai",
        "path": "/v1/responses",
        "request": {"model": "gpt-5.5", "input": "cwd /tmp/dev/shop"},
        "status": 200,
        "response": {"object": "response", "output": []},
    }
]


def live_tape(replay, text: str, *, served: bool = False) -> Tape:
    exchange = tape.Exchange(
        tape.normalise("openai", "/responses", {"model": "gpt-5.5", "input": text}),
        {"object": "response", "output": []},
        served=served,
    )
    row = Tape.of([exchange], truncated=False)
    row.replay = replay
    row.save()
    return row


def test_the_records_tape_comes_with_the_live_replays_tapes_as_alternates():
    replay = make_replay()
    replay.run.raw = {
        "tape": RECORDED,
        "surroundings": {
            "cwd": "/tmp/dev/shop",
            "home": "/tmp/dev",
            "agent": {"name": "codex", "version": "0.171.0"},
        },
    }
    replay.run.save(update_fields=["raw"])
    live_tape(replay, f"cwd {WORKSPACE}")
    served = make_replay(run=replay.run)
    live_tape(served, "a tape replay's copy", served=True)

    source = tapes.to_play(replay.run)

    assert source.origin == "the run's record"
    assert [c.origin for c in source.alternates] == [f"replay {replay.pk}"]
    names = [rule.name for rule in source.rules]
    assert f"path: the working directory /tmp/dev/shop read as {WORKSPACE}" in names
    assert f"path: HOME /tmp/dev read as {HOME}" in names
    assert "Codex: <current_date>" in names

    player = source.player(then_live=False)
    played = player.take(
        "openai",
        "/responses",
        b'{"model": "gpt-5.5", "input": "cwd %s"}' % WORKSPACE.encode(),
        stream=True,
    )

    assert isinstance(played, tape.Exchange)
    # The path rule made the record's call 1 match: no need for the alternate.
    assert player.evidence()["source"] == "the run's record"
    assert player.evidence()["rules_applied"] == [
        f"path: the working directory /tmp/dev/shop read as {WORKSPACE}"
    ]


def test_a_record_with_no_surroundings_has_no_path_rules():
    replay = make_replay()
    replay.run.raw = {"tape": RECORDED, "surroundings": "not a mapping"}
    replay.run.save(update_fields=["raw"])

    assert tapes.to_play(replay.run).rules == ()


def test_a_tape_then_live_replay_that_left_at_call_1_is_called_live():
    ruling = Ruling(Verdict.IDENTICAL, Reason.SAME_TREE, "The trees match.", ())

    said = on_tape(ruling, left_at=1).reason

    assert "every call went to the model" in said
    assert "not a tape replay" in said
    assert REPRODUCED not in said


def test_paths_the_replay_reproduces_are_not_mapped():
    replay = make_replay()
    replay.run.raw = {
        "tape": RECORDED,
        "surroundings": {"cwd": "/home/dev/shop", "home": "/home/dev/.h"},
    }
    replay.run.save(update_fields=["raw"])

    assert tapes.rules_for(replay.run) == ()
