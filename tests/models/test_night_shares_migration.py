"""The migration that made a night's tiers rows keeps every figure: each
night's and budget's per-tier columns land on their tier's share row, and
come back on the way down."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("replayhub", "0031_tape_tier_and_rollups_by_tier")]
AFTER = [("replayhub", "0032_night_shares")]
START = datetime(2026, 6, 1, 22, tzinfo=UTC)

# Every column of the night before the migration, each with its own figure.
NIGHT = {
    "limit_replays": 101,
    "limit_sandbox_seconds": 102,
    "limit_tokens": 103,
    "limit_cost_usd": Decimal("104.5"),
    "reserved_replays": 11,
    "reserved_sandbox_seconds": 12,
    "reserved_tokens": 13,
    "reserved_cost_usd": Decimal("14.5"),
    "used_replays": 21,
    "used_sandbox_seconds": 22,
    "used_tokens": 23,
    "used_cost_usd": Decimal("24.5"),
    "deferred": 31,
    "text_limit_replays": 201,
    "text_limit_tokens": 203,
    "text_limit_cost_usd": Decimal("204.5"),
    "text_reserved_replays": 41,
    "text_reserved_tokens": 43,
    "text_reserved_cost_usd": Decimal("44.5"),
    "text_used_replays": 51,
    "text_used_tokens": 53,
    "text_used_cost_usd": Decimal("54.5"),
    "text_deferred": 32,
    "tape_limit_replays": 301,
    "tape_limit_sandbox_seconds": 302,
    "tape_reserved_replays": 61,
    "tape_reserved_sandbox_seconds": 62,
    "tape_used_replays": 71,
    "tape_used_sandbox_seconds": 72,
    "tape_deferred": 33,
}
# The same figures as the share rows must hold them.
NIGHT_SHARES = {
    "agentic": {
        "limit": (101, 102, 103, Decimal("104.5")),
        "reserved": (11, 12, 13, Decimal("14.5")),
        "used": (21, 22, 23, Decimal("24.5")),
        "deferred": 31,
    },
    "text": {
        "limit": (201, 0, 203, Decimal("204.5")),
        "reserved": (41, 0, 43, Decimal("44.5")),
        "used": (51, 0, 53, Decimal("54.5")),
        "deferred": 32,
    },
    "tape": {
        "limit": (301, 302, 0, 0),
        "reserved": (61, 62, 0, 0),
        "used": (71, 72, 0, 0),
        "deferred": 33,
    },
}
BUDGET = {
    "max_replays": 81,
    "max_sandbox_minutes": 82,
    "max_tokens": 83,
    "max_cost_usd": Decimal("84.50"),
    "text_max_replays": 91,
    "text_max_tokens": 93,
    "text_max_cost_usd": Decimal("94.50"),
    "tape_max_replays": 95,
    "tape_max_sandbox_minutes": 96,
}
BUDGET_SHARES = {
    "agentic": (81, 82, 83, Decimal("84.50")),
    "text": (91, 0, 93, Decimal("94.50")),
    "tape": (95, 96, 0, 0),
}
DIMENSIONS = ("replays", "sandbox_seconds", "tokens", "cost_usd")
SHARE_FIELDS = ("max_replays", "max_sandbox_minutes", "max_tokens", "max_cost_usd")


def migrate(executor: MigrationExecutor, targets):
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_every_nights_and_budgets_figures_move_onto_their_share_rows():
    executor = MigrationExecutor(connection)
    old = migrate(executor, BEFORE)
    project = old.get_model("replayhub", "Project").objects.create(
        slug="shop", repo_path="/srv/shop.git"
    )
    night = old.get_model("replayhub", "Night").objects.create(
        project_id=project.pk,
        date=date(2026, 6, 1),
        window_start=START,
        window_end=START.replace(hour=23),
        **NIGHT,
    )
    # A second night with nothing spent: its own rows, not the first's figures.
    empty = old.get_model("replayhub", "Night").objects.create(
        project_id=project.pk,
        date=date(2026, 6, 2),
        window_start=START,
        window_end=START.replace(hour=23),
        limit_replays=1,
        limit_sandbox_seconds=1,
        limit_tokens=1,
        limit_cost_usd=1,
    )
    budget = old.get_model("replayhub", "Budget").objects.create(
        project_id=project.pk, **BUDGET
    )

    try:
        new = migrate(executor, AFTER)
        night_shares = new.get_model("replayhub", "NightShare").objects
        found = {
            share.tier: {
                kind: tuple(getattr(share, f"{kind}_{d}") for d in DIMENSIONS)
                for kind in ("limit", "reserved", "used")
            }
            | {"deferred": share.deferred}
            for share in night_shares.filter(night_id=night.pk)
        }
        assert found == NIGHT_SHARES
        assert night_shares.filter(night_id=empty.pk).count() == 3
        assert night_shares.get(night_id=empty.pk, tier="agentic").limit_replays == 1
        budget_shares = {
            share.tier: tuple(getattr(share, f) for f in SHARE_FIELDS)
            for share in new.get_model("replayhub", "BudgetShare").objects.filter(
                budget_id=budget.pk
            )
        }
        assert budget_shares == BUDGET_SHARES

        # And back: the columns hold their figures again.
        old = migrate(executor, BEFORE)
        night = old.get_model("replayhub", "Night").objects.get(pk=night.pk)
        assert {name: getattr(night, name) for name in NIGHT} == NIGHT
        budget = old.get_model("replayhub", "Budget").objects.get(pk=budget.pk)
        assert {name: getattr(budget, name) for name in BUDGET} == BUDGET
    finally:
        migrate(executor, executor.loader.graph.leaf_nodes())
