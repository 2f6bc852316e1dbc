"""The tape a tape replay plays, read from where it was kept, and the rules
it is matched under.

The original's own tape, when its record carries one (``replayhub-record``
writes it), is the tape; otherwise the latest tape a live replay of the run
recorded through the gateway. Both are normalised the same way
(``gateway/tape``), so either can be matched against the agent's requests.

When the record's tape is played, the live replays' tapes of the run come
with it as alternates: a record made on a developer's machine may differ at
call 1 in what the agent wrote of its surroundings, where a replay's own tape
(made in the sandbox) matches. The player then plays that one and the
evidence says so (``TapePlayer.chosen``); it never picks one silently.

Requests are matched under declared rules only (``gateway.tape_rules``): the
wire's, the agent's (``agents.rules``, by the project's agent profile or the
CLI the record names) and the replay's (the original's working directory and
HOME, from the record's ``surroundings``, read as the sandbox's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replayhub.agents.rules import RULES, for_agent
from replayhub.gateway import tape, tape_rules
from replayhub.gateway.playback import Candidate, TapePlayer
from replayhub.gateway.tape import Exchange
from replayhub.gateway.tape_rules import Rule
from replayhub.models import Run, Tape
from replayhub.replay.surroundings import plan

# How many live replays' tapes come with the record's as alternates.
ALTERNATES = 3
# The agent CLIs the recorder names (by the command's basename), as profiles.
CLI_PROFILES = {
    "claude": "claude-code",
    "codex": "codex",
    "aider": "aider",
    "mini": "mini-swe-agent",
    "gemini": "gemini-cli",
    "opencode": "opencode",
}


@dataclass(frozen=True)
class TapeSource:
    """A tape to play and where it came from, in words (and a replay's id);
    the other tapes of the run it may give way to at call 1, and the rules
    the agent's requests are matched under."""

    exchanges: list[Exchange] = field(default_factory=list)
    origin: str = ""
    replay_id: int | None = None
    alternates: tuple[Candidate, ...] = ()
    rules: tuple[Rule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.exchanges)

    def player(self, *, then_live: bool) -> TapePlayer:
        player = TapePlayer(
            self.exchanges,
            then_live=then_live,
            rules=self.rules,
            origin=self.origin,
            alternates=self.alternates,
        )
        player.replay_id = self.replay_id
        return player


def _record(run: Run) -> dict[str, Any]:
    return run.raw if isinstance(run.raw, dict) else {}


def _live_tapes(run: Run, limit: int) -> list[Candidate]:
    stored = (
        Tape.objects.filter(replay__run=run, exchanges__gt=0, served=0)
        .order_by("-created_at")
        .select_related("replay")[:limit]
    )
    out = []
    for kept in stored:
        try:
            exchanges = kept.read()
        except ValueError:
            continue
        out.append(Candidate(exchanges, f"replay {kept.replay_id}", kept.replay_id))
    return out


def to_play(run: Run) -> TapeSource:
    """The tape a tape replay of ``run`` plays; empty when it has none."""
    rules = rules_for(run)
    recorded = tape.from_record_tape(_record(run).get("tape"))
    if recorded:
        alternates = tuple(_live_tapes(run, ALTERNATES))
        return TapeSource(
            recorded, "the run's record", alternates=alternates, rules=rules
        )
    stored = (
        Tape.objects.filter(replay__run=run, exchanges__gt=0)
        # A live replay's own tape before a tape replay's copy of one.
        .order_by("served", "-created_at")
        .select_related("replay")
        .first()
    )
    if stored is None:
        return TapeSource(rules=rules)
    return TapeSource(
        stored.read(),
        f"replay {stored.replay_id}",
        stored.replay_id,
        rules=rules,
    )


def has_tape(run: Run) -> bool:
    """Whether a tape replay of ``run`` has a tape to play (cheap: no unpacking)."""
    record = _record(run)
    if isinstance(record.get("tape"), list) and record["tape"]:
        return True
    return Tape.objects.filter(replay__run=run, exchanges__gt=0).exists()


def surroundings(run: Run) -> dict[str, Any]:
    """The record's ``surroundings`` (what the agent saw of where it ran), or
    nothing; read defensively: a record shapes it."""
    found = _record(run).get("surroundings")
    return found if isinstance(found, dict) else {}


def profile_of(run: Run) -> str:
    """The agent profile a run's requests come from: the project's, else the
    CLI its record names; "" when neither is known."""
    named = getattr(run.project, "agent", "") or ""
    if isinstance(named, str) and named in RULES:
        return named
    agent = surroundings(run).get("agent")
    cli = agent.get("name") if isinstance(agent, dict) else None
    return CLI_PROFILES.get(cli, "") if isinstance(cli, str) else ""


def rules_for(run: Run) -> tuple[Rule, ...]:
    """The agent's tape rules and the replay's path mappings: the original's
    working directory and HOME read as where the replay puts them
    (``replay.surroundings``: the same paths when they could be reproduced,
    then nothing is mapped)."""
    seen = surroundings(run)
    placement = plan(seen or None)
    replay = {"cwd": placement.workspace_at, "home": placement.home}
    return (
        *tape_rules.path_rules(seen, replay),
        *for_agent(profile_of(run)),
    )
