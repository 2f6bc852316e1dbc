"""The tier policy, as pure functions: which runs the text tier sends on to the
agentic tier, the most a text replay can spend (what the night reserves), and
the tape tier's estimate and share.

Tiers run in order — preflight (free) → tape (no model spend, runs with a
tape only) → text (cheap) → agentic (expensive).
With the text tier on and ``agentic_after_text`` set, a run is admitted to the
agentic tier only once its latest text replay *passed it on*: its answer was
unlike the original (similarity below the threshold) or the judge scored it
low, or the record's category is one the project always escalates. A failed
text call passes nothing on: the run waits for its next text replay.
No Django import.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from decimal import Decimal

from replayhub.nights.arithmetic import Amounts, estimate

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class TierPolicy:
    similarity_below: float
    score_at_most: int | None = None
    escalate_categories: Collection[str] = ()


def escalated(category: object, policy: TierPolicy) -> bool:
    """Whether the record's category always goes on to the agentic tier."""
    return isinstance(category, str) and category in policy.escalate_categories


def passes_on(
    *, similarity: float | None, score: int | None, failed: bool, policy: TierPolicy
) -> bool:
    """Whether one text replay's result sends its run to the agentic tier."""
    if failed or similarity is None:
        return False
    if similarity < policy.similarity_below:
        return True
    return (
        policy.score_at_most is not None
        and score is not None
        and score <= policy.score_at_most
    )


@dataclass(frozen=True)
class TextBound:
    tokens: int
    cost_usd: Decimal


def text_bound(
    *,
    prompt_bytes: int,
    output_bytes: int,
    max_tokens: int,
    judged: bool,
    judge_overhead_bytes: int,
    side_cap_bytes: int,
    target_price: tuple[Decimal, Decimal] | None,
    judge_price: tuple[Decimal, Decimal] | None,
) -> TextBound:
    """The most one text replay can spend, so a night that reserves it can
    never overspend: no tokenizer counts more tokens than the text has bytes,
    and each answer is capped at ``max_tokens``. The judge reads the prompt,
    the original and the answer, each cut to ``side_cap_bytes``. Prices are
    (input, output) USD per million tokens; an unpriced model costs nothing
    that can be counted."""
    target_in = prompt_bytes
    tokens = target_in + max_tokens
    cost = _cost(target_price, target_in, max_tokens)
    if judged:
        judge_in = (
            judge_overhead_bytes
            + min(prompt_bytes, side_cap_bytes)
            + min(output_bytes, side_cap_bytes)
            + side_cap_bytes
        )
        tokens += judge_in + max_tokens
        cost += _cost(judge_price, judge_in, max_tokens)
    return TextBound(tokens=tokens, cost_usd=cost)


def _cost(price: tuple[Decimal, Decimal] | None, tokens_in: int, tokens_out: int):
    if price is None:
        return Decimal(0)
    return (tokens_in * price[0] + tokens_out * price[1]) / MILLION


def tape_estimate(*, recent: list[Amounts], caps: Amounts) -> Amounts:
    """One tape replay's expected cost: replays and sandbox time as the
    agentic estimate makes them (from recent tape replays, else the caps),
    and no model spend: its answers come from the tape."""
    guess = estimate(recent=recent, caps=caps)
    return Amounts(replays=1, sandbox_seconds=guess.sandbox_seconds)


def tape_limits(*, max_replays: int, max_sandbox_minutes: int) -> Amounts:
    """The tape tier's share of a night: a count and sandbox time, nothing
    on the model dimensions (a tape replay reserves none there)."""
    return Amounts(replays=max_replays, sandbox_seconds=max_sandbox_minutes * 60)
