"""The roles gain commenting, agreement, bulk confirmation and claim hand-off.

Frozen lists, as in 0002: a migration must not change meaning when the live
roles module does.
"""

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


def sync_groups(apps, schema_editor=None) -> None:
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after all migrations ran; they must
    # exist now so the groups can reference them on a fresh database.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None

    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    for role, names in ROLE_PERMISSIONS.items():
        group, _ = group_model.objects.get_or_create(name=role)
        if role == "admin":
            perms = permission_model.objects.filter(
                content_type__app_label__in=["replayhub", "reviews"]
            )
        else:
            perms = [
                permission_model.objects.get(
                    content_type__app_label=name.split(".")[0],
                    codename=name.split(".")[1],
                )
                for name in names
            ]
        group.permissions.set(perms)


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0004_teamwork"),
        ("replayhub", "0014_second_review_band"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(sync_groups, migrations.RunPython.noop)]
