"""The gateway's two tape machines: a recorder that keeps every exchange a
replay makes, and a player that answers a tape replay's calls from a tape.

Both are shared by the gateway's connection threads, so their state changes
under a lock. Neither opens a connection: the player's answers are bytes of
the tape, written back to the agent that asked (``tape.serve``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from replayhub.gateway import tape, wire
from replayhub.gateway.tape import Divergence, Exchange
from replayhub.gateway.tape_rules import Rule

# What one exchange and one tape may hold, in bytes of JSON, by default.
EXCHANGE_BYTES = 4 * 1024 * 1024
TAPE_BYTES = 32 * 1024 * 1024


@dataclass
class Capture:
    """One exchange being recorded: the request as the agent sent it and the
    answer's bytes as the agent got them, up to ``limit``."""

    kind: str
    endpoint: str
    body: bytes
    limit: int
    served: bool = False
    answer: bytearray = field(default_factory=bytearray)
    over: bool = False
    event_stream: bool = False
    status: int = 0
    usage: wire.Usage | None = None

    def feed(self, data: bytes) -> None:
        if self.over or not data:
            return
        if len(self.answer) + len(data) > self.limit:
            self.over = True
            self.answer = bytearray()
            return
        self.answer += data

    def exchange(self) -> Exchange:
        usage = self.usage or wire.Usage()
        counts = {
            key: value
            for key, value in (
                ("input_tokens", usage.input_tokens),
                ("output_tokens", usage.output_tokens),
            )
            if value is not None
        }
        request = tape.normalise_bytes(self.kind, self.endpoint, self.body)
        answer = (
            None
            if self.over
            else tape.response_of(
                self.kind, bytes(self.answer), streamed=self.event_stream
            )
        )
        return Exchange(
            request=request,
            response=answer,
            status=self.status,
            streamed=self.event_stream,
            usage=counts,
            model=str(usage.model or request.get("model") or "")[:200],
            truncated=self.over,
            served=self.served,
        )


class TapeRecorder:
    """Every exchange of one replay, in the order the calls ended.

    ``exchange_bytes`` caps one exchange (its answer is left out past it,
    then its request) and ``tape_bytes`` the whole tape (the exchanges past
    it keep only their kind, endpoint, model, status and usage).
    """

    def __init__(
        self, *, exchange_bytes: int = EXCHANGE_BYTES, tape_bytes: int = TAPE_BYTES
    ) -> None:
        self.exchange_bytes = exchange_bytes
        self.tape_bytes = tape_bytes
        self._lock = threading.Lock()
        self._ended: list[Capture] = []
        self._held = 0

    def start(self, kind: str, endpoint: str, body: bytes, *, served: bool) -> Capture:
        with self._lock:
            room = max(min(self.exchange_bytes, self.tape_bytes - self._held), 0)
        return Capture(
            kind=kind,
            endpoint=endpoint,
            body=body if len(body) <= self.exchange_bytes else b"",
            limit=room,
            served=served,
        )

    def end(self, capture: Capture, *, status: int, usage: wire.Usage | None) -> None:
        capture.status, capture.usage = status, usage
        with self._lock:
            self._held += len(capture.answer) + len(capture.body)
            self._ended.append(capture)

    def keep_served(
        self, played: Exchange, body: bytes, answer: bytes, stream: bool
    ) -> None:
        """Records a call a tape answered: ``answer`` is what the agent got."""
        capture = self.start(played.kind, played.endpoint, body, served=True)
        capture.event_stream = stream
        capture.feed(answer)
        usage = wire.Usage(
            input_tokens=played.usage.get("input_tokens"),
            output_tokens=played.usage.get("output_tokens"),
            model=played.model or None,
            complete=True,
        )
        self.end(capture, status=played.status, usage=usage)

    def exchanges(self) -> tuple[list[Exchange], bool]:
        """The tape, each exchange within its cap and all within the tape's;
        whether anything was left out."""
        with self._lock:
            ended = list(self._ended)
        out: list[Exchange] = []
        total, truncated = 0, False
        for capture in ended:
            exchange = tape.capped(capture.exchange(), self.exchange_bytes)
            size = len(tape.canonical(exchange.to_dict()))
            if total + size > self.tape_bytes:
                exchange = tape.capped(exchange, 0)
                size = len(tape.canonical(exchange.to_dict()))
            total += size
            truncated = truncated or exchange.truncated
            out.append(exchange)
        return out, truncated


