"""Overhead of one replay, beside its floor, on a 1,000-file repository.

The figure: one whole replay (provision, agent sandbox, capture, compare, two
test-gate sandboxes, persist) with an agent and a test command that do almost
nothing, so what is measured is ReplayHub's own work.

The floor, measured in the same run: the raw commands that the same work cannot
avoid — ``git clone --shared`` + checkout, three ``bwrap … true`` sandbox starts
(agent, tests on original, tests on replay), two clean checkouts for the test
gate, and ``git diff`` of the two trees.

Goal: under 1 s, and within 1.5x of the floor. ``--quick`` (50 files, 2 runs)
judges no goal.

    .venv/bin/python benchmarks/replay_overhead.py [--runs 7] [--files 1000] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/, whose file names may shadow the
# standard library; the project root replaces it.
sys.path[0] = str(ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "replayhub.settings")
# Under the project's var/, the file system the app itself uses.
(ROOT / "var").mkdir(exist_ok=True)
BENCH_VAR = Path(tempfile.mkdtemp(prefix="bench-", dir=ROOT / "var"))
BENCH_VAR.chmod(0o755)  # the sandbox uid must reach the workspaces inside
os.environ["REPLAYHUB_VAR_DIR"] = str(BENCH_VAR)
if "DATABASE_URL" not in os.environ:
    from benchmarks.support import migrated_sqlite

    migrated_sqlite(BENCH_VAR / "bench.sqlite3")
    os.environ["DATABASE_URL"] = f"sqlite:///{BENCH_VAR / 'bench.sqlite3'}"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from benchmarks.support import judged, record  # noqa: E402
from replayhub import services  # noqa: E402
from replayhub.git import scratch  # noqa: E402
from replayhub.models import Project, Run  # noqa: E402
from replayhub.sandbox import SandboxSpec, get_runner  # noqa: E402

GOAL_SECONDS = 1.0
GOAL_RATIO = 1.5
CHANGE = "echo 'VALUE_0 = 1' > pkg0/mod0.py"


def make_repository(path: Path, files: int) -> tuple[str, str]:
    """A repository with ``files`` files; returns (base, original) shas."""
    scratch.git("init", "--quiet", "--template=", "--initial-branch=main", str(path))
    for i in range(files):
        sub = path / f"pkg{i % 40}"
        sub.mkdir(exist_ok=True)
        (sub / f"mod{i}.py").write_text(f"VALUE_{i} = {i}\n" * 20)
    kwargs = {"git_dir": path / ".git", "work_tree": path}
    scratch.git("add", "--all", **kwargs)
    scratch.git("commit", "--quiet", "-m", "base", **kwargs)
    base = scratch.git("rev-parse", "HEAD", **kwargs).stdout.decode().strip()
    scratch.git("checkout", "--quiet", "-b", "agent", **kwargs)
    (path / "pkg0" / "mod0.py").write_text("VALUE_0 = 'changed'\n")
    scratch.git("commit", "--quiet", "-am", "agent change", **kwargs)
    original = scratch.git("rev-parse", "HEAD", **kwargs).stdout.decode().strip()
    scratch.git("checkout", "--quiet", "main", **kwargs)
    return base, original


def bench_run(slug: str, repo: Path, base: str, original: str, **fields) -> Run:
    """A project on the benchmark repository and its one run. Its agent makes a
    change that differs from the original, so the test gate runs too."""
    project = Project.objects.create(
        slug=slug,
        repo_path=str(repo),
        evidence_floor=0,
        **{"agent_command": ["sh", "-c", CHANGE], "test_command": ["true"], **fields},
    )
    return Run.objects.create(
        project=project, external_id=slug, original_commit=original, base_sha=base
    )


def run_main(measure: Callable[..., int]) -> int:
    """A replay benchmark's command line: ``measure(runs=, files=, enforce=)``
    on the sizes asked for (``--quick``: small, no goal enforced), in the
    temporary var dir, which is removed afterwards."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int)
    parser.add_argument("--files", type=int)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    try:
        call_command("migrate", verbosity=0)
        return measure(
            runs=args.runs or (2 if args.quick else 7),
            files=args.files or (50 if args.quick else 1000),
            enforce=not args.quick,
        )
    finally:
        shutil.rmtree(BENCH_VAR, ignore_errors=True)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def floor_once(repo: Path, base: str, original: str, work: Path) -> None:
    runner = get_runner("bwrap")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    clone = work / "clone"
    subprocess.run(
        ["git", "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(clone)],
        check=True,
    )
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", base], check=True)
    for i in range(3):
        box = work / f"box{i}"
        box.mkdir()
        runner.run(SandboxSpec(argv=("true",), workspace=box))
    for name in ("a", "b"):
        dest = work / name
        dest.mkdir()
        archive = subprocess.Popen(
            ["git", "-C", str(clone), "archive", original], stdout=subprocess.PIPE
        )
        subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
        archive.stdout.close()
        archive.wait()
    subprocess.run(
        ["git", "-C", str(clone), "diff", "--stat", base, original],
        check=True,
        capture_output=True,
    )
    shutil.rmtree(work, ignore_errors=True)


def summary(name: str, samples: list[float], width: int = 8) -> str:
    return (
        f"{name:<{width}} median {statistics.median(samples) * 1000:7.1f} ms   "
        f"min {min(samples) * 1000:7.1f} ms   max {max(samples) * 1000:7.1f} ms"
    )


def measure(*, runs: int, files: int, enforce: bool) -> int:
    repo = BENCH_VAR / "repo"
    base, original = make_repository(repo, files)
    run = bench_run("bench", repo, base, original)

    figure, floor = [], []
    for i in range(runs + 1):
        replay = services.replay_create(run=run, trigger="command")
        t_figure = timed(lambda r=replay: services.replay_execute(replay_id=r.pk))
        if i:  # the first replay warms caches (the floor's git and bwrap too)
            figure.append(t_figure)
            floor.append(
                timed(lambda: floor_once(repo, base, original, BENCH_VAR / "floor"))
            )
    last = run.replays.order_by("-id").first()
    print(f"repository: {files} files; last verdict {last.verdict}/{last.reason_code}")
    print(summary("replay", figure))
    print(summary("floor", floor))
    ratio = statistics.median(figure) / statistics.median(floor)
    print(
        f"ratio    {ratio:.2f}x (goal <= {GOAL_RATIO}x); "
        f"replay goal < {GOAL_SECONDS * 1000:.0f} ms"
    )
    ok = statistics.median(figure) < GOAL_SECONDS and ratio <= GOAL_RATIO
    record(
        "replay_overhead",
        f"one replay, {files:,} files (trivial agent and tests)",
        unit="ms",
        samples=[s * 1000 for s in figure],
        floor="clone, 3 bwrap starts, 2 checkouts, diff",
        floor_samples=[s * 1000 for s in floor],
        goal=f"<= {GOAL_RATIO}x floor, < {GOAL_SECONDS * 1000:.0f} ms",
        holds=ok if enforce else None,
    )
    return judged(ok, enforce=enforce)


def main() -> int:
    return run_main(measure)


if __name__ == "__main__":
    sys.exit(main())
