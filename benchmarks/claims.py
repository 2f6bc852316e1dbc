"""The claim path under load: 16 concurrent claimers on PostgreSQL.

A worker claims the replay a message names with one conditional UPDATE
(``Replay.objects.claim``: queued -> running, leased to it); a message can
arrive twice, so two claimers may race for one replay and exactly one must
win. The figure: 16 processes (4 with ``--quick``) claiming 4,000 queued
replays, every replay named to two of them, claims per second from the first
claim to the last. The processes are started (Django set up, connected) once
and take every round in turn, all starting at the same instant.

Beside it: the same claimers taking the next queued replay themselves, oldest
first, with ``select_for_update(skip_locked=True)`` and the same conditional
UPDATE (the way a reviewer takes the next item of the queue; what a broker-less
worker would do), and the floor — the bare conditional UPDATE by id through
psycopg, no ORM, the same 16 processes and split.

Every round checks that every replay was claimed exactly once, by the claimer
that says it claimed it. Goal: at least 500 claims/s for the worker's path —
a hundred workers finishing a replay every 12 s each (measured replays take
longer) need under 10 — so the queue is never what limits them.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python benchmarks/claims.py [--replays 4000] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/; the project root replaces it.
sys.path[0] = str(ROOT)

from benchmarks.support import in_scratch_database, insert_generated, record  # noqa: E402

SCRATCH_DB = "replayhub_bench_claims"
CLAIMERS = 16
GOAL_PER_S = 500


def claimer(k: int, ids: list[int], orders, out) -> None:
    """One claimer process for every round: set up and connected once, then
    for each ``(mode, start_at)`` on ``orders`` claims its share from
    ``start_at`` on and reports what it won; None ends it."""
    import django

    django.setup()
    import psycopg
    from django.db import connection, transaction

    from replayhub.models import Replay, ReplayStatus

    owner = f"claimer-{k}"
    connection.ensure_connection()
    raw = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
    out.put(("ready", k))
    while (order := orders.get()) is not None:
        mode, start_at = order
        won: list[int] = []
        while time.time() < start_at:
            time.sleep(0.001)
        began = time.perf_counter()
        if mode == "by id":
            for pk in ids:
                if Replay.objects.claim(pk, owner=owner):
                    won.append(pk)
        elif mode == "skip locked":
            queued = Replay.objects.filter(status=ReplayStatus.QUEUED).order_by("pk")
            while True:
                with transaction.atomic():
                    pk = (
                        queued.select_for_update(skip_locked=True)
                        .values_list("pk", flat=True)
                        .first()
                    )
                    if pk is None:
                        break
                    if Replay.objects.claim(pk, owner=owner):
                        won.append(pk)
        else:
            for pk in ids:
                cursor = raw.execute(
                    "UPDATE replayhub_replay SET status = 'running', "
                    "lease_owner = %s, lease_expires_at = now() + "
                    "interval '10 minutes', started_at = now() "
                    "WHERE id = %s AND status = 'queued'",
                    [owner, pk],
                )
                if cursor.rowcount:
                    won.append(pk)
        out.put((k, won, began, time.perf_counter()))
    raw.close()


class Claimers:
    """``claimers`` processes started once and given every round in turn, so
    a round's time is the claiming, not the starting. They are forked from
    this process, Django already set up, its connections closed first: each
    opens its own."""

    def __init__(self, replays: int, claimers: int) -> None:
        from django.db import connections

        connections.close_all()
        context = multiprocessing.get_context("fork")
        self.out = context.Queue()
        # Each id goes to two claimers, as a message delivered twice would: one
        # takes its share oldest first, the other newest first, so they collide
        # on some replays rather than racing in step on all.
        half = claimers // 2
        shares = [
            [pk for pk in range(1, replays + 1) if pk % half == k % half][
                :: 1 if k < half else -1
            ]
            for k in range(claimers)
        ]
        self.orders = [context.Queue() for _ in range(claimers)]
        self.procs = [
            context.Process(
                target=claimer, args=(k, shares[k], self.orders[k], self.out)
            )
            for k in range(claimers)
        ]
        for proc in self.procs:
            proc.start()
        for _ in self.procs:
            self.out.get(timeout=600)

    def round(self, mode: str, replays: int) -> tuple[float, dict[int, list[int]]]:
        # Every claimer waits for the same instant, then claims flat out.
        start_at = time.time() + 0.5
        for orders in self.orders:
            orders.put((mode, start_at))
        results = [self.out.get(timeout=600) for _ in self.procs]
        first = min(r[2] for r in results)
        last = max(r[3] for r in results)
        return replays / (last - first), {k: won for k, won, _, _ in results}

    def close(self) -> None:
        for orders in self.orders:
            orders.put(None)
        for proc in self.procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.kill()


def check(won: dict[int, list[int]], replays: int) -> None:
    from replayhub.models import Replay

    claimed = [pk for pks in won.values() for pk in pks]
    assert len(claimed) == len(set(claimed)), "a replay was claimed twice"
    assert sorted(claimed) == list(range(1, replays + 1)), "a replay was not claimed"
    owners = dict(Replay.objects.values_list("pk", "lease_owner"))
    for k, pks in won.items():
        assert all(owners[pk] == f"claimer-{k}" for pk in pks), "owner mismatch"


def run(args) -> int:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from replayhub.models import Project, Replay, Run

    call_command("migrate", verbosity=0)
    project = Project.objects.create(slug="bench", repo_path="/srv/git/bench.git")
    with connection.cursor() as cursor:
        insert_generated(
            cursor,
            Run,
            {
                "id": "g",
                "project_id": str(project.pk),
                "external_id": "'run-' || g",
                "original_commit": "md5(g::text)",
                "imported_at": "now()",
            },
            f"generate_series(1, {args.replays}) AS g",
        )
        insert_generated(
            cursor,
            Replay,
            {
                "id": "g",
                "run_id": "g",
                "project_id": str(project.pk),
                "status": "'queued'",
                "created_at": "now()",
                "enqueued_at": "now()",
            },
            f"generate_series(1, {args.replays}) AS g",
        )
        cursor.execute("VACUUM ANALYZE replayhub_replay")

    def reset() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE replayhub_replay SET status = 'queued', lease_owner = '', "
                "lease_expires_at = NULL, started_at = NULL"
            )

    rates: dict[str, list[float]] = {"by id": [], "skip locked": [], "floor": []}
    claimers = Claimers(args.replays, args.claimers)
    try:
        for _ in range(args.rounds):
            for mode in rates:
                reset()
                rate, won = claimers.round(mode, args.replays)
                check(won, args.replays)
                rates[mode].append(rate)
    finally:
        claimers.close()
    print(
        f"{args.replays:,} queued replays, {args.claimers} claimers, "
        f"{args.rounds} rounds"
    )
    for mode, values in rates.items():
        print(
            f"{mode:<12} median {sorted(values)[len(values) // 2]:8,.0f} claims/s  "
            f"min {min(values):8,.0f}  max {max(values):8,.0f}"
        )
    judge = not args.quick
    figure = rates["by id"]
    holds = sorted(figure)[len(figure) // 2] >= GOAL_PER_S
    record(
        "claims",
        f"worker claims by id, {args.claimers} claimers, each replay named twice",
        unit="claims/s",
        samples=figure,
        floor="bare conditional UPDATE (psycopg)",
        floor_samples=rates["floor"],
        goal=f">= {GOAL_PER_S} claims/s, none twice",
        holds=holds if judge else None,
        extra={"claimers": args.claimers, "kind": "worker claims"},
    )
    record(
        "claims",
        f"next queued replay with skip_locked, {args.claimers} claimers",
        unit="claims/s",
        samples=rates["skip locked"],
        floor="bare conditional UPDATE (psycopg)",
        floor_samples=rates["floor"],
        goal="none claimed twice",
        holds=True if judge else None,
    )
    return 0 if holds or not judge else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replays", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--claimers", type=int)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    args.replays = args.replays or (400 if args.quick else 4_000)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.claimers = args.claimers or (4 if args.quick else CLAIMERS)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    return in_scratch_database(SCRATCH_DB, "benchmarks/claims.py", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
