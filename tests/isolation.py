"""Each pytest-xdist worker shares nothing with the others.

Loaded with ``-p tests.isolation`` (pyproject's ``addopts``), before Django's
settings are read: xdist names the worker (``PYTEST_XDIST_WORKER``) before the
worker's pytest starts, and the settings take their var dir and broker from
the environment. So each worker gets

* a var dir of its own — its SQLite database, its filesystem queue, its work
  and mirror folders;
* with Redis, a database number of its own, so a worker's Celery worker never
  takes another's replays (the quick bench keeps 14 and 15);
* with PostgreSQL, a test database of its own (pytest-django's ``_gw<n>``
  suffix).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# Redis databases 14 and 15 are the quick bench's (tests/benchmarks).
MAX_WORKERS = 13


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
