"""Replays finished per minute by 1, 2 and 4 worker hosts on the calculator
project, each beside one host's rate (the ratio: how the replays scale).

Each host is a real Celery worker (``-Q replay``, prefork, concurrency 1) with
work and mirror folders of its own, as separate machines would have; a round
queues ``--replays`` replays of the demo calculator's scripted agent at once
(``services.replay_request``) and is timed from the queueing to the last one
finished. A first round of two replays a host warms their mirrors and is not
timed. On a machine with fewer cores than hosts the workers share the CPUs:
the ratio then tells where the machine, not ReplayHub, sets the limit.

No goal of its own. PostgreSQL only (a scratch database is created and
dropped); the broker is ``CELERY_BROKER_URL`` (Redis) or a filesystem queue
under the scratch var dir. Full mode only (about a minute on 2 cores);
``--quick`` runs 1 and 2 hosts, 2 replays.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python benchmarks/workers.py [--replays 8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/; the project root replaces it.
sys.path[0] = str(ROOT)

from benchmarks.support import in_scratch_database, record  # noqa: E402

SCRATCH_DB = "replayhub_bench_workers"


def start_hosts(root: Path, n: int) -> list[subprocess.Popen]:
    """``n`` workers, each with folders of its own under ``root``, started
    together; returned once every one is ready."""
    procs, logs = [], []
    for i in range(n):
        host = root / f"host-{n}-{i}"
        for sub in ("work", "mirrors"):
            (host / sub).mkdir(parents=True)
        env = dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            REPLAYHUB_WORK_DIR=str(host / "work"),
            REPLAYHUB_MIRROR_DIR=str(host / "mirrors"),
        )
        log = host / "worker.log"
        with log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "replayhub",
                        "worker",
                        "-Q",
                        "replay",
                        "--concurrency",
                        "1",
                        "--pool",
                        "prefork",
                        "--loglevel",
                        "INFO",
                        "--without-mingle",
                        "--without-gossip",
                        "--without-heartbeat",
                        "--hostname",
                        f"bench-{os.getpid()}-{n}-{i}@%h",
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        logs.append(log)
    deadline = time.monotonic() + 120
    for proc, log in zip(procs, logs, strict=True):
        while b"ready." not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_hosts(procs)
                raise SystemExit("a worker did not start:\n" + log.read_text()[-3000:])
            time.sleep(0.2)
    return procs


def stop_hosts(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def replay_round(run, n: int) -> float:
    """Seconds to replay ``run`` ``n`` times, queued at once."""
    from replayhub import services
    from replayhub.models import Replay, ReplayStatus

    start = time.perf_counter()
    ids = [services.replay_request(run=run, trigger="command").pk for _ in range(n)]
    deadline = time.monotonic() + 60 + 30 * n
    pending = Replay.objects.filter(pk__in=ids).exclude(status=ReplayStatus.FINISHED)
    while pending.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"replays {ids} did not finish")
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    verdicts = set(Replay.objects.filter(pk__in=ids).values_list("verdict", flat=True))
    assert verdicts == {"identical"}, verdicts
    return seconds


def run(args) -> int:
    import django

    django.setup()
    from replayhub.demo.calculator import GOOD
    from tests.factories import make_calc_project, make_calc_run
    from tests.scripted import make_project_repo, original_commit

    # The sandbox's uid reaches the hosts' workspaces and mirrors below it.
    root = Path(tempfile.mkdtemp(prefix="replayhub-bench-hosts-"))
    root.chmod(0o755)
    try:
        repo = make_project_repo(root)
        good = original_commit(repo, GOOD, branch="agent/good")
        project = make_calc_project(repo, slug="bench-calc", evidence_floor=0)
        run_ = make_calc_run(
            project, prompt="same", original=good, base=repo.rev("main")
        )
        print(f"{args.replays} replays a round, {args.rounds} rounds")
        rates: dict[int, list[float]] = {}
        for n in args.hosts:
            procs = start_hosts(root, n)
            try:
                replay_round(run_, 2 * n)  # each host's mirror, warm
                rates[n] = [
                    args.replays / replay_round(run_, args.replays) * 60
                    for _ in range(args.rounds)
                ]
            finally:
                stop_hosts(procs)
        one = rates[args.hosts[0]]
        for n, samples in rates.items():
            ratio = (sum(samples) / len(samples)) / (sum(one) / len(one))
            print(f"{n} host(s): {max(samples):6.1f} replays/min; {ratio:.2f}x one")
            record(
                "workers",
                f"replays/min, {n} worker host(s), calculator",
                unit="replays/min",
                samples=samples,
                floor="one worker host",
                floor_samples=one,
                goal="",
                holds=None,
                extra={"hosts": n},
                note=f"{os.cpu_count()} cores" if n == args.hosts[-1] else "",
            )
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replays", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    args.replays = args.replays or (2 if args.quick else 8)
    args.rounds = args.rounds or (1 if args.quick else 2)
    args.hosts = (1, 2) if args.quick else (1, 2, 4)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    return in_scratch_database(SCRATCH_DB, "benchmarks/workers.py", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
