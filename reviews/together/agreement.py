"""Agreement arithmetic: reviewers against gold, and reviewers against each other.

Pure functions over plain data (no Django import): a judgement is a label
(a verdict) a reviewer gave an item (a replay). Cohen's kappa corrects the raw
agreement of two reviewers for the agreement their label frequencies would
produce by chance:

    kappa = (p_o - p_e) / (1 - p_e)

where ``p_o`` is the share of shared items both labelled the same and ``p_e``
the sum over labels of the product of each reviewer's share of that label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from typing import TypeVar

# A type variable: Mapping keys are invariant, so a dict keyed by replay ids is no
# Mapping[Hashable, str].
Item = TypeVar("Item", bound=Hashable)
Judgements = Mapping[str, Mapping[Item, str]]


def cohen_kappa(pairs: Iterable[tuple[str, str]]) -> Fraction | None:
    """Cohen's kappa of two raters, from their labels on each shared item.

    Exact (a Fraction). None when it is undefined: no shared item, or both
    raters gave one and the same label to everything (chance agreement is
    then 1, and the formula divides by zero).
    """
    pairs = list(pairs)
    n = len(pairs)
    if n == 0:
        return None
    observed = Fraction(sum(1 for a, b in pairs if a == b), n)
    first = Counter(a for a, _ in pairs)
    second = Counter(b for _, b in pairs)
    chance = sum(
        (Fraction(first[label], n) * Fraction(second[label], n) for label in first),
        start=Fraction(0),
    )
    if chance == 1:
        return None
    return (observed - chance) / (1 - chance)


@dataclass(frozen=True)
class GoldScore:
    reviewer: str
    judged: int
    agreed: int

    @property
    def rate(self) -> Fraction | None:
        return Fraction(self.agreed, self.judged) if self.judged else None


def gold_agreement(
    judgements: Judgements[Item], gold: Mapping[Item, str]
) -> list[GoldScore]:
    """Each reviewer's agreement with the settled verdicts of gold items.

    Only gold items a reviewer judged count; reviewers who judged none are
    left out. Sorted by reviewer name.
    """
    scores = []
    for reviewer in sorted(judgements):
        given = judgements[reviewer]
        judged = [item for item in given if item in gold]
        if not judged:
            continue
        agreed = sum(1 for item in judged if given[item] == gold[item])
        scores.append(GoldScore(reviewer=reviewer, judged=len(judged), agreed=agreed))
    return scores


@dataclass(frozen=True)
class PairAgreement:
    first: str
    second: str
    shared: int
    agreed: int
    kappa: Fraction | None

    @property
    def rate(self) -> Fraction | None:
        return Fraction(self.agreed, self.shared) if self.shared else None


def pairwise(judgements: Judgements[Item]) -> list[PairAgreement]:
    """Every pair of reviewers who judged at least one item in common.

    Pairs are ordered by name (``first`` < ``second``), and so is the list.
    """
    found = []
    for first, second in combinations(sorted(judgements), 2):
        a, b = judgements[first], judgements[second]
        shared = sorted(set(a) & set(b), key=repr)
        if not shared:
            continue
        pairs = [(a[item], b[item]) for item in shared]
        found.append(
            PairAgreement(
                first=first,
                second=second,
                shared=len(pairs),
                agreed=sum(1 for x, y in pairs if x == y),
                kappa=cohen_kappa(pairs),
            )
        )
    return found
