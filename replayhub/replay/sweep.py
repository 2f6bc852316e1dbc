"""What a dead worker left on its host, removed when a worker starts there
and every ``REPLAYHUB_SWEEP_SECONDS`` while it runs.

A replay's workspace (``REPLAYHUB_WORK_DIR/replay-<id>``) is removed by the
worker that ran it, or by the reaper on the host that reaps it; a worker that
died on another host leaves its workspaces behind (a real one can be GiBs).
Each worker removes the workspaces of replays that are finished (or no longer
exist), and environment builds' scratch folders older than
:data:`BUILD_SCRATCH_SECONDS`. A running replay's folder is another live
worker's on this host; a queued one's may be taken again at any moment (a
replay sent back to wait keeps its id), and its next claim clears it: both
stay.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

from django.db import InterfaceError, OperationalError, connections

from replayhub.git.scratch import remove_tree
from replayhub.models import Replay, ReplayStatus

log = logging.getLogger(__name__)

WORKSPACE = re.compile(r"replay-(\d{1,18})\Z")
BUILD_SCRATCH = re.compile(r"env-build-[0-9a-f]{12}\Z")
# Past any setup phase's time limit: a build that old has no process left.
BUILD_SCRATCH_SECONDS = 6 * 3600


def leftovers(work_dir: Path, *, now: float | None = None) -> list[Path]:
    """The folders under ``work_dir`` that no live replay or build owns."""
    now = time.time() if now is None else now
    try:
        entries = [entry for entry in work_dir.iterdir() if entry.is_dir()]
    except OSError:
        return []
    ids = {
        int(found.group(1)): entry
        for entry in entries
        if (found := WORKSPACE.match(entry.name))
    }
    live = set(
        Replay.objects.filter(pk__in=ids)
        .exclude(status=ReplayStatus.FINISHED)
        .values_list("pk", flat=True)
    )
    stale = [entry for pk, entry in ids.items() if pk not in live]
    for entry in entries:
        if BUILD_SCRATCH.match(entry.name):
            try:
                old = now - entry.stat().st_mtime > BUILD_SCRATCH_SECONDS
            except OSError:
                continue
            if old:
                stale.append(entry)
    return sorted(stale)


def sweep(work_dir: Path) -> int:
    """Remove :func:`leftovers`; how many were removed. A folder that cannot
    be removed is logged and left."""
    removed = 0
    for entry in leftovers(work_dir):
        try:
            remove_tree(entry)
        except OSError as error:
            log.warning("%s was left: %s", entry, error)
            continue
        removed += 1
    if removed:
        log.info("removed %d workspace(s) left under %s", removed, work_dir)
    return removed


def sweep_every(work_dir: Path, seconds: float) -> threading.Thread:
    """A daemon thread that sweeps ``work_dir`` every ``seconds`` for as long
    as the worker process lives; a database out of reach skips a turn."""

    def loop() -> None:
        while True:
            time.sleep(seconds)
            try:
                sweep(work_dir)
            except (OperationalError, InterfaceError) as error:
                log.warning("workspace sweep skipped: %s", error)
            finally:
                connections.close_all()

    thread = threading.Thread(target=loop, name="workspace-sweep", daemon=True)
    thread.start()
    return thread
