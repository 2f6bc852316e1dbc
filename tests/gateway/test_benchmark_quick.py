"""The gateway benchmark still runs, at its smallest size.

Only that it runs and checks its calls is asserted here: its goal is a
timing, which a test on a shared machine cannot judge (benchmarks/README.md).
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT

FIGURES = [
    "anthropic message",
    "openai chat completion",
    "anthropic message, 200 KB context",
    "anthropic stream, first chunk",
    "openai stream, first chunk",
]


def test_the_gateway_benchmark_times_every_figure_through_both_routes():
    done = subprocess.run(
        [sys.executable, "benchmarks/gateway.py", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    number = r"-?[0-9]+\.[0-9]{3}"
    rows = re.findall(
        rf"^(.+?) +{number} +{number} +{number} +{number} +{number} +{number} ",
        done.stdout,
        re.MULTILINE,
    )
    assert rows == FIGURES, done.stdout
    assert re.search(r"^goal (met|missed)", done.stdout, re.MULTILINE), done.stdout
