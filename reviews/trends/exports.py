"""The rollups as data: CSV and JSON downloads and ``GET /api/v1/trends``.

The JSON export and the API share ``export_payload``; the rows are the
filtered rollup rows themselves, not the dashboard's nightly sums.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from replayhub.replicates.passk import TRIES
from reviews.together.labels import label_counts
from reviews.together.past import Period
from reviews.together.quality import decided
from reviews.trends.forms import TrendFilters
from reviews.trends.queries import rollups
from reviews.trends.reproducibility import Group, reproducibility
from reviews.trends.series import VERDICTS

EXPORT_COUNTS = [
    "attempted",
    "identical",
    "equivalent",
    "divergent",
    "inconclusive",
    "deferred",
]


def export_rows(filters: TrendFilters) -> list[dict[str, Any]]:
    """The filtered rollup rows as plain values, by night, project and model."""
    rows = (
        rollups(filters)
        .values(
            "date",
            "project__slug",
            "model",
            "source",
            "tier",
            *EXPORT_COUNTS,
            "by_reason",
            "confirmed",
            "overturned",
        )
        .order_by("date", "project__slug", "model", "source", "tier")
    )
    return [
        {
            "date": row["date"].isoformat(),
            "project": row["project__slug"],
            "model": row["model"],
            "source": row["source"],
            "tier": row["tier"],
            **{name: row[name] for name in EXPORT_COUNTS},
            "reached": row["attempted"] - row["inconclusive"],
            "by_reason": row["by_reason"] or {},
            "confirmed": row["confirmed"] or {},
            "overturned": row["overturned"] or {},
        }
        for row in rows
    ]


def export_payload(filters: TrendFilters) -> dict[str, Any]:
    """The JSON export and ``GET /api/v1/trends``: the filters and their rows."""
    return {
        "filters": filters.as_json(),
        "rules": {
            "attempted": "finished replays; identical + equivalent + divergent "
            "+ inconclusive",
            "reached": "attempted - inconclusive",
            "by_reason": "reason codes of inconclusive replays",
            "confirmed/overturned": "latest human decision per replay, keyed by "
            "the automated verdict",
            "deferred": "runs deferred by the budget; only on the row with model "
            '"" and source "code"',
            "source": '"code" (recorded agent changes) or "rollout" (verifiers '
            "rollouts); their replays are counted on separate rows",
            "tier": '"agentic" (live model calls) or "tape" (the model\'s answers '
            "served from a tape); counted on separate rows, and deferred only "
            'on an "agentic" row',
            "labels": "label values given with decisions made in the window "
            "(decisions taken back and gold checks excluded), per project",
            "reproducibility": "runs with a replicate, by project, agent, model "
            "and tier: samples pooled (identical and equivalent succeed, "
            "divergent fails, inconclusive apart), Wilson's 90 % interval, and "
            "pass^k for k = 1..5, the mean over runs with at least k samples of "
            "C(c, k) / C(n, k); null where no run has k",
        },
        "rollups": export_rows(filters),
        "labels": labels_given(filters),
        # Read from the replays: docs/replicates.md, reviews.trends.reproducibility.
        "reproducibility": [g.as_json() for g in reproducibility(filters)],
    }


def labels_given(filters: TrendFilters) -> list[dict]:
    """Label values given with decisions in the filters' nights and project
    (the model and source filters do not apply: a label is a decision's)."""
    period = Period(
        since=filters.since, until=filters.until, project_id=filters.project_id
    )
    rows = decided(period).exclude(replay__project_id__in=filters.hidden_project_ids)
    return label_counts(rows)


# Spreadsheets run a cell that starts with one of these as a formula; model
# names and reason codes are data from records, so such cells are quoted.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def export_csv(rows: Sequence[dict[str, Any]]) -> str:
    """One line per rollup row; reason and decision counts get a column each."""
    reasons = sorted({key for row in rows for key in row["by_reason"]})
    header = [
        "date",
        "project",
        "model",
        "source",
        "tier",
        *EXPORT_COUNTS,
        "reached",
        *(f"reason:{reason}" for reason in reasons),
        *(f"confirmed:{verdict}" for verdict in VERDICTS),
        *(f"overturned:{verdict}" for verdict in VERDICTS),
    ]
    return _csv(
        header,
        (
            [
                row["date"],
                row["project"],
                row["model"],
                row["source"],
                row["tier"],
                *(row[name] for name in EXPORT_COUNTS),
                row["reached"],
                *(row["by_reason"].get(reason, 0) for reason in reasons),
                *(row["confirmed"].get(v, 0) for v in VERDICTS),
                *(row["overturned"].get(v, 0) for v in VERDICTS),
            ]
            for row in rows
        ),
    )


def _csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """``header`` and ``rows`` as CSV, each cell quoted as ``_cell`` says."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for row in itertools.chain([header], rows):
        writer.writerow([_cell(value) for value in row])
    return out.getvalue()


def reproducibility_csv(groups: Sequence[Group]) -> str:
    """One line per group of replicated runs, as the trends page's table."""
    header = [
        "project",
        "agent",
        "model",
        "tier",
        "runs",
        "successes",
        "failures",
        "inconclusive",
        "rate",
        "interval_low",
        "interval_high",
        *(f"pass^{k}" for k in TRIES),
    ]
    return _csv(header, (_group_cells(group, header[:8]) for group in groups))


def _group_cells(group: Group, names: Sequence[str]) -> list[Any]:
    row = group.as_json()
    low, high = row["interval"] or ("", "")
    rate = "" if row["rate"] is None else round(row["rate"], 4)
    passes = ["" if v is None else v for v in row["pass_k"].values()]
    return [*(row[name] for name in names), rate, low, high, *passes]
