"""Model builders for the tests: people, projects, runs and replays, made
directly in the database as ReplayHub would have left them.

One builder per kind of row; keyword arguments change only what a test is
about. The scripted calculator's repository and the rollout environment's
are built in ``tests/scripted.py`` and ``tests/harness.py``.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from itertools import count
from typing import Any

from django.contrib.auth.models import Group, User
from django.utils import timezone

from replayhub import roles
from replayhub.models import (
    Budget,
    BudgetShare,
    Comparison,
    Night,
    NightShare,
    Phase,
    Project,
    Replay,
    ReplayStatus,
    ReviewBand,
    Run,
    RunSource,
    Seed,
    TestOutcome,
)
from tests.gitrepos import Repo

# --- people --------------------------------------------------------------------


def make_user(username: str, role: str | None) -> User:
    """A user in ``role``'s group (in none with ``None``); password ``pw-<name>``."""
    if role and not Group.objects.filter(name=role).exists():
        # A transactional test flushed the tables the data migration filled.
        from django.apps import apps

        roles.sync_groups(apps)
    user = User.objects.create_user(username=username, password="pw-" + username)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


def make_superuser(username: str = "root", email: str = "root@example.com") -> User:
    """A Django superuser, password ``pw-<name>``."""
    return User.objects.create_superuser(username, email, "pw-" + username)


# --- projects --------------------------------------------------------------------


def make_project(
    slug: str = "shop", *, tz: str | None = None, start_hour: int = 1
) -> Project:
    """A project with no repository behind it (``/srv/<slug>.git``), made once
    per slug; with ``tz``, a Budget whose night starts at ``start_hour`` there."""
    project, _ = Project.objects.get_or_create(
        slug=slug, defaults={"repo_path": f"/srv/{slug}.git"}
    )
    if tz is not None:
        Budget.objects.update_or_create(
            project=project,
            defaults={
                "timezone": tz,
                "window_start_hour": start_hour,
                "window_end_hour": (start_hour + 5) % 24,
            },
        )
    return project


def make_git_project(repo: Repo, slug: str = "shop", **fields: Any) -> Project:
    """A project on a real repository, set up as native records expect it: a
    pytest suite and the sandbox config the records name."""
    return Project.objects.create(
        **{
            "slug": slug,
            "name": slug,
            "repo_path": str(repo.path),
            "test_command": ["python3", "-m", "pytest", "-q"],
            "agent_command": ["sh", "agent.sh"],
            "sandbox_config_sha256": "c" * 64,
            **fields,
        }
    )


def make_calc_project(repo: Repo, **overrides: Any) -> Project:
    """The scripted calculator project (``tests/scripted.py``) on ``repo``."""
    fields = {
        "slug": "calc",
        "repo_path": str(repo.path),
        "test_command": ["python3", "-m", "unittest", "-v"],
        "agent_command": ["sh", "agent.sh"],
        "allowed_paths": ["calc.py", "test_*.py"],
        "time_limit_seconds": 30,
        "memory_limit_mb": 512,
        **overrides,
    }
    return Project.objects.create(**fields)


def make_rollout_project(repo: Repo, **overrides: Any) -> Project:
    """The rollout environment's project (``tests/harness.py``) on ``repo``."""
    fields = {
        "slug": "invoicer",
        "repo_path": str(repo.path),
        "time_limit_seconds": 30,
        "memory_limit_mb": 512,
        **overrides,
    }
    return Project.objects.create(**fields)


# --- runs ------------------------------------------------------------------------


def make_calc_run(
    project: Project, *, prompt: str, original: str, base: str = "", **kw: Any
) -> Run:
    """A run of the scripted agent: its prompt names what the agent does."""
    return Run.objects.create(
        project=project,
        external_id=kw.pop("external_id", prompt.split()[0]),
        title=kw.pop("title", f"replay {prompt}"),
        prompt=prompt,
        original_commit=original,
        base_sha=base,
        **kw,
    )


