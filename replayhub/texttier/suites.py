"""A suite's summary, as a pure function over its text replays' results."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

HIGH_SCORE = 8
LOW_SCORE = 4


@dataclass(frozen=True)
class Result:
    """One run of a suite: skipped (nothing to compare), failed (the call
    failed), or replayed with a similarity and maybe a judge's score."""

    skipped: bool = False
    failed: bool = False
    similarity: float | None = None
    score: int | None = None


@dataclass(frozen=True)
class SuiteSummary:
    total: int
    replayed: int
    skipped: int
    failed: int
    mean_similarity: float | None
    mean_equivalence: float | None
    scores_high: int
    scores_low: int

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(results: Iterable[Result]) -> SuiteSummary:
    """Counts and means; a mean is None when nothing contributed to it."""
    results = list(results)
    replayed = [r for r in results if not r.skipped and not r.failed]
    similarities = [r.similarity for r in replayed if r.similarity is not None]
    scores = [r.score for r in replayed if r.score is not None]
    return SuiteSummary(
        total=len(results),
        replayed=len(replayed),
        skipped=sum(r.skipped for r in results),
        failed=sum(r.failed and not r.skipped for r in results),
        mean_similarity=sum(similarities) / len(similarities) if similarities else None,
        mean_equivalence=sum(scores) / len(scores) if scores else None,
        scores_high=sum(s >= HIGH_SCORE for s in scores),
        scores_low=sum(s <= LOW_SCORE for s in scores),
    )