@dataclass(frozen=True)
class Candidate:
    """A tape a tape replay may play, and where it came from, in words."""

    exchanges: list[Exchange]
    origin: str
    replay_id: int | None = None


class TapePlayer:
    """Answers a tape replay's calls from ``tape``, in order.

    ``take`` gives the exchange that answers the next call, or the
    divergence that ends the tape: with ``then_live`` the calls from there on
    go to the model (``take`` returns ``None``); without, every later call is
    refused with the same divergence.

    ``rules`` (the agent's and the replay's, ``tape_rules``) are applied to
    both requests, after the wire's own; ``applied`` names every one that
    changed something. ``alternates`` are other tapes of the same run (a
    live replay's): when call 1 differs from ``tape``'s, the first of them
    whose call 1 matches is played instead, and ``chosen`` says so. The
    choice is made once, at call 1, and never silently.
    """

    def __init__(
        self,
        recorded: list[Exchange],
        *,
        then_live: bool = False,
        rules: tuple[Rule, ...] = (),
        origin: str = "",
        alternates: tuple[Candidate, ...] = (),
    ) -> None:
        self.tape = _answered(recorded)
        self.then_live = then_live
        self.rules = rules
        self.origin = origin
        self.alternates = alternates
        self.replay_id: int | None = None
        self.chosen = ""
        self.applied: list[str] = []
        self.divergence: Divergence | None = None
        self.served = 0
        self._next = 0
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        """The calls the agent made while the tape played."""
        return self._next

    @property
    def live_from(self) -> int | None:
        """The call (1-based) from which a ``then_live`` replay asked the model."""
        left = self.divergence
        if self.then_live and left is not None and left.why != "fewer":
            return left.index + 1
        return None

    def take(
        self, kind: str, endpoint: str, body: bytes, *, stream: bool
    ) -> Exchange | Divergence | None:
        actual = tape.normalise_bytes(kind, endpoint, body)
        with self._lock:
            if self.divergence is not None:
                return None if self.then_live else self.divergence
            index = self._next
            self._next += 1
            diverged, applied = tape.match(
                self.tape, index, actual, stream=stream, rules=self.rules
            )
            if diverged is not None and index == 0 and diverged.why == "differs":
                diverged, applied = self._other_tape(diverged, actual, stream)
            self._note(applied)
            if diverged is not None:
                self.divergence = diverged
                return None if self.then_live else diverged
            self.served += 1
            return self.tape[index]

    def _other_tape(
        self, diverged: Divergence, actual: dict[str, Any], stream: bool
    ) -> tuple[Divergence | None, list[str]]:
        """At call 1, the first alternate whose call 1 matches, made the tape;
        otherwise the first tape's divergence stands."""
        for candidate in self.alternates:
            exchanges = _answered(candidate.exchanges)
            other, applied = tape.match(
                exchanges, 0, actual, stream=stream, rules=self.rules
            )
            if other is None:
                self.chosen = (
                    f"{candidate.origin} was played: call 1 differs from "
                    f"{self.origin or 'the first tape'}'s and matches this one's"
                )
                self.tape, self.origin = exchanges, candidate.origin
                self.replay_id = candidate.replay_id
                return None, applied
        return diverged, []

    def _note(self, applied: list[str]) -> None:
        for name in applied:
            if name not in self.applied:
                self.applied.append(name)

    def finish(self) -> Divergence | None:
        """The divergence, once the agent has ended: an agent that made fewer
        calls than the tape holds left it too."""
        with self._lock:
            if self.divergence is None:
                self.divergence = tape.fewer(self.tape, self._next)
            return self.divergence

    def evidence(self) -> dict[str, Any]:
        """What the replay's evidence says of the tape beyond its calls: which
        tape played and why, the rules that set something aside, and the call
        from which the model was asked live."""
        return {
            "source": self.origin or "none",
            "chosen": self.chosen,
            "rules_applied": list(self.applied),
            "live_from": self.live_from,
        }


def _answered(recorded: list[Exchange]) -> list[Exchange]:
    # Calls the provider did not answer (an SDK retried them) are not part of
    # the conversation the tape replays.
    return [e for e in recorded if 200 <= e.status < 300]
