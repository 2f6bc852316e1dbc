"""A night's tiers as rows: each tier's limits, reservations, use and deferrals
move from the night's prefixed columns (``limit_*``, ``text_*``, ``tape_*``)
to one NightShare row per tier, and a budget's per-tier limits to one
BudgetShare row per tier. Every figure is copied before its column goes, and
back again on the way down."""

import django.db.models.deletion
from django.db import migrations, models

TIERS = [("tape", "Tape"), ("text", "Text"), ("agentic", "Agentic")]
DIMENSIONS = ("replays", "sandbox_seconds", "tokens", "cost_usd")

# Where each share's figure was: a night's column per (tier, share field), or
# None where the tier had no such column (a dimension it does not budget).
NIGHT_COLUMNS = {
    "agentic": {
        **{
            f"{kind}_{d}": f"{kind}_{d}"
            for kind in ("limit", "reserved", "used")
            for d in DIMENSIONS
        },
        "deferred": "deferred",
    },
    "text": {
        **{
            f"{kind}_{d}": None if d == "sandbox_seconds" else f"text_{kind}_{d}"
            for kind in ("limit", "reserved", "used")
            for d in DIMENSIONS
        },
        "deferred": "text_deferred",
    },
    "tape": {
        **{
            f"{kind}_{d}": f"tape_{kind}_{d}"
            if d in ("replays", "sandbox_seconds")
            else None
            for kind in ("limit", "reserved", "used")
            for d in DIMENSIONS
        },
        "deferred": "tape_deferred",
    },
}
BUDGET_COLUMNS = {
    "agentic": {
        "max_replays": "max_replays",
        "max_sandbox_minutes": "max_sandbox_minutes",
        "max_tokens": "max_tokens",
        "max_cost_usd": "max_cost_usd",
    },
    "text": {
        "max_replays": "text_max_replays",
        "max_sandbox_minutes": None,
        "max_tokens": "text_max_tokens",
        "max_cost_usd": "text_max_cost_usd",
    },
    "tape": {
        "max_replays": "tape_max_replays",
        "max_sandbox_minutes": "tape_max_sandbox_minutes",
        "max_tokens": None,
        "max_cost_usd": None,
    },
}
BATCH = 1000


def _rows_to_shares(rows, owner: str, columns: dict, share_model) -> list:
    return [
        share_model(
            **{f"{owner}_id": row["id"], "tier": tier},
            **{field: row[column] if column else 0 for field, column in fields.items()},
        )
        for row in rows
        for tier, fields in columns.items()
    ]


def _copy(apps, owner_name: str, share_name: str, columns: dict) -> None:
    owner = apps.get_model("replayhub", owner_name)
    share = apps.get_model("replayhub", share_name)
    names = sorted({c for fields in columns.values() for c in fields.values() if c})
    rows = owner.objects.order_by("id").values("id", *names)
    batch = []
    for row in rows.iterator(chunk_size=BATCH):
        batch.append(row)
        if len(batch) == BATCH:
            share.objects.bulk_create(
                _rows_to_shares(batch, owner_name, columns, share)
            )
            batch = []
    share.objects.bulk_create(_rows_to_shares(batch, owner_name, columns, share))


def _copy_back(apps, owner_name: str, share_name: str, columns: dict) -> None:
    owner = apps.get_model("replayhub", owner_name)
    share = apps.get_model("replayhub", share_name)
    for row in share.objects.order_by("id").iterator(chunk_size=BATCH):
        fields = columns[row.tier]
        owner.objects.filter(pk=getattr(row, f"{owner_name}_id")).update(
            **{
                column: getattr(row, field)
                for field, column in fields.items()
                if column
            }
        )


def forward(apps, schema_editor):
    _copy(apps, "night", "nightshare", NIGHT_COLUMNS)
    _copy(apps, "budget", "budgetshare", BUDGET_COLUMNS)


def backward(apps, schema_editor):
    _copy_back(apps, "night", "nightshare", NIGHT_COLUMNS)
    _copy_back(apps, "budget", "budgetshare", BUDGET_COLUMNS)


