"""``./dev bench --quick``: every benchmark still runs and reports its figures.

Only that each script runs, checks what it counts (test-gate rows, gateway
calls, preflight agreeing with itself one run at a time, claims never taken
twice) and hands its figures to the table is asserted: the goals are timings,
which a test on a shared machine cannot judge (benchmarks/README.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import pytest

from benchmarks.run import SUITE
from tests.conftest import ROOT, database_url
from tests.isolation import BENCH_REDIS_DATABASES, worker_number

# Seconds each script's quick run took, two groups at a time on 2 cores: from
# 1 (gateway) to 38 (agent_tape), so the groups are made even by these, not by
# counting scripts. A script not named here counts as DEFAULT_SECONDS.
QUICK_SECONDS = {
    "preflight.py": 6,
    "ingest.py": 8,
    "nightly_admission.py": 7,
    "review_queue.py": 8,
    "trends.py": 6,
    "decision.py": 7,
    "replay_overhead.py": 12,
    "runner_overhead.py": 10,
    "test_gate.py": 17,
    "environment.py": 11,
    "rollouts.py": 6,
    "throughput.py": 13,
    "claims.py": 7,
    "gateway.py": 1,
    "tape.py": 11,
    "agent_tape.py": 38,  # measured alone: a real agent's replays
    "transcripts.py": 6,
    "replicates.py": 1,
}
DEFAULT_SECONDS = 10


def environment_output(out: str) -> None:
    assert "3 replays with an environment, setup ran 1 time(s)" in out, out
    ratio = r"^ratio environment/none [0-9.]+x \(goal <= 1\.10x\)"
    assert re.search(ratio, out, re.MULTILINE), out


def rollouts_output(out: str) -> None:
    ratio = r"^ratio full/index-selected [0-9.]+x CPU time \(goal >= 5\.0x\)"
    assert re.search(ratio, out, re.MULTILINE), out
    kept = re.search(r"the reward window keeps ([0-9,]+) \(", out)
    assert kept and 100 < int(kept[1].replace(",", "")) < 300, out
    follow = r"^follow pass [0-9.]+ ms CPU time \(goal < 50 ms\)"
    assert re.search(follow, out, re.MULTILINE), out


# What a script prints that says it measured what it says it measured, beyond
# its rows: the environment built once for three replays, the reward window.
OUTPUT_CHECKS = {"environment.py": environment_output, "rollouts.py": rollouts_output}


def even_groups(suite: list, count: int) -> list[list]:
    """``suite`` in ``count`` groups of about the same seconds: the longest
    script first, each to the group with the fewest seconds so far; each group
    in the suite's order."""
    groups: list[list] = [[] for _ in range(count)]
    seconds = [0] * count
    for script in sorted(
        suite, key=lambda s: -QUICK_SECONDS.get(s.name, DEFAULT_SECONDS)
    ):
        least = seconds.index(min(seconds))
        groups[least].append(script)
        seconds[least] += QUICK_SECONDS.get(script.name, DEFAULT_SECONDS)
    return [sorted(group, key=suite.index) for group in groups]


# Four runs of a quarter of the quick suite's minutes each, so that parallel
# test workers share them; together they run every script --quick runs.
QUICK_SUITE = [s for s in SUITE if not s.full_only]
GROUPS = even_groups(QUICK_SUITE, 4)


def test_the_groups_cover_the_suite_once():
    names = [s.name for group in GROUPS for s in group]
    assert sorted(names) == sorted(s.name for s in QUICK_SUITE)


@pytest.mark.parametrize("group", range(len(GROUPS)))
def test_the_quick_bench_runs_every_benchmark_and_writes_one_table(
    require_postgres, tmp_path, group
):
    suite = GROUPS[group]
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTEST_") and key != "REPLAYHUB_BENCH_RESULTS"
    }
    env["DATABASE_URL"] = database_url()
    env["REPLAYHUB_BENCH_DATABASE_PREFIX"] = f"replayhub_benchq{os.getpid()}_"
    broker = urlsplit(env.get("CELERY_BROKER_URL", ""))
    if broker.scheme == "redis":
        # The session's worker consumes the test broker's queues: the
        # benchmark's worker gets a Redis database of its own, or the session's
        # would take its replays.
        own = BENCH_REDIS_DATABASES[worker_number()]
        env["CELERY_BROKER_URL"] = urlunsplit(broker._replace(path=f"/{own}"))
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/run.py",
            "--quick",
            "--show-output",
            "--out",
            str(tmp_path),
            "--only",
            *(s.name for s in suite),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((tmp_path / "results.json").read_text())
    assert [s["script"] for s in report["scripts"]] == [s.name for s in suite]
    assert not [s for s in report["scripts"] if s["failed"]]
    for script in suite:
        if script.name in OUTPUT_CHECKS:
            OUTPUT_CHECKS[script.name](done.stdout)
    reported = {row["benchmark"] for row in report["rows"]}
    assert reported == {s.name.removesuffix(".py") for s in suite}
    for row in report["rows"]:
        assert row["median"] > 0 and row["min"] <= row["median"] <= row["max"], row
        assert row["holds"] is None, row  # a quick run judges no goal
    assert report["machine"]["cores"] and report["machine"]["postgresql"]
    doc = (tmp_path / "performance.md").read_text()
    assert "| figure | unit | median |" in doc
    assert doc.count("\n| ") == len(report["rows"]) + 1
    # The printed table has a line per figure too.
    for row in report["rows"]:
        assert row["figure"] in done.stdout
