"""The per-test table of a replay: each test's outcome on the original and on the
run that judges the replay, failures first. Pure: plain rows in, plain rows out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Rows shown on the page; the rest is counted.
MAX_ROWS = 500
_FAILING = {"failed", "error"}


@dataclass(frozen=True)
class CaseRow:
    test_id: str
    original: str  # an outcome, or "" when the run did not report the test
    judged: str
    own: str  # the replay's own suite, shown when a reference run judged it
    excerpt: str

    @property
    def regressed(self) -> bool:
        return self.original == "passed" and self.judged != "passed"


@dataclass(frozen=True)
class CaseTable:
    rows: tuple[CaseRow, ...] = ()
    hidden: int = 0
    with_own: bool = False

    def __bool__(self) -> bool:
        return bool(self.rows)


def _by_id(cases: Sequence[Sequence] | None) -> dict[str, Sequence]:
    return {str(case[0]): case for case in cases or ()}


def case_table(
    firsts: Mapping[str, Sequence[Sequence] | None], *, max_rows: int = MAX_ROWS
) -> CaseTable:
    """Rows from the first attempt's stored cases of each tree
    (``[id, outcome, seconds, excerpt]``): failures on the judging run first,
    then tests missing from it, then the rest by id."""
    judged_tree = "reference" if firsts.get("reference") is not None else "replay"
    original = _by_id(firsts.get("original"))
    judged = _by_id(firsts.get(judged_tree))
    own = _by_id(firsts.get("replay")) if judged_tree == "reference" else {}
    rows = []
    for test_id in original.keys() | judged.keys() | own.keys():
        mine = judged.get(test_id)
        theirs = original.get(test_id)
        failing = next(
            (c for c in (mine, theirs) if c is not None and c[1] in _FAILING), None
        )
        rows.append(
            CaseRow(
                test_id=test_id,
                original=theirs[1] if theirs else "",
                judged=mine[1] if mine else "",
                own=own[test_id][1] if test_id in own else "",
                excerpt=str(failing[3] or "") if failing else "",
            )
        )

    def order(row: CaseRow) -> tuple:
        return (
            0 if row.judged in _FAILING else 1 if row.judged == "" else 2,
            0 if row.regressed else 1,
            row.test_id,
        )

    rows.sort(key=order)
    return CaseTable(
        rows=tuple(rows[:max_rows]),
        hidden=max(len(rows) - max_rows, 0),
        with_own=judged_tree == "reference",
    )
