"""Each pytest-xdist worker shares nothing with the others.

Loaded with ``-p tests.isolation`` (pyproject's ``addopts``), before Django's
settings are read: xdist names the worker (``PYTEST_XDIST_WORKER``) before the
worker's pytest starts, and the settings take their var dir and broker from
the environment. So each worker gets

* a var dir of its own — its SQLite database, its filesystem queue, its work
  and mirror folders;
* with Redis, a database number of its own, so a worker's Celery worker never
  takes another's replays (and another for the quick bench's own worker);
* with PostgreSQL, a test database of its own (pytest-django's ``_gw<n>``
  suffix).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# Redis has 16 databases: 0 for a run without xdist, 1-7 for the workers'
# Celery workers, 8-15 for the quick bench's own worker under each.
MAX_WORKERS = 7
BENCH_REDIS_DATABASES = [15 - n for n in range(MAX_WORKERS + 1)]


def worker_number(environ: Mapping[str, str] = os.environ) -> int:
    """This xdist worker's number (gw3: 3); 7 without xdist."""
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        return int(worker[2:])
    return MAX_WORKERS


def isolate(environ: dict[str, str] | os._Environ[str], root: Path) -> None:
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return
    number = int(worker[2:])
    if number >= MAX_WORKERS:
        raise RuntimeError(f"at most {MAX_WORKERS} test workers (-n), not more")
    base = Path(environ.get("REPLAYHUB_VAR_DIR") or root / "var" / "test")
    environ["REPLAYHUB_VAR_DIR"] = str(base / worker)
    broker = urlsplit(environ.get("CELERY_BROKER_URL", ""))
    if broker.scheme == "redis":
        environ["CELERY_BROKER_URL"] = urlunsplit(
            broker._replace(path=f"/{number + 1}")
        )


isolate(os.environ, Path(__file__).resolve().parent.parent)
