"""``./dev run`` as a newcomer meets it: what it prints says how to stop it,
and doing so stops everything it started."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import threading

from tests.conftest import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_dev_run_says_its_pid_and_a_kill_of_it_stops_everything(tmp_path):
    # The checkout's top as links beside a copy of the script, so that the
    # logs it writes under var/ are this test's, and its own data folder.
    top = tmp_path / "checkout"
    top.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("var", "dev"):
            (top / entry.name).symlink_to(entry)
    shutil.copy2(ROOT / "dev", top / "dev")
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "COV_", "DJANGO_", "DATABASE_", "CELERY_"))
    }
    env.update(
        DEMO="0",
        PORT=str(port),
        REPLAYHUB_VAR_DIR=str(tmp_path / "var"),
        # A filesystem queue in that folder: no other run's worker takes its work.
        CELERY_BROKER_URL="filesystem://localhost/",
    )
    dev = subprocess.Popen(
        [str(top / "dev"), "run"],
        cwd=top,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    watchdog = threading.Timer(240, os.killpg, (dev.pid, signal.SIGKILL))
    watchdog.start()
    try:
        said = []
        for line in dev.stderr:  # type: ignore[union-attr]
            said.append(line)
            if "ReplayHub is at" in line:
                break
        # "Ctrl-C or `kill N`", or, where Ctrl-C is ignored, "`kill N`" alone.
        told = re.search(r"`kill (\d+)` stops everything", said[-1])
        assert told, "".join(said)
        assert int(told[1]) == dev.pid
        assert answers(port)

        os.kill(int(told[1]), signal.SIGTERM)

        assert dev.wait(timeout=60) == 143
        assert not answers(port)
        # Nothing it started is left running (its workers included).
        left = subprocess.run(
            ["pgrep", "-s", str(dev.pid)], capture_output=True, text=True
        ).stdout.split()
        assert left == []
    finally:
        watchdog.cancel()
        # Whatever is left of it if the test failed half-way.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(dev.pid, signal.SIGKILL)
        dev.wait()
