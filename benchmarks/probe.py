"""ReplayHub's Celery app with counters, for benchmarks that run a real worker.

``celery -A benchmarks.probe worker ...`` runs the same app and tasks as
``-A replayhub``; each worker process also counts the SQL statements it sends
(and their bytes: statement text plus parameters) and the task messages it
publishes, and appends its totals after every task to the file named by
``REPLAYHUB_PROBE_FILE`` (one JSON object a line). Nothing else changes.
"""

from __future__ import annotations

import json
import os

from celery.signals import before_task_publish, task_postrun, worker_process_init

from replayhub.celery import app

__all__ = ["app"]

COUNTS = {"queries": 0, "query_bytes": 0, "messages": 0, "tasks": 0}


def _count(execute, sql, params, many, context):
    COUNTS["queries"] += 1
    COUNTS["query_bytes"] += len(sql.encode()) + len(repr(params).encode())
    return execute(sql, params, many, context)


def _wrap(sender, connection, **kwargs) -> None:
    if _count not in connection.execute_wrappers:
        connection.execute_wrappers.append(_count)


@worker_process_init.connect
def _install(**kwargs) -> None:
    from django.db import connections
    from django.db.backends.signals import connection_created

    connection_created.connect(_wrap, weak=False)
    for connection in connections.all(initialized_only=True):
        _wrap(None, connection)


@before_task_publish.connect
def _published(**kwargs) -> None:
    COUNTS["messages"] += 1


@task_postrun.connect
def _report(**kwargs) -> None:
    COUNTS["tasks"] += 1
    path = os.environ.get("REPLAYHUB_PROBE_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), **COUNTS}) + "\n")
