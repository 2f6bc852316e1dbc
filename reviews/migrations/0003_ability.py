"""The app-wide permissions move from Review to the table-less Ability model.

The permission rows are moved, not recreated, so every group and user that
holds one keeps it.
"""

from django.db import migrations, models

CODENAMES = ["decide_replay", "view_trends", "view_money"]


def move_permissions(apps, schema_editor, source="review", target="ability"):
    content_type = apps.get_model("contenttypes", "ContentType")
    permission = apps.get_model("auth", "Permission")
    old, _ = content_type.objects.get_or_create(app_label="reviews", model=source)
    new, _ = content_type.objects.get_or_create(app_label="reviews", model=target)
    permission.objects.filter(content_type=old, codename__in=CODENAMES).update(
        content_type=new
    )


def move_back(apps, schema_editor):
    move_permissions(apps, schema_editor, source="ability", target="review")


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0002_roles"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="Ability",
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
            ],
            options={
                "permissions": [
                    ("decide_replay", "Can confirm, overturn or rerun a replay"),
                    ("view_trends", "Can read the trends dashboard"),
                    ("view_money", "Can see money budgets and costs"),
                ],
                "managed": False,
                "default_permissions": (),
            },
        ),
        migrations.AlterModelOptions(
            name="review",
            options={"ordering": ["-created_at"]},
        ),
        migrations.RunPython(move_permissions, move_back),
    ]
