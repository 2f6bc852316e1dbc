"""What a tape replay's verdict says: which drift it rules out. Pure.

A tape replay gives the agent the original run's own model answers, so its
verdict speaks of the environment and the harness, not the model: a
reproduction says they reproduce the run; a divergence points at them.
"""

from __future__ import annotations

from dataclasses import replace

from replayhub.verdicts.facts import Reason, Ruling, Verdict

REPRODUCED = (
    "Replayed from the original's tape: the environment and harness reproduce "
    "this run given the same model answers."
)
ENVIRONMENT = (
    "Replayed from the original's tape: the model's answers were the "
    "original's, so the difference lies in the environment (the base, its "
    "tools and tests, the harness), not the model."
)


def on_tape(ruling: Ruling, *, left_at: int | None) -> Ruling:
    """``ruling`` of a tape replay, its reason saying which drift it rules out.

    ``left_at`` is the call (1-based) from which a replay that went on live
    asked the model; such a replay rules nothing out and says so.
    """
    if ruling.reason_code == Reason.TAPE_DIVERGED:
        return ruling
    if left_at == 1:
        said = (
            "The agent left the tape at call 1, so every call went to the model: "
            "this was a live replay at the model's full cost, not a tape replay, "
            "and its verdict does not separate the model from the environment."
        )
    elif left_at is not None:
        said = (
            f"The agent left the tape at call {left_at}; from there the model "
            "was asked live, so this verdict does not separate the model from "
            "the environment."
        )
    elif ruling.verdict in (Verdict.IDENTICAL, Verdict.EQUIVALENT):
        said = REPRODUCED
    elif ruling.verdict == Verdict.DIVERGENT:
        said = ENVIRONMENT
    else:
        return ruling
    return replace(ruling, reason=f"{ruling.reason} {said}")
