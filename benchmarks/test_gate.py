"""Replays per minute through the test gate, with and without the original's
cached result, on a 1,000-file repository.

Each figure is one whole replay (``services.replay_execute``) of a run, with an
agent and a test command that do almost nothing (the command prints one
unittest ``-v`` line and its summary, so per-test parsing has a case to read):

- **cached**: a later attempt of a run whose earlier replay stored the original
  tree's result (``CachedResult``), which this one reuses: the original is not
  run again;
- **uncached**: the same later attempt with the project's ``CachedResult`` rows
  deleted just before it, outside the timing, so the original runs again.
  Deleting the rows changes nothing else: the run, the test command and the
  cache key stay the same (a fresh test command would change the provenance
  and the command run, too).

Both are measured for an agent that leaves the test files as the original has
them (original + replay: 2 sandboxed test runs uncached, 1 cached) and for one
that adds a test file, so the original's tests also run on a reference tree
(3 uncached, 2 cached). Every replay's ``TestOutcome`` rows are checked: one per
tree, the original's marked ``cached`` exactly when it was reused. A replay with
other rows (a rerun, a missing tree) stops the benchmark with status 1.

The floor, in the same run: what one sandboxed test run cannot avoid — a clean
copy of the tree (``git archive | tar``) and one ``bwrap … true`` start. The
cache should save about one floor per replay, and the reference run cost one.

Goal: the cached attempt at least 1.2x the replays per minute of the uncached
one (test files unchanged). ``--quick`` (50 files, 2 runs) checks the rows and
prints every figure but does not fail on the goal, since timing on a shared
machine is noise at that size. SQLite in a temporary var dir; DATABASE_URL is
ignored.

    .venv/bin/python benchmarks/test_gate.py [--runs 7] [--files 1000] [--quick]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/; the project root replaces it.
sys.path[0] = str(ROOT)
# Importing replay_overhead makes the temporary var dir and sets Django up on a
# SQLite database inside it, unless DATABASE_URL names another database.
os.environ.pop("DATABASE_URL", None)
os.environ.setdefault("LOG_LEVEL", "WARNING")

from benchmarks.replay_overhead import (  # noqa: E402
    BENCH_VAR,
    CHANGE,
    bench_run,
    judged,
    make_repository,
    run_main,
    timed,
)
from benchmarks.support import record  # noqa: E402
from replayhub import services  # noqa: E402
from replayhub.models import CachedResult, Run, TestOutcome  # noqa: E402
from replayhub.sandbox import SandboxSpec, get_runner  # noqa: E402

GOAL_RATIO = 1.2
TEST_COMMAND = [
    "printf",
    "%s\\n",
    "test_value (bench.tests.BenchTest.test_value) ... ok",
    "",
    "Ran 1 test in 0.000s",
    "",
    "OK",
]
# name -> (agent command, the trees the test gate runs)
CASES = {
    "same": (["sh", "-c", CHANGE], ("original", "replay")),
    "added": (
        ["sh", "-c", f"{CHANGE} && echo 'X = 1' > pkg0/test_mod0.py"],
        ("original", "reference", "replay"),
    ),
}
LABELS = {"same": "test files as original", "added": "a test file added"}


def seed_run(name: str, repo: Path, base: str, original: str) -> Run:
    agent, _ = CASES[name]
    return bench_run(
        f"bench-{name}",
        repo,
        base,
        original,
        agent_command=agent,
        test_command=TEST_COMMAND,
    )


def replay_once(name: str, run: Run, *, cached: bool) -> tuple[float, str]:
    """Seconds and verdict of one replay of ``run``, its test rows checked."""
    if cached:
        if not CachedResult.objects.filter(project=run.project).exists():
            sys.exit(f"{name}: no CachedResult after a replay that ran the original")
    else:
        CachedResult.objects.filter(project=run.project).delete()
    replay = services.replay_create(run=run, trigger="command")
    seconds = timed(lambda: services.replay_execute(replay_id=replay.pk))
    rows = sorted(
        TestOutcome.objects.filter(replay=replay).values_list(
            "tree", "attempt", "cached"
        )
    )
    _, trees = CASES[name]
    expected = [(tree, 1, cached and tree == "original") for tree in trees]
    if rows != expected:
        sys.exit(f"{name}, cached={cached}: test rows {rows}, expected {expected}")
    replay.refresh_from_db()
    return seconds, f"{replay.verdict}/{replay.reason_code}"


def test_run_floor(repo: Path, tree: str, work: Path) -> None:
    """A clean copy of ``tree`` and one sandbox start in it, then removed."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    archive = subprocess.Popen(
        ["git", "-C", str(repo), "archive", tree], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", str(work)], stdin=archive.stdout, check=True)
    archive.stdout.close()
    archive.wait()
    get_runner("bwrap").run(SandboxSpec(argv=("true",), workspace=work))
    shutil.rmtree(work, ignore_errors=True)


