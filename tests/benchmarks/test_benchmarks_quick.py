"""The benchmarks that need no PostgreSQL still run, at their smallest sizes
(test_bench_quick.py runs every one through ``./dev bench --quick``).

Only that they run and check what they count is asserted here: their goals are
timings, which a test on a shared machine cannot judge (benchmarks/README.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import ROOT


def run_quick(script: str) -> subprocess.CompletedProcess[str]:
    # The benchmark seeds its own SQLite database; it never sees the tests' one.
    env = {
        key: value
        for key, value in os.environ.items()
        if key != "DATABASE_URL" and not key.startswith("PYTEST_")
    }
    return subprocess.run(
        [sys.executable, f"benchmarks/{script}", "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_environment_benchmark_builds_once_and_prints_its_ratio():
    done = run_quick("environment.py")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 replays with an environment, setup ran 1 time(s)" in done.stdout
    assert re.search(
        r"^ratio environment/none [0-9.]+x \(goal <= 1\.10x\)",
        done.stdout,
        re.MULTILINE,
    ), done.stdout


def test_the_rollouts_benchmark_compares_index_selected_loading_and_a_follow_pass():
    done = run_quick("rollouts.py")

    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(
        r"^ratio full/index-selected [0-9.]+x CPU time \(goal >= 5\.0x\)",
        done.stdout,
        re.MULTILINE,
    ), done.stdout
    kept = re.search(r"the reward window keeps ([0-9,]+) \(", done.stdout)
    assert kept and 100 < int(kept[1].replace(",", "")) < 300, done.stdout
    assert re.search(
        r"^follow pass [0-9.]+ ms CPU time \(goal < 50 ms\)",
        done.stdout,
        re.MULTILINE,
    ), done.stdout
