from django.db import migrations, models

# The wide columns: prompts, outputs, records and patches. PostgreSQL compresses
# a value that makes its row too large for a page; lz4 does it several times
# faster than the default pglz at a similar ratio, which a bulk import of runs
# feels on every row. Only values written after this take it up.
WIDE = {
    "run": ["prompt", "output", "raw"],
    "replay": ["agent_output"],
    "comparison": ["diff_of_diffs", "original_patch", "replay_patch"],
    "testoutcome": ["output_tail"],
}


def _supported(connection, method):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s = ANY(enumvals) FROM pg_settings "
            "WHERE name = 'default_toast_compression'",
            [method],
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def set_compression(method):
    def apply(apps, schema_editor):
        connection = schema_editor.connection
        if connection.vendor != "postgresql":
            return
        if method != "default" and not _supported(connection, method):
            return  # a server built without lz4 keeps its default
        quote = schema_editor.quote_name
        for model_name, fields in WIDE.items():
            model = apps.get_model("replayhub", model_name)
            columns = ", ".join(
                f"ALTER COLUMN {quote(model._meta.get_field(name).column)} "
                f"SET COMPRESSION {method}"
                for name in fields
            )
            schema_editor.execute(
                f"ALTER TABLE {quote(model._meta.db_table)} {columns}"
            )

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("replayhub", "0006_leaner_run_indexes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="run",
            name="raw",
            field=models.JSONField(
                default=dict,
                help_text="The record as received, less the prompt and output kept "
                "verbatim in their own columns.",
            ),
        ),
        migrations.RunPython(set_compression("lz4"), set_compression("default")),
    ]
