"""Create the reviewer, lead and admin groups with their permissions."""

from django.db import migrations

from reviews.roles import sync_groups


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0001_initial"),
        ("replayhub", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(sync_groups, migrations.RunPython.noop)]