def make_text_run(
    project: Project | None = None,
    *,
    external_id: str = "run-1",
    prompt: str = "add a retry to the webhook sender",
    output: str = "add a retry to the webhook sender",
    **fields: Any,
) -> Run:
    """A recorded run the text tier can replay (in ``make_project()``'s by default)."""
    project = project or make_project()
    values = {
        "title": f"Run {external_id}",
        "model": "claude-sonnet",
        "preflight": "ready",
        **fields,
    }
    return Run.objects.create(
        project=project, external_id=external_id, prompt=prompt, output=output, **values
    )


def make_runs(
    project: Project, n: int, *, now: datetime, prefix: str = "run", **fields: Any
) -> list[Run]:
    """``n`` runs ready to replay, imported a minute apart a month before ``now``."""
    return [
        Run.objects.create(
            project=project,
            external_id=f"{prefix}-{i}",
            original_commit="a" * 40,
            preflight="ready",
            imported_at=now - timedelta(days=30) + timedelta(minutes=i),
            **fields,
        )
        for i in range(n)
    ]


def make_rollout(project: Project, *, external_id: str, reward: float | None, seeds):
    """A rollout run with its seeds: (messages, continuation, completion) each."""
    run = Run.objects.create(
        project=project,
        external_id=external_id,
        source=RunSource.ROLLOUT,
        reward=reward,
        title="invoicer-rounding",
        model="coder-large",
        preflight="ready",
    )
    for number, (messages, continuation, completion) in enumerate(seeds, 1):
        Seed.objects.create(
            run=run,
            number=number,
            key=f"{external_id}:continue:tool-call@{number * 3}",
            kind="continue",
            anchor="tool-call",
            anchor_node=number * 3,
            messages=messages,
            continuation=continuation,
            original_completion=completion,
        )
    return run


# --- finished replays, as the engine leaves them for review ----------------------

REASONS = {
    "identical": ("same_tree", "The replay produced the same tree as the original."),
    "equivalent": ("tests_agree", "Both trees pass the project's tests."),
    "divergent": ("replay_fails_tests", "The replay's tree fails the tests."),
    "inconclusive": ("flaky_tests", "An outcome flipped across reruns."),
}

_serial = count(1)

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


def earlier_today(at_most: timedelta = timedelta(hours=1)) -> timedelta:
    """How long ago a replay finished for it to be today's (shown by its time
    alone), whatever the hour the test runs at: ``at_most`` ago, or less
    just after midnight."""
    now = timezone.localtime()
    return min(at_most, now - now.replace(hour=0, minute=0, second=0, microsecond=0))


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


# --- budgets and nights ------------------------------------------------------------


def make_budget(
    project: Project, *, shares: dict[str, dict] | None = None, **fields: Any
) -> Budget:
    """``project``'s budget with ``fields``, and a share row for each tier in
    ``shares`` (``{"agentic": {"max_replays": 3}}``; the rest of a share, and
    any tier not named, is the tier's default)."""
    from replayhub.nights.tiers import DEFAULT_SHARES

    budget = Budget.objects.create(project=project, **fields)
    for tier, limits in (shares or {}).items():
        defaults = asdict(DEFAULT_SHARES[tier]) | limits
        BudgetShare.objects.create(budget=budget, tier=tier, **defaults)
    return budget


def make_night(
    project: Project,
    *,
    start: datetime,
    hours: float = 8,
    status: str = "open",
    shares: dict[str, dict] | None = None,
) -> Night:
    """A night of ``project`` from ``start`` for ``hours``, with a share per
    tier in ``shares`` (``{"agentic": {"limit_replays": 3, "used_replays": 1}}``;
    fields not named are zero); every other tier has an empty share."""
    night = Night.objects.create(
        project=project,
        date=start.date(),
        status=status,
        window_start=start,
        window_end=start + timedelta(hours=hours),
    )
    for tier in ("tape", "text", "agentic", "replicate"):
        NightShare.objects.create(
            night=night, tier=tier, **(shares or {}).get(tier, {})
        )
    return night


def share_of(night: Night, tier: str = "agentic") -> NightShare:
    """The night's ``tier`` share as the database has it now."""
    return NightShare.objects.get(night=night, tier=tier)
