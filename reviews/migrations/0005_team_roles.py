"""The roles gain commenting, agreement, bulk confirmation and claim hand-off.

Frozen lists, as in 0002: a migration must not change meaning when the live
roles module does.
"""

from importlib import import_module

from django.db import migrations

_READ = [
    "replayhub.view_project",
    "replayhub.view_run",
    "replayhub.view_replay",
    "replayhub.view_comparison",
    "replayhub.view_testoutcome",
    "replayhub.view_budget",
    "replayhub.view_night",
    "reviews.view_claim",
    "reviews.view_review",
    "reviews.view_auditevent",
    "reviews.view_comment",
    "reviews.add_comment",
]

ROLE_PERMISSIONS = {
    "reviewer": [*_READ, "reviews.decide_replay", "reviews.bulk_confirm"],
    "lead": [
        *_READ,
        "reviews.view_trends",
        "reviews.view_money",
        "reviews.view_agreement",
    ],
    "admin": [],
}


# The step of 0002, with these lists.
sync_groups = import_module("reviews.migrations.0002_roles").groups_syncer(
    ROLE_PERMISSIONS
)


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0004_teamwork"),
        ("replayhub", "0014_second_review_band"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(sync_groups, migrations.RunPython.noop)]
