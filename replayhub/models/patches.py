"""Patches: the change of an imported run that came as a patch, not a commit."""

from __future__ import annotations

from django.db import models

from replayhub.models.projects import Run


class RunPatch(models.Model):
    """The patch a run's original is: a SWE-bench prediction's or an agent's
    submission, applied at the run's base.

    The project's repository is only read, so the commit the patch makes
    (``Run.original_commit``, the same on every host: fixed author and dates)
    is written nowhere; a replay applies the patch in its own scratch
    repository and compares with that. ``tree`` is what the patch made at
    import, and a replay that makes another says so.
    """

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="patch"
    )
    patch = models.TextField()
    tree = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"{self.run_id}: {len(self.patch):,} characters"
