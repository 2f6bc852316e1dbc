"""Each tier's share of a night as pure rules: which dimensions it budgets, its
default, the admission order and where a replay's spend is charged. No
database."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest

from replayhub.nights import tiers
from replayhub.nights.arithmetic import DIMENSIONS, Amounts

# One figure per dimension, each unlike the others, so a figure charged to the
# wrong dimension or share shows.
SPENT = Amounts(1, 95, 4_000, Decimal("0.75"))


def test_the_night_admits_the_free_and_cheap_tiers_first():
    assert tiers.SHARE_TIERS == ("tape", "text", "agentic", "replicate")


@pytest.mark.parametrize(
    ("tier", "dimensions"),
    [
        ("agentic", {"replays", "sandbox_seconds", "tokens", "cost_usd"}),
        ("text", {"replays", "tokens", "cost_usd"}),  # no sandbox
        ("tape", {"replays", "sandbox_seconds"}),  # no model spend
        # A live replicate spends what an agentic replay does.
        ("replicate", {"replays", "sandbox_seconds", "tokens", "cost_usd"}),
    ],
)
def test_what_each_tier_budgets(tier, dimensions):
    assert set(tiers.budgeted(tier)) == dimensions


@pytest.mark.parametrize("tier", ["preflight", "replicates", ""])
def test_a_tier_without_a_share_is_refused(tier):
    with pytest.raises(ValueError, match="has no share"):
        tiers.budgeted(tier)
    with pytest.raises(ValueError):
        tiers.charges(tier, SPENT)


def test_the_default_shares_are_the_budgets_defaults():
    assert {
        "agentic": tiers.Share(20, 240, 2_000_000, Decimal(20)),
        "text": tiers.Share(100, 0, 1_000_000, Decimal(5)),
        "tape": tiers.Share(50, 120, 0, Decimal(0)),
        "replicate": tiers.Share(20, 240, 2_000_000, Decimal(20)),
    } == tiers.DEFAULT_SHARES


@pytest.mark.parametrize("tier", tiers.SHARE_TIERS)
def test_a_default_share_sets_only_the_tiers_own_dimensions(tier):
    limits = tiers.night_limits(tier, tiers.DEFAULT_SHARES[tier])
    for dimension in DIMENSIONS:
        set_ = getattr(limits, dimension) != 0
        assert set_ is (dimension in tiers.budgeted(tier)), dimension


def test_a_nights_limits_are_the_share_in_seconds_on_the_tiers_dimensions():
    share = tiers.Share(4, 30, 9_000, Decimal("3.5"))
    assert tiers.night_limits("agentic", share) == Amounts(
        4, 1800, 9_000, Decimal("3.5")
    )
    assert tiers.night_limits("text", share) == Amounts(4, 0, 9_000, Decimal("3.5"))
    assert tiers.night_limits("tape", share) == Amounts(4, 1800, 0, 0)


@pytest.mark.parametrize("tier", tiers.SHARE_TIERS)
def test_only_keeps_the_tiers_own_dimensions(tier):
    kept = tiers.only(tier, SPENT)
    for dimension in DIMENSIONS:
        expected = getattr(SPENT, dimension) if dimension in tiers.budgeted(tier) else 0
        assert getattr(kept, dimension) == expected


def test_an_agentic_replay_is_charged_whole_to_the_agentic_share():
    assert tiers.charges("agentic", SPENT) == {"agentic": SPENT}


def test_a_tape_replay_that_went_live_charges_its_model_spend_to_the_agentic_share():
    assert tiers.charges("tape", SPENT) == {
        "tape": Amounts(1, 95),
        "agentic": Amounts(tokens=4_000, cost_usd=Decimal("0.75")),
    }


def test_a_text_replay_is_charged_to_the_text_share():
    spent = Amounts(1, 0, 4_000, Decimal("0.75"))
    assert tiers.charges("text", spent) == {"text": spent}


def test_a_share_charged_nothing_is_not_named_but_the_replays_own_always_is():
    assert tiers.charges("tape", Amounts(1, 95)) == {"tape": Amounts(1, 95)}
    assert tiers.charges("tape", Amounts()) == {"tape": Amounts()}
    assert tiers.charges("text", Amounts()) == {"text": Amounts()}


@pytest.mark.parametrize("tier", tiers.SHARE_TIERS)
@pytest.mark.parametrize(
    "spent", [Amounts(*v) for v in itertools.product((0, 3), repeat=4)]
)
def test_every_dimension_is_charged_once_to_the_share_that_budgets_it(tier, spent):
    charged = tiers.charges(tier, spent)

    # The replay's own share first: every settlement touches shares in one order.
    assert next(iter(charged)) == tier
    assert set(charged) <= {tier, "agentic"}
    total = Amounts()
    for share, amount in charged.items():
        total = total + amount
        assert tiers.only(share, amount) == amount  # within the share's dimensions
    assert total == spent
    for dimension in DIMENSIONS:
        owner = tier if dimension in tiers.budgeted(tier) else "agentic"
        assert getattr(charged.get(owner, Amounts()), dimension) == getattr(
            spent, dimension
        )
