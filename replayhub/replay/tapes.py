"""The tape a tape replay plays, read from where it was kept.

The original's own tape, when its record carries one (``replayhub-record``
writes it), is the tape; otherwise the latest tape a live replay of the run
recorded through the gateway. Both are normalised the same way
(``gateway/tape``), so either can be matched against the agent's requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replayhub.gateway import tape
from replayhub.gateway.tape import Exchange
from replayhub.models import Run, Tape


@dataclass(frozen=True)
class TapeSource:
    """A tape to play and where it came from, in words (and a replay's id)."""

    exchanges: list[Exchange] = field(default_factory=list)
    origin: str = ""
    replay_id: int | None = None

    def __bool__(self) -> bool:
        return bool(self.exchanges)


def to_play(run: Run) -> TapeSource:
    """The tape a tape replay of ``run`` plays; empty when it has none."""
    record = run.raw if isinstance(run.raw, dict) else {}
    recorded = tape.from_record_tape(record.get("tape"))
    if recorded:
        return TapeSource(recorded, "the run's record")
    stored = (
        Tape.objects.filter(replay__run=run, exchanges__gt=0)
        # A live replay's own tape before a tape replay's copy of one.
        .order_by("served", "-created_at")
        .select_related("replay")
        .first()
    )
    if stored is None:
        return TapeSource()
    return TapeSource(stored.read(), f"replay {stored.replay_id}", stored.replay_id)


def has_tape(run: Run) -> bool:
    """Whether a tape replay of ``run`` has a tape to play (cheap: no unpacking)."""
    record = run.raw if isinstance(run.raw, dict) else {}
    if isinstance(record.get("tape"), list) and record["tape"]:
        return True
    return Tape.objects.filter(replay__run=run, exchanges__gt=0).exists()
