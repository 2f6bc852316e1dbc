"""Create the reviewer, lead and admin groups with their permissions.

The role lists are frozen here as they stood when this migration was written:
a migration must not change meaning when the live roles module does. Later
migrations that only refresh the admin group reuse ``sync_groups`` from here.
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
]

ROLE_PERMISSIONS = {
    "reviewer": [*_READ, "reviews.decide_replay"],
    "lead": [*_READ, "reviews.view_trends", "reviews.view_money"],
    # Admins get every permission of both apps as they stand.
    "admin": [],
}


def groups_syncer(role_permissions):
    """A migration step giving each role exactly ``role_permissions``.

    Later migrations reuse it with their own frozen lists.
    """

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
        for role, names in role_permissions.items():
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

    return sync_groups


sync_groups = groups_syncer(ROLE_PERMISSIONS)


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0001_initial"),
        ("replayhub", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(sync_groups, migrations.RunPython.noop)]
