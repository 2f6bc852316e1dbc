"""Replays finished per minute by one worker, and what each replay costs the
database and the broker.

The figure: a real Celery worker (``-Q replay``, prefork, concurrency 1 and
then 2) replaying runs of the 1,000-file repository of ``replay_overhead.py``
with an agent and a test command that do almost nothing; a round is a batch
of replays queued at once (``services.replay_request``), timed from the
queueing to the last one finished, so the worker's own waits (broker
delivery, claims, heartbeats) count. Beside it, in the same run: the floor of
the same sandbox work (``replay_overhead.floor_once``: clone, three ``bwrap``
starts, two checkouts, a diff) run back to back on as many threads as the
worker has processes.

Per replay, the worker counts (``benchmarks/probe.py``) the SQL statements it
sends and their bytes, and the task messages it publishes; with a Redis
broker, the broker commands and bytes of the worker's database number are
counted from ``MONITOR``. These are the per-replay costs the scale-out
estimate in docs/performance.md is made from.

No goal of its own: the ratio to the floor says how much of a worker's time
is ReplayHub's. PostgreSQL only (a scratch database is created and dropped);
the broker is ``CELERY_BROKER_URL`` (Redis) or a filesystem queue in a
temporary directory. ``--quick`` (50 files, concurrency 1, 1 replay, 1 round).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/6 \\
        .venv/bin/python benchmarks/throughput.py [--replays 6] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/; the project root replaces it.
sys.path[0] = str(ROOT)

from benchmarks.support import in_scratch_database, record  # noqa: E402

SCRATCH_DB = "replayhub_bench_throughput"


class BrokerCounter:
    """Counts the Redis commands (and their bytes) on one database number."""

    def __init__(self, url: str) -> None:
        import redis

        self.db = int(urlsplit(url).path.strip("/") or 0)
        self.client = redis.Redis.from_url(url)
        self.commands = 0
        self.bytes = 0
        self.failed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> BrokerCounter:
        self._thread.start()
        time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        # MONITOR blocks until the next command; one on our own database ends it.
        self.client.ping()
        self._thread.join(timeout=5)

    def _watch(self) -> None:
        import redis

        try:
            with self.client.monitor() as monitor:
                for event in monitor.listen():
                    if self._stop.is_set():
                        return
                    if int(event.get("db", -1)) == self.db:
                        self.commands += 1
                        self.bytes += len(event.get("command", ""))
        except (redis.RedisError, OSError):
            # Counting stopped early: no broker figures rather than low ones.
            if not self._stop.is_set():
                self.failed = True


def start_worker(concurrency: int, log: Path, probe: Path) -> subprocess.Popen:
    env = dict(os.environ, REPLAYHUB_PROBE_FILE=str(probe), PYTHONPATH=str(ROOT))
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "benchmarks.probe",
                "worker",
                "-Q",
                "replay",
                "--concurrency",
                str(concurrency),
                "--pool",
                "prefork",
                "--loglevel",
                "INFO",
                "--without-mingle",
                "--without-gossip",
                "--without-heartbeat",
                "--hostname",
                f"bench-{os.getpid()}-{concurrency}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    while b"ready." not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the worker did not start:\n" + log.read_text()[-3000:])
        time.sleep(0.2)
    return proc


def stop_worker(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def probe_totals(path: Path) -> dict[str, int]:
    """The last line of each worker process: its totals."""
    last: dict[int, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            last[row["pid"]] = row
    keys = ("queries", "query_bytes", "messages", "tasks")
    return {k: sum(row[k] for row in last.values()) for k in keys}


def run(args) -> int:
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis"):
        # The filesystem queue under the var dir, shared with the worker.
        os.environ.pop("CELERY_BROKER_URL", None)
        broker = ""
    # Imported here: replay_overhead sets Django up on import, and must see the
    # scratch database's URL and the broker.
    from django.conf import settings
    from django.core.management import call_command

    from benchmarks.replay_overhead import BENCH_VAR, make_repository
    from replayhub import services
    from replayhub.models import Project, Replay, ReplayStatus, Run

    work = BENCH_VAR
    try:
        call_command("migrate", verbosity=0)
        repo = work / "repo"
        base, original = make_repository(repo, args.files)
        project = Project.objects.create(
            slug="bench",
            repo_path=str(repo),
            agent_command=["sh", "-c", "echo 'VALUE_0 = 1' > pkg0/mod0.py"],
            test_command=["true"],
            evidence_floor=0,
        )
        run = Run.objects.create(
            project=project,
            external_id="bench",
            original_commit=original,
            base_sha=base,
        )
        print(
            f"repository: {args.files} files; {args.replays} replays a round, "
            f"{args.rounds} rounds; broker {settings.CELERY_BROKER_URL.split(':')[0]}"
        )
        costs = {}
        for concurrency in args.concurrency:
            probe = work / f"probe-{concurrency}.jsonl"
            worker = start_worker(
                concurrency, work / f"worker-{concurrency}.log", probe
            )
            figure, floor = [], []
            counter = BrokerCounter(broker) if broker else None
            try:
                # A first replay warms the worker processes; not timed.
                for i in range(args.rounds + 1):
                    n = args.replays if i else concurrency
                    if i == 1:
                        before = probe_totals(probe)
                        if counter is not None:
                            counter.__enter__()
                    start = time.perf_counter()
                    ids = [
                        services.replay_request(run=run, trigger="command").pk
                        for _ in range(n)
                    ]
                    # A worker that never answers (another consumer on the
                    # broker's queue, a crash) ends the run with its log.
                    deadline = time.monotonic() + 120 + 30 * n
                    while (
                        Replay.objects.filter(pk__in=ids)
                        .exclude(status=ReplayStatus.FINISHED)
                        .exists()
                    ):
                        if time.monotonic() > deadline:
                            log = work / f"worker-{concurrency}.log"
                            raise SystemExit(
                                f"replays {ids} did not finish; the worker's log "
                                f"ends:\n{log.read_text(errors='replace')[-3000:]}"
                            )
                        time.sleep(0.05)
                    seconds = time.perf_counter() - start
                    verdicts = set(
                        Replay.objects.filter(pk__in=ids).values_list(
                            "verdict", flat=True
                        )
                    )
                    assert len(verdicts) == 1 and "" not in verdicts, verdicts
                    if i:  # the floor's git and bwrap are warm from the replays
                        floor_s = floor_round((repo, base, original), n, concurrency)
                        figure.append(n / seconds * 60)
                        floor.append(n / floor_s * 60)
                replays = args.replays * args.rounds
                totals = probe_totals(probe)
                cost = {k: (totals[k] - before[k]) / replays for k in totals}
            finally:
                if counter is not None and counter._thread.is_alive():
                    counter.__exit__()
                stop_worker(worker)
            if counter is not None and not counter.failed:
                # The enqueueing (publish) and the worker's side both count.
                cost["broker_commands"] = counter.commands / replays
                cost["broker_bytes"] = counter.bytes / replays
            cost["messages"] = cost["messages"] + 1  # the run_replay message itself
            costs[concurrency] = cost
            fig, flo = statistics.median(figure), statistics.median(floor)
            print(
                f"concurrency {concurrency}: {fig:6.1f} replays/min "
                f"(min {min(figure):.1f}, max {max(figure):.1f}); floor "
                f"{flo:6.1f}/min; ratio {fig / flo:.2f}x"
            )
            print(
                "  per replay: "
                + ", ".join(f"{k} {v:,.1f}" for k, v in cost.items() if k != "tasks")
            )
            record(
                "throughput",
                f"replays/min, one worker, concurrency {concurrency}, "
                f"{args.files:,} files",
                unit="replays/min",
                samples=figure,
                floor="the same sandbox work back to back",
                floor_samples=floor,
                goal="",
                holds=None,
                extra={"concurrency": concurrency, **cost},
                note=(
                    f"per replay: {cost['queries']:.0f} SQL statements "
                    f"({cost['query_bytes'] / 1024:.1f} KiB sent), "
                    f"{cost['messages']:.0f} task messages"
                    + (
                        f", {cost['broker_commands']:.0f} Redis commands "
                        f"({cost['broker_bytes'] / 1024:.1f} KiB)"
                        if "broker_commands" in cost
                        else ""
                    )
                ),
            )
        print("per-replay costs: " + json.dumps(costs))
        costs_file = os.environ.get("REPLAYHUB_BENCH_COSTS")
        if costs_file:
            Path(costs_file).write_text(json.dumps(costs))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def floor_round(shas: tuple, n: int, threads: int) -> float:
    """Seconds for ``n`` floors, on ``threads`` threads."""
    from benchmarks.replay_overhead import BENCH_VAR, floor_once

    todo = list(range(n))
    lock = threading.Lock()

    def loop(k: int) -> None:
        while True:
            with lock:
                if not todo:
                    return
                job = todo.pop()
            floor_once(*shas, BENCH_VAR / f"floor{k}-{job}")

    start = time.perf_counter()
    pool = [threading.Thread(target=loop, args=(k,)) for k in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replays", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--files", type=int)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    args.replays = args.replays or (1 if args.quick else 6)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.files = args.files or (50 if args.quick else 1000)
    args.concurrency = (1,) if args.quick else (1, 2)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    return in_scratch_database(
        SCRATCH_DB, "benchmarks/throughput.py", lambda: run(args)
    )


if __name__ == "__main__":
    sys.exit(main())
