"""Kappa and gold agreement, against figures worked out by hand."""

from __future__ import annotations

from fractions import Fraction

from reviews.together.agreement import (
    GoldScore,
    PairAgreement,
    cohen_kappa,
    gold_agreement,
    pairwise,
)


def test_the_textbook_two_by_two_table_gives_kappa_0_4():
    # yes/yes 20, yes/no 5, no/yes 10, no/no 15: p_o = 35/50 = 0.7; the first
    # says yes half the time, the second 60%: p_e = .5*.6 + .5*.4 = 0.5.
    pairs = (
        [("yes", "yes")] * 20
        + [("yes", "no")] * 5
        + [("no", "yes")] * 10
        + [("no", "no")] * 15
    )
    assert cohen_kappa(pairs) == Fraction(2, 5)


def test_three_verdicts_give_kappa_13_25():
    # p_o = 4/6; first: e3 d1 i2, second: e2 d3 i1, p_e = (6 + 3 + 2) / 36.
    pairs = [
        ("equivalent", "equivalent"),
        ("equivalent", "divergent"),
        ("divergent", "divergent"),
        ("identical", "identical"),
        ("identical", "divergent"),
        ("equivalent", "equivalent"),
    ]
    assert cohen_kappa(pairs) == Fraction(13, 25)


def test_full_agreement_is_one_and_full_disagreement_of_two_labels_is_minus_one():
    assert cohen_kappa([("a", "a"), ("b", "b"), ("a", "a")]) == 1
    assert cohen_kappa([("a", "b"), ("b", "a")]) == -1


def test_kappa_is_undefined_without_items_or_when_chance_explains_everything():
    assert cohen_kappa([]) is None
    # Both always said "a": they agree, but chance alone would have agreed too.
    assert cohen_kappa([("a", "a"), ("a", "a")]) is None


def test_agreement_no_better_than_chance_is_zero():
    # Each says a half the time, independently: p_o = p_e = 1/2.
    assert cohen_kappa([("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")]) == 0


def test_gold_agreement_counts_only_the_gold_items_each_reviewer_judged():
    gold = {1: "divergent", 2: "equivalent", 3: "identical"}
    judgements = {
        "sam": {1: "divergent", 2: "divergent", 9: "equivalent"},
        "rita": {1: "divergent", 2: "equivalent", 3: "identical"},
        "otto": {9: "divergent"},
    }
    scores = gold_agreement(judgements, gold)
    assert scores == [
        GoldScore(reviewer="rita", judged=3, agreed=3),
        GoldScore(reviewer="sam", judged=2, agreed=1),
    ]
    assert scores[1].rate == Fraction(1, 2)


def test_pairwise_lists_each_pair_with_shared_items_once():
    judgements = {
        "rita": {1: "a", 2: "b", 3: "a", 4: "b"},
        "sam": {1: "a", 2: "b", 3: "b", 4: "b"},
        "otto": {7: "a"},
    }
    # rita/sam share 4 items, agree on 3: p_o = 3/4; rita a2 b2, sam a1 b3:
    # p_e = (2*1 + 2*3) / 16 = 1/2, kappa = (3/4 - 1/2) / (1/2) = 1/2.
    assert pairwise(judgements) == [
        PairAgreement(
            first="rita", second="sam", shared=4, agreed=3, kappa=Fraction(1, 2)
        )
    ]
    assert pairwise(judgements)[0].rate == Fraction(3, 4)
