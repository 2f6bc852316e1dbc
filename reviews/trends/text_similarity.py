"""The text tier on the trends page: mean similarity per night per target model.

Read from the text replays themselves (there are far fewer of them than of
agentic replays, and they have no rollup). A text replay's night is the night
that admitted it, else the UTC date it finished on. Only answers count: a
failed call has no similarity.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date

from django.db.models import Avg, Count, DateField, F
from django.db.models.functions import Coalesce, TruncDate

from replayhub.models import TextReplay, TextStatus
from reviews.queue_reads import model_matching
from reviews.trends.forms import TrendFilters
from reviews.trends.tables import Cell, Head, Table


def similarity_by_night(filters: TrendFilters) -> list[dict]:
    """``{night, target, mean, count}`` rows, oldest night first."""
    rows = (
        TextReplay.objects.filter(
            status=TextStatus.FINISHED, error="", similarity__isnull=False
        )
        .annotate(
            day=Coalesce(
                F("night__date"), TruncDate("finished_at"), output_field=DateField()
            )
        )
        .filter(day__gte=filters.since, day__lte=filters.until)
    )
    if filters.project_id:
        rows = rows.filter(project_id=filters.project_id)
    if filters.model:
        rows = rows.filter(model_matching(filters.model))
    return [
        {
            "night": row["day"],
            "target": f"{row['target_provider']}:{row['target_model']}",
            "mean": row["mean"],
            "count": row["count"],
        }
        for row in rows.values("day", "target_provider", "target_model")
        .annotate(mean=Avg("similarity"), count=Count("id"))
        .order_by("day", "target_provider", "target_model")
    ]


def similarity_table(rows: list[dict]) -> Table:
    """One row per night, one column per target model: ``mean (n)``."""
    targets = sorted({row["target"] for row in rows})
    by_night: dict[date, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        by_night[row["night"]][row["target"]] = row
    head = [
        Head("Night", numeric=False),
        *(
            Head(t, title=f"Mean similarity of {t}'s answers (answers)")
            for t in targets
        ),
    ]
    table_rows = []
    for night in sorted(by_night):
        cells = []
        for target in targets:
            found = by_night[night].get(target)
            text = f"{found['mean']:.3f} ({found['count']})" if found else "—"
            cells.append(Cell(text))
        table_rows.append((night.isoformat(), cells, ""))
    return Table("table-text-similarity", head, table_rows)
