"""A night's admission told in lines, as the command and the budgets page say it."""

from __future__ import annotations

from replayhub.nights.admitted import night_lines

FIGURES = {
    "project": "shop",
    "admitted": 0,
    "deferred": 1,
    "already_admitted": 3,
    "skipped": "",
    "night": "2026-12-04",
    "reserved_replays": 3,
    "limit_replays": 3,
}


def test_the_tiers_are_told_in_admission_order_around_the_agentic_one():
    lines = night_lines(
        {
            **FIGURES,
            "replicate_admitted": 1,
            "replicate_deferred": 0,
            "tape_admitted": 2,
            "tape_deferred": 0,
        }
    )
    assert lines == [
        "shop tape tier: admitted 2, deferred 0",
        "shop night of 2026-12-04: admitted 0, deferred 1 (replays reserved 3/3)",
        "shop: already admitted tonight: 3",
        "shop replicate tier: admitted 1, deferred 0",
    ]


def test_a_skipped_night_says_why_and_nothing_of_admissions():
    assert night_lines({**FIGURES, "skipped": "agentic replays are off"}) == [
        "shop: skipped (agentic replays are off)"
    ]
