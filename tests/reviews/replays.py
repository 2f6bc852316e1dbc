"""Finished replays made directly in the database, as the engine would leave them."""

from __future__ import annotations

from datetime import timedelta
from itertools import count

from django.utils import timezone

from replayhub.models import (
    Comparison,
    Phase,
    Project,
    Replay,
    ReplayStatus,
    ReviewBand,
    Run,
    TestOutcome,
)

_serial = count(1)

REASONS = {
    "identical": ("same_tree", "The replay produced the same tree as the original."),
    "equivalent": ("tests_agree", "Both trees pass the project's tests."),
    "divergent": ("replay_fails_tests", "The replay's tree fails the tests."),
    "inconclusive": ("flaky_tests", "An outcome flipped across reruns."),
}

DIFF = """\
diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -1,3 +1,4 @@
 import os
-x = 1
+x = 2
+y = 3
 print(x)
"""


def make_project(slug: str = "shop") -> Project:
    project, _ = Project.objects.get_or_create(
        slug=slug, defaults={"repo_path": f"/srv/{slug}.git"}
    )
    return project


def make_replay(
    *,
    verdict: str = "equivalent",
    project: Project | None = None,
    title: str | None = None,
    model: str = "gpt-5",
    reason_code: str | None = None,
    reason: str | None = None,
    finished_ago: timedelta = timedelta(hours=1),
    queued: bool | None = None,
    run: Run | None = None,
    prompt: str = "Fix the failing checkout test.",
    diff: str = DIFF,
    original_patch: str = DIFF,
    replay_patch: str = DIFF,
    test_output: str = "4 passed in 0.12s",
    agent_output: str = "done\n",
    truncated: bool = False,
    with_comparison: bool = True,
) -> Replay:
    """A finished replay with a comparison and one test outcome per tree.

    ``queued`` defaults to whether the verdict's band would queue it (an
    inconclusive one counts as having exhausted its retries).
    """
    project = project or make_project()
    n = next(_serial)
    if run is None:
        run = Run.objects.create(
            project=project,
            external_id=f"run-{n}",
            title=f"Task {n}" if title is None else title,
            prompt=prompt,
            provider="openai",
            model=model,
            effort="high",
            original_commit="a" * 40,
            sandbox_image="python:3.12@sha256:" + "b" * 64,
        )
    code, sentence = REASONS[verdict]
    band = ReviewBand.for_verdict(verdict, retries_exhausted=True)
    if queued is False:
        band = None
    replay = Replay.objects.create(
        run=run,
        project=project,
        attempt=run.replays.count() + 1,
        status=ReplayStatus.FINISHED,
        phase=Phase.DONE,
        verdict=verdict,
        reason_code=reason_code or code,
        reason=reason or sentence,
        review_band=band,
        agent_output=agent_output,
        evidence={
            "checks": [
                {
                    "name": "trees_identical",
                    "outcome": "fail",
                    "evidence_class": "cryptographically_verified",
                    "detail": "tree hashes differ",
                },
                {
                    "name": "test_gate",
                    "outcome": "pass",
                    "evidence_class": "independently_executed",
                    "detail": "both suites ran",
                },
            ],
            "agent": {"exit_code": 0, "duration_s": 12.5, "timed_out": False},
            "warnings": [],
        },
        provenance={
            "reproducible": True,
            "original_commit": "a" * 40,
            "recorded_base": "c" * 40,
            "base": {
                "sha": "c" * 40,
                "source": "recorded",
                "trusted": True,
                "confirmed": True,
                "reason": "the base is recorded in the run",
            },
            "image": "python:3.12@sha256:" + "b" * 64,
            "image_pinned": True,
            "sandbox_config_sha256": "d" * 64,
            "project_config_sha256": "d" * 64,
            "test_command": "python -m pytest -q",
            "warnings": [],
        },
        started_at=timezone.now() - finished_ago - timedelta(minutes=5),
        finished_at=timezone.now() - finished_ago,
    )
    if with_comparison:
        Comparison.objects.create(
            replay=replay,
            identical=verdict == "identical",
            original_tree="e" * 40,
            replay_tree="f" * 40,
            diff_of_diffs=diff,
            files_changed=1,
            insertions=2,
            deletions=1,
            original_patch=original_patch,
            replay_patch=replay_patch,
            truncated=truncated,
        )
    for tree in ("original", "replay"):
        TestOutcome.objects.create(
            replay=replay,
            tree=tree,
            attempt=1,
            ran=True,
            passed=True,
            exit_code=0,
            tests_executed=4,
            tests_failed=0,
            output_tail=test_output,
            duration_s=0.4,
        )
    return replay
