"""The static relay binary: ``relay.c`` compiled once per worker.

A sandbox whose root has no ``python3`` (a minimal production image, a
busybox root under Docker or gVisor) cannot run ``relay.py``; the same relay
built with ``cc -static`` runs in any root. It is built on first use into
``<REPLAYHUB_VAR_DIR>/relay/<source digest>/relay`` (a C compiler and the
static C library are needed: Debian's ``gcc`` and ``libc6-dev``) and reused
after; a changed source gets a new directory. Without a compiler the relay
falls back to ``relay.py``. A production image builds it in a stage of its
own and names it with ``REPLAYHUB_STATIC_RELAY`` (see the Dockerfile).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("relay.c")
COMPILE_TIMEOUT = 120
_COMPILER_PATH = "/usr/local/bin:/usr/bin:/bin"


class RelayBuildError(Exception):
    """The static relay could not be built here; the message says why."""


def source_digest() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]


@cache
def static_relay() -> Path:
    """The built binary's path on this worker (built now if missing).

    ``REPLAYHUB_STATIC_RELAY`` names one built ahead from the same source
    (the production image's build stage); it must exist.
    """
    if settings.REPLAYHUB_STATIC_RELAY:
        built = Path(settings.REPLAYHUB_STATIC_RELAY)
        if not built.is_file():
            raise RelayBuildError(f"REPLAYHUB_STATIC_RELAY names no file: {built}")
        return built
    target = Path(settings.VAR_DIR) / "relay" / source_digest() / "relay"
    if target.is_file():
        return target
    compiler = shutil.which("cc", path=_COMPILER_PATH) or shutil.which(
        "gcc", path=_COMPILER_PATH
    )
    if compiler is None:
        raise RelayBuildError(
            "no C compiler to build the static relay (apt-get install gcc libc6-dev)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed into place: concurrent workers
    # never run a half-written binary.
    fd, partial = tempfile.mkstemp(prefix=".relay-", dir=target.parent)
    os.close(fd)
    try:
        result = subprocess.run(
            [compiler, "-static", "-Os", "-s", "-o", partial, str(SOURCE)],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT,
            env={"PATH": _COMPILER_PATH},
            check=False,
        )
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no message"])[-1]
            raise RelayBuildError(f"the static relay does not build here ({last})")
        os.chmod(partial, 0o755)  # noqa: S103 - run by the sandbox uid
        os.replace(partial, target)
    finally:
        Path(partial).unlink(missing_ok=True)
    return target


@cache
def static_relay_or_none() -> Path | None:
    """The static relay, or None (said once in the log) when there is none."""
    try:
        return static_relay()
    except (RelayBuildError, OSError, subprocess.TimeoutExpired) as error:
        logger.warning(
            "no static relay (%s): sandboxes reach the gateway through relay.py, "
            "which needs python3 in their root",
            error,
        )
        return None
