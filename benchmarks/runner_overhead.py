"""Each runner's cost of one sandboxed command, beside its floor.

The figure: ``runner.run()`` of ``true`` in a fresh workspace, with every
isolation and limit the runner applies (a replay starts three: the agent and
two test-gate runs). The floor: the bare tool starting ``true`` with the
same kind of isolation and nothing of ReplayHub's around it:

* bwrap — ``bwrap --unshare-all … true`` on the host's /usr;
* docker — ``podman run --rm --network none IMAGE true`` (the runner talks
  to podman's Docker-compatible service; the floor is podman's own CLI);
* gvisor — ``runsc --network=none --ignore-cgroups do true``.

podman's service and image are made as the tests make them (a busybox root
imported with ``podman import``). No goal is judged: the figures say what
choosing a runner costs per sandbox.

    .venv/bin/python benchmarks/runner_overhead.py [--runs 7] [--quick]
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
sys.path[0] = str(ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "replayhub.settings")
(ROOT / "var").mkdir(exist_ok=True)
BENCH_VAR = Path(tempfile.mkdtemp(prefix="bench-", dir=ROOT / "var"))
BENCH_VAR.chmod(0o755)
os.environ["REPLAYHUB_VAR_DIR"] = str(BENCH_VAR)

import django  # noqa: E402

django.setup()

from benchmarks.support import record  # noqa: E402
from replayhub.sandbox import SandboxSpec  # noqa: E402
from replayhub.sandbox.base import Runner  # noqa: E402
from replayhub.sandbox.bwrap import BwrapRunner  # noqa: E402
from replayhub.sandbox.docker import DockerRunner  # noqa: E402
from replayhub.sandbox.gvisor import GvisorRunner  # noqa: E402

# The test suite's podman fixture, reused so that both build the same image.
from tests.sandbox.engines import Podman  # noqa: E402


def timed(action: Callable[[], object], runs: int) -> list[float]:
    action()  # warm caches (the image, the relay, the page cache)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def sandboxed(runner: Runner) -> Callable[[], object]:
    def once() -> None:
        workspace = Path(tempfile.mkdtemp(dir=BENCH_VAR))
        workspace.chmod(0o755)
        try:
            outcome = runner.run(SandboxSpec(argv=("true",), workspace=workspace))
            assert outcome.exit_code == 0, outcome.output
        finally:
            shutil.rmtree(workspace, ignore_errors=True)

    return once


def command(argv: list[str], env: dict[str, str] | None = None) -> Callable[[], object]:
    def once() -> None:
        subprocess.run(argv, env=env, capture_output=True, timeout=120, check=True)

    return once


def bwrap_floor() -> list[str]:
    argv = ["bwrap", "--unshare-all", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib64"):
        if Path(f"/{name}").is_symlink():
            argv += ["--symlink", os.readlink(f"/{name}"), f"/{name}"]
    return [*argv, "--proc", "/proc", "--dev", "/dev", "--", "true"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="two runs each")
    args = parser.parse_args()
    if args.quick:
        args.runs = 2
    rows = []
    rows.append(
        (
            "bwrap",
            timed(sandboxed(BwrapRunner()), args.runs),
            "bwrap --unshare-all … true",
            timed(command(bwrap_floor()), args.runs),
        )
    )
    podman = Podman.start()
    try:
        env = {**Podman.environment(podman.directory)}
        floor = Podman.command(
            podman.directory, "run", "--rm", "--network", "none", podman.image, "true"
        )
        runner = DockerRunner(podman.image, host=podman.host)
        rows.append(
            (
                "docker",
                timed(sandboxed(runner), args.runs),
                "podman run --rm --network none IMAGE true",
                timed(command(floor, env), args.runs),
            )
        )
    finally:
        podman.stop()
    floor = ["runsc", "--network=none", "--ignore-cgroups", "do", "true"]
    rows.append(
        (
            "gvisor",
            timed(sandboxed(GvisorRunner()), args.runs),
            "runsc --network=none --ignore-cgroups do true",
            timed(command(floor, {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}), args.runs),
        )
    )
    for name, samples, floor_name, floor_samples in rows:
        median = statistics.median(samples)
        floor_median = statistics.median(floor_samples)
        print(
            f"{name:7} {median:7.0f} ms   floor {floor_median:7.0f} ms "
            f"({floor_name})   x{median / floor_median:.2f}"
        )
        record(
            "runner_overhead",
            f"one sandboxed `true` under {name}",
            unit="ms",
            samples=samples,
            floor=floor_name,
            floor_samples=floor_samples,
            goal="none (what the runner costs per sandbox)",
            holds=None,
        )
    shutil.rmtree(BENCH_VAR, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
