"""The verdict table from DESIGN.md as one pure function.

``decide`` takes plain facts about one replay (what the harness managed, where the
base came from, whether the trees match, what the test gate saw on each tree) and
returns the verdict, a machine-readable reason code, a one-sentence reason and the
checks behind it, each labelled with the class of evidence it rests on.

The rows are evaluated top to bottom and the first match wins. Every row that
cannot be decided on evidence the sandbox produced itself ends in ``inconclusive``:
a refusal, never a judgement of the agent.
"""

from __future__ import annotations

from replayhub.verdicts.facts import (
    BASE_SOURCES,
    HARNESS_REASONS,
    INCONCLUSIVE_REASONS,
    REASON_TEXT,
    REASON_VERDICT,
    ROLLOUT_REASONS,
    TRUSTED_BASE_SOURCES,
    Check,
    EvidenceClass,
    Facts,
    Outcome,
    Reason,
    Ruling,
    SuiteResult,
    Verdict,
)
from replayhub.verdicts.table import decide

__all__ = [
    "BASE_SOURCES",
    "HARNESS_REASONS",
    "INCONCLUSIVE_REASONS",
    "REASON_TEXT",
    "REASON_VERDICT",
    "ROLLOUT_REASONS",
    "TRUSTED_BASE_SOURCES",
    "Check",
    "EvidenceClass",
    "Facts",
    "Outcome",
    "Reason",
    "Ruling",
    "SuiteResult",
    "Verdict",
    "decide",
]
