"""Preflight throughput: runs preflighted per second, batched beside one by one.

The figure: ``preflight_pending`` as the importer's preflight step calls it, on
100,000 pending runs of one project whose repository holds their commits: a
main line of 2,000 commits and one agent branch per run, forked from a main
commit and one or two commits long (under a hundred branch names, as agent
branches come and go; their commits stay in the pack). The records are a
plausible mix: 60% name their base (the fork point), 30% do not (it is
inferred), 5% name an original commit the repository does not have and 5% none
at all. An original already merged into the default branch is resolved one run
at a time even in a batch (a few git processes); none is in this mix.

Beside it, in the same run, the same step one run at a time (``batched=False``:
a few git processes per run, on four threads), on the first 500 runs
(``--sample``; preflighting all of them that way takes minutes). Both ways
must store the same provenance for those runs, or the benchmark stops. Every
run is set back to pending (one UPDATE of all rows) before each measurement.

Goal: at least 5,000 runs/s batched at 100,000 runs. PostgreSQL only (a scratch
database is created and dropped). The repository is made once under
var/bench-cache/; the imported runs once on the server, whose database each
run copies (``replayhub_bench_seeded_preflight_*``, see benchmarks/support.py):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python benchmarks/preflight.py [--runs 100000] [--sample 500]
        [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/; the project root replaces it.
sys.path[0] = str(ROOT)

from benchmarks.support import in_scratch_database, record, summary  # noqa: E402

SCRATCH_DB = "replayhub_bench_preflight"
GOAL_RUNS_PER_S = 5_000
MAIN_COMMITS = 2_000
PROJECT = "bench"


def make_repository(path: Path, runs: int) -> list[str]:
    """The repository; returns each run's original commit (by fast-import marks)."""
    subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "init", "-q", str(path)], check=True
    )
    rng = random.Random(5)
    lines = []
    for number in range(MAIN_COMMITS):
        lines += ["commit refs/heads/main", f"mark :{number + 1}"]
        lines += [f"committer M <m@x> {1_700_000_000 + number} +0000", "data 4", "main"]
        if number:
            lines.append(f"from :{number}")
        lines += ["M 644 inline main.py", "data 8", f"{number:07d}", ""]
    tips = []
    mark = MAIN_COMMITS
    for number in range(runs):
        fork = rng.randint(1, MAIN_COMMITS)
        for step in range(rng.choice((1, 1, 2))):
            mark += 1
            # A hundred branch names, each moved many times: the commits stay in
            # the pack whatever the refs (as pushed and deleted agent branches).
            lines += [f"commit refs/heads/agent/{number % 100}", f"mark :{mark}"]
            message = f"agent {number}-{step}"
            lines += ["committer A <a@x> 1800000000 +0000", f"data {len(message)}"]
            lines += [message, f"from :{fork if step == 0 else mark - 1}"]
            # The same file on every branch: the commits differ, few trees do.
            lines += ["M 644 inline agent.py", "data 2", f"{step}", ""]
        tips.append((f":{mark}", f":{fork}"))
    subprocess.run(
        ["git", "fast-import", "--quiet", "--export-marks=marks"],
        cwd=path,
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
    )
    subprocess.run(["git", "checkout", "-q", "main"], cwd=path, check=True)
    marks = (path / "marks").read_text().split()
    sha = dict(zip(marks[::2], marks[1::2], strict=True))
    return [f"{sha[tip]} {sha[fork]}" for tip, fork in tips]


def cached_repository(runs: int) -> tuple[Path, list[str]]:
    """The repository for ``runs`` runs, made once and kept under var/.

    Making it (fast-import of the commits) costs a minute at 100,000 runs on a
    busy machine; preflight only reads it, so later runs reuse it.
    """
    where = ROOT / "var" / "bench-cache" / f"preflight-{runs}-{MAIN_COMMITS}-v1"
    listing = where / "commits.json"
    if listing.exists():
        return where / "repo", json.loads(listing.read_text())
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    commits = make_repository(where / "repo", runs)
    listing.write_text(json.dumps(commits))
    return where / "repo", commits


def write_records(path: Path, commits: list[str]) -> None:
    rng = random.Random(9)
    with path.open("w") as out:
        for number, pair in enumerate(commits):
            original, fork = pair.split()
            value = {
                "external_id": f"run-{number:07d}",
                "prompt": "fix the cart totals",
                "started_at": "2024-11-03T02:14:07Z",
                "sandbox": {"image": "acme/agent@sha256:" + "4d" * 32},
                "original_commit": original,
            }
            roll = rng.random()
            if roll < 0.6:
                value["base_sha"] = fork
            elif roll < 0.9:
                pass
            elif roll < 0.95:
                value["original_commit"] = f"{rng.getrandbits(160):040x}"
            else:
                value["original_commit"] = None
            out.write(json.dumps(value) + "\n")


