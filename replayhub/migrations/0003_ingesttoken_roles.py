"""Give the admin group the permissions of the new IngestToken model."""

from importlib import import_module

from django.db import migrations

# The frozen role lists of the migration that created the groups.
sync_groups = import_module("reviews.migrations.0002_roles").sync_groups


class Migration(migrations.Migration):
    dependencies = [
        ("replayhub", "0002_ingesttoken"),
        ("reviews", "0002_roles"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(sync_groups, migrations.RunPython.noop)]
