"""What the benchmark scripts share: scratch databases and timing statistics."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit


def scratch_url(url: str, name: str) -> str:
    """``url`` pointing at the database ``name`` on the same server."""
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def admin_connect(url: str):
    """A connection to the server's maintenance database, for CREATE/DROP."""
    import psycopg

    parts = urlsplit(url)
    return psycopg.connect(
        host=parts.hostname,
        port=parts.port or 5432,
        user=parts.username,
        password=parts.password,
        dbname="postgres",
        autocommit=True,
    )


# Where ``record`` appends the figures of a run (one JSON object a line); set
# by benchmarks/run.py, unset when a script runs on its own.
RESULTS_ENV = "REPLAYHUB_BENCH_RESULTS"
# Scratch databases are named ``<prefix><what>``; several people benchmarking on
# one server keep apart by giving each their own prefix.
PREFIX_ENV = "REPLAYHUB_BENCH_DATABASE_PREFIX"
DEFAULT_PREFIX = "replayhub_bench_"


def scratch_name(name: str) -> str:
    """``name`` (``replayhub_bench_<what>``) under the prefix the environment sets."""
    prefix = os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX
    return prefix + name.removeprefix(DEFAULT_PREFIX)


def summary(samples: list[float]) -> dict[str, float]:
    """median, min and max of a figure's samples, in their own unit."""
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
    }


def record(
    benchmark: str,
    figure: str,
    *,
    unit: str,
    samples: list[float],
    floor: str,
    floor_samples: list[float] | None,
    goal: str,
    holds: bool | None,
    note: str = "",
    p95: float | None = None,
    extra: dict | None = None,
) -> None:
    """Hand one figure, beside its floor or baseline, to benchmarks/run.py.

    ``samples`` and ``floor_samples`` are in ``unit`` (ms, rec/s, ...); the
    ratio is figure median / floor median. ``holds`` is None for a figure that
    has no goal of its own (information), or whose goal is not judged (a
    ``--quick`` run). ``p95`` goes with a latency whose goal is on it; ``extra``
    carries other measured values (per-replay costs) for the report. A no-op
    when the script runs alone.
    """
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    row: dict = {
        "benchmark": benchmark,
        "figure": figure,
        "unit": unit,
        **summary(samples),
        "runs": len(samples),
        "p95": p95,
        "floor": floor,
        "floor_median": None,
        "ratio": None,
        "goal": goal,
        "holds": holds,
        "note": note,
        "extra": extra or {},
    }
    if floor_samples:
        row["floor_median"] = statistics.median(floor_samples)
        if row["floor_median"]:
            row["ratio"] = row["median"] / row["floor_median"]
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


def in_scratch_database(
    name: str, script: str, run: Callable[[], int], *, keep: bool = False
) -> int:
    """``run()`` against a fresh database ``name`` on the server of DATABASE_URL.

    The database is created empty (an earlier one of the name is dropped),
    DATABASE_URL and a temporary REPLAYHUB_VAR_DIR point the script and its
    children at it, and it is dropped afterwards unless ``keep``. Exit status 2
    with a message when DATABASE_URL is not PostgreSQL.
    """
    name = scratch_name(name)
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        print(f"{script} needs PostgreSQL: set DATABASE_URL", file=sys.stderr)
        return 2
    admin = admin_connect(url)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
    admin.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = scratch_url(url, name)
    os.environ["REPLAYHUB_VAR_DIR"] = tempfile.mkdtemp(prefix="replayhub-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "replayhub.settings")
    try:
        return run()
    finally:
        if "django.db" in sys.modules:
            from django.db import connections

            connections.close_all()
        if not keep:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def stats(samples: list[float]) -> dict[str, float]:
    """p50, p95, min and max of timings in seconds, in milliseconds."""
    return {
        "p50": statistics.median(samples) * 1000,
        "p95": percentile(samples, 0.95) * 1000,
        "min": min(samples) * 1000,
        "max": max(samples) * 1000,
    }


def timed(fn, iterations: int, warmup: int = 20) -> list[float]:
    """Seconds per call of ``fn`` after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def insert_generated(cursor, model, overrides: dict, source: str) -> None:
    """``INSERT ... SELECT`` every concrete column of ``model`` from ``source``.

    Columns not in ``overrides`` take the model field's default (or NULL), so
    a column added to the model later does not break the seeding; a column
    overridden with None is left out (the serial primary key).
    """
    from django.db import connection

    columns, exprs, params = [], [], []
    for field in model._meta.concrete_fields:
        if field.column in overrides and overrides[field.column] is None:
            continue
        columns.append(connection.ops.quote_name(field.column))
        if field.column in overrides:
            exprs.append(overrides[field.column])
        else:
            value = field.get_default()
            if value is None and not field.null:
                raise RuntimeError(f"no value for {model.__name__}.{field.name}")
            exprs.append("%s")
            params.append(field.get_db_prep_save(value, connection=connection))
    table = connection.ops.quote_name(model._meta.db_table)
    cursor.execute(
        f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608 -- names from the model
        f"SELECT {', '.join(exprs)} FROM {source}",
        params,
    )