def row(label: str, runs: str, samples: list[float]) -> str:
    median = statistics.median(samples)
    return (
        f"{label:<34} {runs:>9}  {median:6.3f} {min(samples):6.3f} "
        f"{max(samples):6.3f}  {60 / median:8.1f}"
    )


def measure(*, runs: int, files: int, enforce: bool) -> int:
    repo = BENCH_VAR / "repo"
    base, original = make_repository(repo, files)
    bench_runs = {name: seed_run(name, repo, base, original) for name in CASES}
    samples: dict[tuple[str, bool], list[float]] = {
        (name, cached): [] for name in CASES for cached in (False, True)
    }
    verdicts: dict[tuple[str, bool], set[str]] = {key: set() for key in samples}
    floor = []
    # Each run's first attempt, untimed, warms the caches: every timed replay
    # is a later attempt. Uncached and cached attempts alternate, so drift on
    # the machine hits both.
    for name, run in bench_runs.items():
        verdicts[name, False].add(replay_once(name, run, cached=False)[1])
    for _ in range(runs):
        for name, run in bench_runs.items():
            for cached in (False, True):
                seconds, verdict = replay_once(name, run, cached=cached)
                verdicts[name, cached].add(verdict)
                samples[name, cached].append(seconds)
        floor.append(timed(lambda: test_run_floor(repo, original, BENCH_VAR / "floor")))

    print(f"repository: {files} files; {runs} replays per figure")
    print(f"{'':<34} {'test runs':>9}  {'s per replay':<20}  replays/min")
    print(f"{'':<34} {'':>9}  {'median    min    max':<20}")
    for name, (_, trees) in CASES.items():
        for cached in (True, False):
            executed = len(trees) - cached
            label = f"{LABELS[name]}, {'cached' if cached else 'uncached'}"
            print(row(label, str(executed), samples[name, cached]))
    print(row("floor: checkout + bwrap true", "1", floor))
    print(
        "verdicts: "
        + "; ".join(
            f"{name} {'cached' if cached else 'uncached'} "
            + ",".join(sorted(verdicts[name, cached]))
            for name, cached in samples
        )
    )

    median = {key: statistics.median(values) for key, values in samples.items()}
    one_run = statistics.median(floor)
    ratio = median["same", False] / median["same", True]
    print(
        f"ratio cached/uncached {ratio:.2f}x replays per minute "
        f"(goal >= {GOAL_RATIO}x); with a test file added "
        f"{median['added', False] / median['added', True]:.2f}x"
    )
    saved = median["same", False] - median["same", True]
    reference = median["added", False] - median["same", False]
    print(
        f"the cache saves {saved:.3f} s per replay ({saved / one_run:.1f} floors); "
        f"the reference run costs {reference:.3f} s ({reference / one_run:.1f} floors)"
    )
    per_minute = {key: [60 / x for x in values] for key, values in samples.items()}
    record(
        "test_gate",
        f"replays/min, original's result cached, {files:,} files",
        unit="replays/min",
        samples=per_minute["same", True],
        floor="the same replay uncached (baseline)",
        floor_samples=per_minute["same", False],
        goal=f">= {GOAL_RATIO}x baseline",
        holds=(ratio >= GOAL_RATIO) if enforce else None,
    )
    record(
        "test_gate",
        f"replays/min, a test file added (reference run), {files:,} files",
        unit="replays/min",
        samples=per_minute["added", False],
        floor="test files as the original's (baseline)",
        floor_samples=per_minute["same", False],
        goal="",
        holds=None,
    )
    return judged(ratio >= GOAL_RATIO, enforce=enforce)


def main() -> int:
    return run_main(measure)


if __name__ == "__main__":
    sys.exit(main())
