"""A replay with a cached environment beside the same replay without any, on a
1,000-file repository.

Two projects on one repository and one run each, alike but for the setup
phase: ``plain`` has none; ``env`` has a setup command that leaves a small
``bin/`` in ``$REPLAYHUB_ENV_DIR``. The first replay of each is a warm-up (it
builds the environment and caches the original tree's test result); every
later one is timed, alternating the two projects:

- **figure**: a whole replay (``services.replay_execute``) of ``env``: the
  environment's key (the setup inputs at the base), the cache look-up and its
  lock, the read-only mount in the agent's and the test's sandboxes;
- **floor**: the same replay of ``plain``.

Setup must run once per key however many replays share it: each ``env``
replay's evidence says whether its environment came from the cache, and
exactly one (the warm-up) may say it did not; anything else stops the
benchmark with status 1.

Goal: the cached environment costs at most 10% (ratio <= 1.10). ``--quick``
(50 files, 2 runs) checks the setup count and prints the figures but does not
fail on the goal. SQLite in a temporary var dir; DATABASE_URL is ignored.

    .venv/bin/python benchmarks/environment.py [--runs 7] [--files 1000] [--quick]
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/; the project root replaces it.
sys.path[0] = str(ROOT)
# Importing replay_overhead makes the temporary var dir and sets Django up on a
# SQLite database inside it.
os.environ.pop("DATABASE_URL", None)
os.environ.setdefault("LOG_LEVEL", "WARNING")

from benchmarks.replay_overhead import (  # noqa: E402
    BENCH_VAR,
    bench_run,
    judged,
    make_repository,
    run_main,
    summary,
    timed,
)
from benchmarks.support import record  # noqa: E402
from replayhub import services  # noqa: E402
from replayhub.models import Replay, Run  # noqa: E402

GOAL_RATIO = 1.10
SETUP = [
    "sh",
    "-c",
    'mkdir -p "$REPLAYHUB_ENV_DIR/bin" && printf "#!/bin/sh\\necho tool\\n" '
    '> "$REPLAYHUB_ENV_DIR/bin/tool" && chmod +x "$REPLAYHUB_ENV_DIR/bin/tool"',
]


def replay_once(run: Run) -> tuple[float, Replay]:
    replay = services.replay_create(run=run, trigger="command")
    seconds = timed(lambda: services.replay_execute(replay_id=replay.pk))
    return seconds, Replay.objects.get(pk=replay.pk)


def measure(*, runs: int, files: int, enforce: bool) -> int:
    repo = BENCH_VAR / "repo"
    base, original = make_repository(repo, files)
    plain = bench_run("plain", repo, base, original)
    with_env = bench_run("env", repo, base, original, setup_command=SETUP)

    figure, floor = [], []
    built = 0
    for i in range(runs + 1):
        seconds_env, replay = replay_once(with_env)
        seconds_plain, other = replay_once(plain)
        environment = replay.evidence.get("environment") or {}
        if not environment or "environment" in other.evidence:
            print(f"replay {replay.pk}: no environment recorded where one was due")
            return 1
        built += not environment["cached"]
        if replay.verdict != other.verdict:
            print(f"verdicts differ: {replay.reason_code} / {other.reason_code}")
            return 1
        if i:  # the first round builds the environment and warms caches
            figure.append(seconds_env)
            floor.append(seconds_plain)
    print(
        f"repository: {files} files; {runs + 1} replays with an environment, "
        f"setup ran {built} time(s); last verdict {replay.verdict}/"
        f"{replay.reason_code}"
    )
    if built != 1:
        print("setup must run exactly once for one key")
        return 1
    print(summary("cached environment", figure, 22))
    print(summary("no environment", floor, 22))
    ratio = statistics.median(figure) / statistics.median(floor)
    print(f"ratio environment/none {ratio:.2f}x (goal <= {GOAL_RATIO:.2f}x)")
    record(
        "environment",
        f"replay with a cached setup environment, {files:,} files",
        unit="ms",
        samples=[x * 1000 for x in figure],
        floor="the same replay, no setup phase",
        floor_samples=[x * 1000 for x in floor],
        goal=f"<= {GOAL_RATIO:.2f}x floor",
        holds=ratio <= GOAL_RATIO if enforce else None,
    )
    return judged(ratio <= GOAL_RATIO, enforce=enforce)


def main() -> int:
    return run_main(measure)


if __name__ == "__main__":
    sys.exit(main())