def _removed(model_name: str, columns: dict) -> list:
    names = sorted({c for fields in columns.values() for c in fields.values() if c})
    return [migrations.RemoveField(model_name=model_name, name=n) for n in names]


class Migration(migrations.Migration):
    dependencies = [
        ("replayhub", "0031_tape_tier_and_rollups_by_tier"),
    ]

    operations = [
        migrations.CreateModel(
            name="BudgetShare",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("tier", models.CharField(choices=TIERS, max_length=16)),
                ("max_replays", models.PositiveIntegerField(default=0)),
                ("max_sandbox_minutes", models.PositiveIntegerField(default=0)),
                ("max_tokens", models.PositiveBigIntegerField(default=0)),
                (
                    "max_cost_usd",
                    models.DecimalField(decimal_places=2, default=0, max_digits=12),
                ),
                (
                    "budget",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="shares",
                        to="replayhub.budget",
                    ),
                ),
            ],
            options={
                "ordering": ["budget", "tier"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("budget", "tier"), name="budgetshare_unique_tier"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(tier__in=["tape", "text", "agentic"]),
                        name="budgetshare_tier_valid",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="NightShare",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("tier", models.CharField(choices=TIERS, max_length=16)),
                ("limit_replays", models.PositiveIntegerField(default=0)),
                ("limit_sandbox_seconds", models.PositiveBigIntegerField(default=0)),
                ("limit_tokens", models.PositiveBigIntegerField(default=0)),
                (
                    "limit_cost_usd",
                    models.DecimalField(decimal_places=4, default=0, max_digits=12),
                ),
                ("reserved_replays", models.PositiveIntegerField(default=0)),
                (
                    "reserved_sandbox_seconds",
                    models.PositiveBigIntegerField(default=0),
                ),
                ("reserved_tokens", models.PositiveBigIntegerField(default=0)),
                (
                    "reserved_cost_usd",
                    models.DecimalField(decimal_places=4, default=0, max_digits=12),
                ),
                ("used_replays", models.PositiveIntegerField(default=0)),
                ("used_sandbox_seconds", models.PositiveBigIntegerField(default=0)),
                ("used_tokens", models.PositiveBigIntegerField(default=0)),
                (
                    "used_cost_usd",
                    models.DecimalField(decimal_places=4, default=0, max_digits=12),
                ),
                ("deferred", models.PositiveIntegerField(default=0)),
                (
                    "night",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="shares",
                        to="replayhub.night",
                    ),
                ),
            ],
            options={
                "ordering": ["night", "tier"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("night", "tier"), name="nightshare_unique_tier"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(tier__in=["tape", "text", "agentic"]),
                        name="nightshare_tier_valid",
                    ),
                    models.CheckConstraint(
                        condition=(
                            models.Q(reserved_replays__lte=models.F("limit_replays"))
                            & models.Q(
                                reserved_sandbox_seconds__lte=models.F(
                                    "limit_sandbox_seconds"
                                )
                            )
                            & models.Q(reserved_tokens__lte=models.F("limit_tokens"))
                            & models.Q(
                                reserved_cost_usd__lte=models.F("limit_cost_usd")
                            )
                        ),
                        name="nightshare_reserved_within_limits",
                    ),
                ],
            },
        ),
        migrations.RunPython(forward, backward),
        # The night's limits had no default; with one, the step back can add
        # them again to a table that has rows (and then copy the figures in).
        migrations.AlterField(
            model_name="night",
            name="limit_replays",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="night",
            name="limit_sandbox_seconds",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="night",
            name="limit_tokens",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="night",
            name="limit_cost_usd",
            field=models.DecimalField(decimal_places=4, default=0, max_digits=12),
        ),
        migrations.RemoveConstraint(
            model_name="night", name="night_reserved_within_limits"
        ),
        migrations.RemoveConstraint(
            model_name="night", name="night_text_reserved_within_limits"
        ),
        migrations.RemoveConstraint(
            model_name="night", name="night_tape_reserved_within_limits"
        ),
        *_removed("night", NIGHT_COLUMNS),
        *_removed("budget", BUDGET_COLUMNS),
    ]
