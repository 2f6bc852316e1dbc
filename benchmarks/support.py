"""What the benchmark scripts share: scratch databases and timing statistics."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
# Migrated once per schema and cloned for every scratch database: migrating an
# empty database is some 8 s of each benchmark otherwise.
TEMPLATE_PREFIX = "replayhub_bench_template_"


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


def judged(ok: bool, *, enforce: bool) -> int:
    """The exit status for a goal met or missed (only enforced goals fail)."""
    if ok:
        return 0
    if not enforce:
        print("goal missed; not enforced with --quick")
        return 0
    print("goal missed")
    return 1


def schema_key() -> str:
    """A digest of what ``migrate`` makes of an empty database: the project's
    migration files (self-contained: their role lists are frozen in them) and
    the Django version, whose own apps' migrations come with it."""
    import django

    digest = hashlib.sha256(django.get_version().encode())
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _migrate(database_url: str) -> None:
    """``manage.py migrate`` of ``database_url`` in a child process, so this
    process's Django is still free to be set up on the scratch database."""
    env = dict(
        os.environ,
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="replayhub.settings",
        LOG_LEVEL="WARNING",
    )
    with tempfile.TemporaryDirectory(prefix="replayhub-bench-") as var:
        env["REPLAYHUB_VAR_DIR"] = var
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--no-input", "-v0"],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=600,
        )


def migrated_template(admin, url: str) -> str:
    """The name of a migrated database to clone, made on the server when missing.

    Shared by every prefix (it is never written after it is made); made under
    an advisory lock and a temporary name, then renamed, so a concurrent run
    waits for it or clones a finished one. Templates of other schemas are
    dropped when a new one is made, unless someone is cloning them.
    """
    name = TEMPLATE_PREFIX + schema_key()
    admin.execute("SELECT pg_advisory_lock(hashtext(%s))", [TEMPLATE_PREFIX])
    try:
        found = admin.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s",
            [TEMPLATE_PREFIX.replace("_", "\\_") + "%"],
        ).fetchall()
        if (name,) in found:
            return name
        building = name + "_new"
        admin.execute(f'DROP DATABASE IF EXISTS "{building}"')
        admin.execute(f'CREATE DATABASE "{building}"')
        _migrate(scratch_url(url, building))
        admin.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        for (stale,) in found:
            try:
                admin.execute(f'DROP DATABASE IF EXISTS "{stale}"')
            except Exception as error:  # in use: the next new schema drops it
                print(f"kept {stale}: {error}", file=sys.stderr)
        return name
    finally:
        admin.execute("SELECT pg_advisory_unlock(hashtext(%s))", [TEMPLATE_PREFIX])


def migrated_sqlite(path: Path) -> None:
    """A migrated SQLite database at ``path``, copied from one kept under
    var/bench-cache/ for the current schema (made there when missing)."""
    cache = ROOT / "var" / "bench-cache"
    kept = cache / f"sqlite-{schema_key()}.sqlite3"
    if not kept.exists():
        cache.mkdir(parents=True, exist_ok=True)
        for stale in cache.glob("sqlite-*.sqlite3"):
            stale.unlink(missing_ok=True)
        building = cache / f"{kept.name}.{os.getpid()}"
        _migrate(f"sqlite:///{building}")
        building.replace(kept)
    shutil.copyfile(kept, path)


def in_scratch_database(
    name: str,
    script: str,
    run: Callable[[], int],
    *,
    keep: bool = False,
    seed: Callable[[], None] | None = None,
    seed_key: str = "",
) -> int:
    """``run()`` against a fresh database ``name`` on the server of DATABASE_URL.

    The database is created migrated, a clone of :func:`migrated_template`
    (an earlier one of the name is dropped), DATABASE_URL and a temporary
    REPLAYHUB_VAR_DIR point the script and its children at it, and it is
    dropped afterwards unless ``keep``. Exit status 2 with a message when
    DATABASE_URL is not PostgreSQL.

    With ``seed`` (which sets Django up and fills the database), the database
    is a clone of one ``seed`` filled before, kept on the server for the same
    schema, ``script`` source and ``seed_key`` (the sizes): see
    :func:`_seeded_clone`. ``seed`` runs only when there is none yet.
    """
    name = scratch_name(name)
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        print(f"{script} needs PostgreSQL: set DATABASE_URL", file=sys.stderr)
        return 2
    admin = admin_connect(url)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
    template = migrated_template(admin, url)
    os.environ["DATABASE_URL"] = scratch_url(url, name)
    var = os.environ["REPLAYHUB_VAR_DIR"] = tempfile.mkdtemp(prefix="replayhub-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "replayhub.settings")
    try:
        if seed is None:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            _seeded_clone(admin, name, template, script, seed_key, seed)
        return run()
    finally:
        if "django.db" in sys.modules:
            from django.db import connections

            connections.close_all()
        if not keep:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
        shutil.rmtree(var, ignore_errors=True)


SEEDED_PREFIX = "replayhub_bench_seeded_"


def _seeded_clone(
    admin, name: str, template: str, script: str, key: str, seed: Callable[[], None]
) -> None:
    """Create ``name`` as a copy of the seeded database kept for ``script``.

    The kept database is named for the migrated template it was cloned from
    (the schema), the script's source and ``key``, so a change to any of them
    seeds anew (and drops the older one of the same script and ``key``). A
    copy is the same files as the seeded and vacuumed database, statistics
    included, made in a few seconds where seeding takes a minute. Seeding runs
    under an advisory lock on the kept name: a concurrent run waits for it and
    then copies.
    """
    digest = hashlib.sha256(f"{template}\0{key}\0".encode())
    digest.update((ROOT / script).read_bytes())
    # One kept database per script and sizes: a quick run's stays beside a
    # full run's, and only an outdated one of the same sizes is dropped.
    sizes = hashlib.sha256(key.encode()).hexdigest()[:8]
    stem = f"{SEEDED_PREFIX}{Path(script).stem}_{sizes}_"
    kept = stem + digest.hexdigest()[:12]
    # A file copy: logging a gigabyte database block by block (the default
    # since PostgreSQL 15) takes several times as long.
    copy = " STRATEGY FILE_COPY" if admin.info.server_version >= 150000 else ""
    admin.execute("SELECT pg_advisory_lock(hashtext(%s))", [kept])
    try:
        found = [
            datname
            for (datname,) in admin.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s",
                [stem.replace("_", "\\_") + "%"],
            )
        ]
        if kept in found:
            began = time.perf_counter()
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{kept}"{copy}')
            # The copy's gigabyte sits dirty in the page cache: written out
            # now rather than while the figures are taken.
            os.sync()
            print(
                f"copied the seeded database {kept} "
                f"in {time.perf_counter() - began:.1f} s"
            )
            return
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        seed()
        from django.db import connections

        connections.close_all()  # a database being copied has no other client
        admin.execute(f'CREATE DATABASE "{kept}" TEMPLATE "{name}"{copy}')
        for stale in found:
            try:
                admin.execute(f'DROP DATABASE IF EXISTS "{stale}"')
            except Exception as error:  # being copied: the next seeding drops it
                print(f"kept {stale}: {error}", file=sys.stderr)
        os.sync()
    finally:
        admin.execute("SELECT pg_advisory_unlock(hashtext(%s))", [kept])


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
