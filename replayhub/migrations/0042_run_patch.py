"""Imported patches live with their run: ``RunPatch``, and the patches of the
runs imported before it, read from the commits those imports wrote into the
project's repository.

A run whose imported commit this host can read (the project's path, or this
host's mirror of its remote) gets the commit's diff from its base stored as
its patch, once that diff applied at the base makes the commit's own tree
again. Any other run (its commit gone, its mirror on another host, a diff
that does not make the same tree) is left as it was: its replays read the
original from the repository as before, and where it is missing there they
say so (``fixture_failed``, the original not in the project repository).
Nothing is written to any repository; the ``refs/replayhub/imported/`` refs
earlier imports left are no longer read, and may be deleted once the runs
that need them have their patch.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from replayhub.git import mirrors
from replayhub.git.patches import (
    PatchRefused,
    borrowing,
    commit_patch,
    patched_tree,
)
from replayhub.git.scratch import GitError, git, repository_git_dir, require_sha


def _git_dir(project: Any, mirror_root: Path) -> Path | None:
    """Where this host reads the project's history, without fetching."""
    try:
        if not mirrors.is_remote(project.repo_path):
            return repository_git_dir(Path(project.repo_path))
        found = mirrors.mirrors_of(mirror_root, str(project.pk))
        return repository_git_dir(found[-1]) if found else None
    except GitError:
        return None


def _patch_of(git_dir: Path, base: str, commit: str) -> tuple[str, str] | None:
    """The patch and tree of an imported commit, when its diff from the base
    applied at the base makes the commit's tree again."""
    try:
        require_sha(base)
        require_sha(commit)
        patch = commit_patch(git_dir, base, commit)
        if patch is None:
            return None
        tree = git("rev-parse", f"{commit}^{{tree}}", git_dir=git_dir)
        made = tree.stdout.decode().strip()
        with borrowing(git_dir) as scratch:
            again = patched_tree(scratch, base, patch)
    except (ValueError, GitError, PatchRefused):
        return None
    return (patch, made) if again == made else None


def move_patches(
    project_model: Any, run_model: Any, patch_model: Any, *, mirror_root: Path
) -> Counter[str]:
    """Store the patch of each imported run that has none and whose commit
    this host reads; how many were ``moved``, ``kept`` as they were (commit
    gone or not the import's) or ``unread`` (no repository on this host)."""
    counts: Counter[str] = Counter()
    for project in project_model.objects.order_by("pk"):
        runs = list(
            run_model.objects.filter(
                project=project, patch__isnull=True, raw__has_key="transcript"
            )
            .exclude(original_commit="")
            .exclude(base_sha="")
            .values_list("pk", "base_sha", "original_commit")
        )
        if not runs:
            continue
        git_dir = _git_dir(project, mirror_root)
        if git_dir is None:
            counts["unread"] += len(runs)
            continue
        made = []
        for pk, base, commit in runs:
            found = _patch_of(git_dir, base, commit)
            if found is None:
                counts["kept"] += 1
                continue
            made.append(patch_model(run_id=pk, patch=found[0], tree=found[1]))
        if made:
            patch_model.objects.bulk_create(made, ignore_conflicts=True, batch_size=100)
            counts["moved"] += len(made)
    return counts


def forwards(apps: Any, schema_editor: Any) -> None:
    move_patches(
        apps.get_model("replayhub", "Project"),
        apps.get_model("replayhub", "Run"),
        apps.get_model("replayhub", "RunPatch"),
        mirror_root=Path(settings.REPLAYHUB_MIRROR_DIR),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("replayhub", "0041_replicates"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunPatch",
            fields=[
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="patch",
                        serialize=False,
                        to="replayhub.run",
                    ),
                ),
                ("patch", models.TextField()),
                ("tree", models.CharField(max_length=64)),
            ],
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
