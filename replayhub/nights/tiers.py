"""The tier policy, as pure functions: each tier's share of a night (which
dimensions it budgets, its default share, where a replay's spend is charged),
which runs the text tier sends on to the agentic tier, the most a text replay
can spend (what the night reserves), and the tape tier's estimate.

Tiers run in order — preflight (free) → tape (no model spend, runs with a
tape only) → text (cheap) → agentic (expensive) → replicates (more samples of
runs already replayed, ``replicate_tier``). Each but preflight has a share of
the night: one row per tier, the same four dimensions on every row,
of which a tier budgets only its own (``BUDGETED``); a later kind of spending
is one more tier here, not more columns.
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

from replayhub.nights.arithmetic import DIMENSIONS, Amounts, estimate

MILLION = Decimal(1_000_000)

AGENTIC, TEXT, TAPE = "agentic", "text", "tape"
# More replays of runs already replayed, each one more sample of whether the
# run reproduces (``replayhub.replicates``): live or from a tape, spent from a
# share of their own so that they never eat into the first replays'.
REPLICATE = "replicate"
# Every tier with a share of the night, in the order the night admits them:
# the free and cheap tiers first, so the agentic tier is left what they could
# not answer; replicates last, after every run's first replays.
SHARE_TIERS = (TAPE, TEXT, AGENTIC, REPLICATE)
# How a tier is named on the pages (the first three are also ``Tier`` labels).
LABELS = {TAPE: "Tape", TEXT: "Text", AGENTIC: "Agentic", REPLICATE: "Replicate"}
# The dimensions each tier budgets. A text replay runs no sandbox; a tape
# replay's model answers come from its tape.
BUDGETED: dict[str, tuple[str, ...]] = {
    AGENTIC: DIMENSIONS,
    TEXT: ("replays", "tokens", "cost_usd"),
    TAPE: ("replays", "sandbox_seconds"),
    # A live replicate spends what an agentic replay does; a tape one, only
    # the first two.
    REPLICATE: DIMENSIONS,
}


@dataclass(frozen=True)
class Share:
    """A tier's share of a budget as people set it: per night, sandbox time
    in minutes. A dimension the tier does not budget is zero."""

    max_replays: int = 0
    max_sandbox_minutes: int = 0
    max_tokens: int = 0
    max_cost_usd: Decimal = Decimal(0)


# What a budget without a share of its own gives each tier.
DEFAULT_SHARES: dict[str, Share] = {
    AGENTIC: Share(20, 240, 2_000_000, Decimal(20)),
    TEXT: Share(100, 0, 1_000_000, Decimal(5)),
    TAPE: Share(50, 120, 0, Decimal(0)),
    # Spent only for projects with a replicate policy (off by default).
    REPLICATE: Share(20, 240, 2_000_000, Decimal(20)),
}


def budgeted(tier: str) -> tuple[str, ...]:
    """The dimensions ``tier`` budgets; ValueError for a tier with no share."""
    try:
        return BUDGETED[tier]
    except KeyError:
        raise ValueError(f"{tier!r} has no share of a night") from None


def only(tier: str, amount: Amounts) -> Amounts:
    """``amount`` on the dimensions ``tier`` budgets, zero on the others."""
    return Amounts(**{d: getattr(amount, d) for d in budgeted(tier)})


def night_limits(tier: str, share: Share) -> Amounts:
    """A night's limits from a tier's share of the budget (minutes to seconds),
    on the tier's own dimensions only."""
    return only(
        tier,
        Amounts(
            share.max_replays,
            share.max_sandbox_minutes * 60,
            share.max_tokens,
            share.max_cost_usd,
        ),
    )


def charges(tier: str, actual: Amounts) -> dict[str, Amounts]:
    """Where a replay of ``tier`` that spent ``actual`` is charged: each
    dimension to its own tier's share when the tier budgets it, else to the
    agentic share, whose dimensions are all four. A tape replay that left its
    tape and went live spent model tokens and money: the agentic tier's.

    The replay's own tier always comes first (its reservation is given back
    there), so every settlement touches the shares in one order; another
    tier is named only when something is charged to it.
    """
    own = only(tier, actual)
    out = {tier: own}
    rest = actual - own
    if tier != AGENTIC and rest != Amounts():
        out[AGENTIC] = rest
    return out


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
