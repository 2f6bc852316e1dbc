"""What the gateway records of each call, and the caps it holds the totals to."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Literal

from replayhub.gateway import wire


@dataclass(frozen=True)
class Caps:
    """Per-replay limits; ``None``: no limit."""

    max_tokens: int | None = None
    max_cost_usd: Decimal | None = None
    max_requests: int | None = None


@dataclass(frozen=True)
class MeteredCall:
    """One call as the gateway saw it.

    ``status`` is the upstream's HTTP status, the gateway's 502/504 when the
    upstream gave none, or ``"refused"`` when the call was not forwarded;
    ``http_status`` is what the agent got either way. Token counts are
    ``None`` when not reported (``wire.Usage`` says what they count);
    ``cost_usd`` is ``None`` when unknown. ``first_byte_ms`` is set for
    streams. ``streamed``: the agent asked for a stream.
    """

    provider: str
    kind: str
    endpoint: str
    model_requested: str | None
    model_answered: str | None
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    cost_usd: Decimal | None
    latency_ms: float
    first_byte_ms: float | None
    status: int | Literal["refused"]
    http_status: int
    error: str
    streamed: bool
    started_at: datetime
    # What was held back for the call before it went up (its worst case), and
    # whether the usage recorded is that estimate: the call's own usage never
    # arrived (the stream broke off before its last event).
    reserved_tokens: int = 0
    reserved_cost_usd: Decimal | None = None
    usage_estimated: bool = False


@dataclass(frozen=True)
class Totals:
    """What the forwarded calls added up to, and what the calls still running
    hold back (their worst case); the caps are checked on both together.
    ``unpriced``: calls that used tokens of a model with no price."""

    requests: int = 0
    tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    unpriced: int = 0
    reserved_tokens: int = 0
    reserved_cost_usd: Decimal = Decimal(0)

    def passed(self, caps: Caps) -> str:
        """The cap the spent totals passed ("" when none did)."""
        if caps.max_tokens is not None and self.tokens > caps.max_tokens:
            return "tokens"
        if caps.max_cost_usd is not None and self.cost_usd > caps.max_cost_usd:
            return "cost"
        if caps.max_requests is not None and self.requests > caps.max_requests:
            return "requests"
        return ""


@dataclass
class Draft:
    """A ModelCall being filled in while the call runs."""

    provider: str
    endpoint: str
    started: float
    started_at: datetime
    kind: str = ""
    model_requested: str | None = None
    streamed: bool = False
    usage: wire.Usage = field(default_factory=wire.Usage)
    cost_usd: Decimal | None = None
    first_byte: float | None = None
    status: int | Literal["refused"] = "refused"
    http_status: int = 0
    error: str = ""
    # The worst case held back when the call was admitted.
    reserved_tokens: int = 0
    reserved_cost_usd: Decimal | None = None
    worst: wire.Usage | None = None

    def charged(self) -> tuple[wire.Usage, Decimal | None, bool]:
        """What the call is charged: its usage, or its worst case when a billed
        answer's usage never arrived in full (the agent or the upstream broke
        the stream off before its last event); whether it is that estimate."""
        usage, worst = self.usage, self.worst
        answered = isinstance(self.status, int) and (
            200 <= self.status < 300 or self.status == 504
        )
        if worst is None or not answered or usage.complete:
            return usage, self.cost_usd, False
        estimate = replace(
            worst,
            input_tokens=max(usage.input_tokens or 0, worst.input_tokens or 0),
            output_tokens=max(usage.output_tokens or 0, worst.output_tokens or 0),
            model=usage.model or worst.model,
        )
        return estimate, self.reserved_cost_usd, True