def setup() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def seeding(args) -> None:
    """The project and its runs, imported once and kept on the server (a copy
    of that database is what each run measures on; see support)."""
    setup()
    from replayhub.ingest.importer import read_chunks
    from replayhub.ingest.services import PreflightMode, runs_import
    from replayhub.models import Project

    began = time.perf_counter()
    repo, commits = cached_repository(args.runs)
    project = Project.objects.create(
        slug=PROJECT, repo_path=str(repo), test_command=["true"]
    )
    with tempfile.TemporaryDirectory(prefix="replayhub-bench-preflight-") as work:
        records = Path(work) / "runs.jsonl"
        write_records(records, commits)
        with open(records, "rb") as stream:
            imported = runs_import(
                project=project,
                source=read_chunks(stream),
                preflight=PreflightMode.SKIP,
            ).imported
    assert imported == args.runs, imported
    print(
        f"seeded {args.runs:,} runs (and their repository, unless cached) in "
        f"{time.perf_counter() - began:.1f} s"
    )


def run(args) -> int:
    setup()
    return measure(args)


def measure(args) -> int:
    from replayhub.ingest.preflight import preflight_pending
    from replayhub.models import Preflight, Project, Run

    repo, _ = cached_repository(args.runs)
    # The kept database may come from another checkout: its repository is ours.
    project = Project.objects.get(slug=PROJECT)
    Project.objects.filter(pk=project.pk).update(repo_path=str(repo))
    assert Run.objects.filter(project=project).count() == args.runs

    sample_ids = list(
        Run.objects.order_by("pk").values_list("pk", flat=True)[: args.sample]
    )

    def reset() -> None:
        Run.objects.update(
            preflight=Preflight.PENDING, preflight_reason="", provenance={}
        )

    def stored(ids):
        return list(
            Run.objects.filter(pk__in=ids)
            .order_by("pk")
            .values_list("preflight", "preflight_reason", "provenance")
        )

    batched, one_by_one = [], []
    reference = None
    for _ in range(args.repeat):
        reset()
        start = time.perf_counter()
        result = preflight_pending(project_ids=[project.pk])
        seconds = time.perf_counter() - start
        assert result.ready + result.unreproducible == args.runs, result
        assert not result.failed, result.errors
        batched.append(args.runs / seconds)
        mine = stored(sample_ids)

        Run.objects.filter(pk__in=sample_ids).update(
            preflight=Preflight.PENDING, preflight_reason="", provenance={}
        )
        start = time.perf_counter()
        result = preflight_pending(project_ids=[project.pk], batched=False)
        seconds = time.perf_counter() - start
        assert result.ready + result.unreproducible == len(sample_ids), result
        one_by_one.append(len(sample_ids) / seconds)
        reference = stored(sample_ids)
        assert mine == reference, "batched and one-by-one preflight disagree"
    ready = Run.objects.filter(preflight=Preflight.READY).count()

    fig, floor = summary(batched), summary(one_by_one)
    print(f"{args.runs:,} runs ({ready:,} ready); one by one on {len(sample_ids):,}")
    for name, s in (("batched", fig), ("one by one", floor)):
        print(
            f"{name:<11} median {s['median']:8,.0f} runs/s  min {s['min']:8,.0f}  "
            f"max {s['max']:8,.0f}"
        )
    holds = fig["median"] >= GOAL_RUNS_PER_S
    print(
        f"ratio batched/one by one {fig['median'] / floor['median']:.1f}x; goal >= "
        f"{GOAL_RUNS_PER_S:,} runs/s: {'met' if holds else 'MISSED'}"
    )
    record(
        "preflight",
        f"preflight, batched, {args.runs:,} runs",
        unit="runs/s",
        samples=batched,
        floor=f"one run at a time ({len(sample_ids):,} runs)",
        floor_samples=one_by_one,
        goal=f">= {GOAL_RUNS_PER_S:,} runs/s",
        holds=holds if not args.quick else None,
    )
    return 0 if holds or args.quick else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int)
    parser.add_argument("--sample", type=int)
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    args.runs = args.runs or (1_000 if args.quick else 100_000)
    args.sample = args.sample or (100 if args.quick else 500)
    args.repeat = args.repeat or (2 if args.quick else 3)
    return in_scratch_database(
        SCRATCH_DB,
        "benchmarks/preflight.py",
        lambda: run(args),
        seed=lambda: seeding(args),
        seed_key=f"{args.runs} {MAIN_COMMITS}",
    )


if __name__ == "__main__":
    sys.exit(main())
