"""The Docker runner: the same contract as bubblewrap, in a production image.

Each run is one container from an image pinned by digest, with no network,
a read-only root file system, size-capped tmpfs for ``/tmp``, HOME, ``/run``,
``/var/tmp`` and ``/dev/shm``, a non-root user, every capability dropped,
``no-new-privileges``, an init reaping orphans, and pids, memory and CPU
limits enforced by the engine's cgroups. The workspace is the only writable
bind. The runner speaks the Engine API over the engine's unix socket
(:mod:`replayhub.sandbox.engine`; ``DOCKER_HOST``), so Docker and podman's
compatible service both serve it and no client binary is needed. The spec's
environment travels in the create call's body over that socket, never on a
command line; whoever can inspect containers on the engine can read it, and
that is whoever holds the socket, i.e. root on the engine's host.

Model and egress access keep ``NetworkMode: none``: the relay directory of
:mod:`replayhub.sandbox.network` is one more read-only bind and the argv it
wraps starts the static relay, which needs nothing from the image. Unix
sockets only cross a bind mount on a Linux engine, not through a desktop
engine's virtual machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import threading
import time
import uuid
from typing import Any
from urllib.parse import quote

from replayhub.lib.fstree import chown_tree
from replayhub.sandbox.base import (
    TMP,
    SandboxOutcome,
    SandboxSpec,
    SandboxUnavailable,
)
from replayhub.sandbox.engine import (
    Engine,
    EngineError,
    LineJoiner,
    demultiplex,
    query,
)
from replayhub.sandbox.output import HeadTailBuffer
from replayhub.sandbox.watchdog import disk_watchdog, limit_that_ended

PINNED = re.compile(r"@sha256:[0-9a-f]{64}\Z")
SANDBOX_USER = "65534:65534"
HOSTNAME = "sandbox"
# Writable places an engine may add to a read-only root (podman mounts
# unsized tmpfs at /run and /var/tmp): each gets the run's tmpfs cap instead.
_TMPFS = (TMP, "/run", "/var/tmp")  # noqa: S108 - inside the container
_PULL_TIMEOUT = 600.0
LABEL = "replayhub.sandbox"
DEADLINE_LABEL = "replayhub.deadline"
# How long past its wall clock a container may outlive the worker that
# started it before any other run on the engine removes it.
ORPHAN_GRACE_SECONDS = 120
# What podman gives without ulimits, and within the usual hard limit; it
# counts every process of the sandbox uid on the engine's host.
_NPROC_HARD = resource.getrlimit(resource.RLIMIT_NPROC)[1]
_NPROC = 32768 if _NPROC_HARD == resource.RLIM_INFINITY else min(32768, _NPROC_HARD)


class DockerRunner:
    name = "docker"
    isolation = "oci"
    limit_backend = "engine cgroups"

    def __init__(
        self,
        image: str = "",
        *,
        host: str | None = None,
        user: str = SANDBOX_USER,
        cpus: float = 1.0,
    ) -> None:
        self.image = image
        self.host = host
        self.user = user
        self.cpus = cpus

    def _engine(self) -> Engine:
        try:
            return Engine(self.host)
        except EngineError as error:
            raise SandboxUnavailable(
                f"the Docker runner cannot run: {error}."
            ) from error

    def check_engine(self) -> Engine:
        """Raise SandboxUnavailable unless an engine answers (image aside)."""
        engine = self._engine()
        try:
            engine.call("GET", "/_ping", timeout=10)
        except EngineError as error:
            raise SandboxUnavailable(
                f"no Docker engine answers at {engine.path}."
            ) from error
        return engine

    def check(self) -> None:
        if not PINNED.search(self.image or ""):
            raise SandboxUnavailable(
                f"the Docker runner needs an image pinned by digest "
                f"(name@sha256:…), not {self.image or 'no image'!r}."
            )
        engine = self.check_engine()
        try:
            engine.call("GET", f"/images/{quote(self.image, safe='')}/json")
        except EngineError:
            name, _, digest = self.image.partition("@")
            try:
                engine.call(
                    "POST",
                    "/images/create" + query(fromImage=name, tag=digest),
                    timeout=_PULL_TIMEOUT,
                )
                engine.call("GET", f"/images/{quote(self.image, safe='')}/json")
            except EngineError as error:
                raise SandboxUnavailable(
                    f"the image {self.image} is neither on the engine nor "
                    f"pullable ({error})."
                ) from error

    def owner(self) -> tuple[int, int] | None:
        """The host uid and gid that own what a run left in its workspace, when
        not the worker's own (the worker is root)."""
        if os.geteuid() != 0:
            return None
        uid, gid = map(int, self.user.split(":"))
        return uid, gid

    def container_config(self, spec: SandboxSpec) -> dict[str, Any]:
        """The create call's body for ``spec`` (pure; tested as such)."""
        limits = spec.limits
        size = limits.tmpfs_bytes
        # HOME is world-writable like /tmp rather than owned by the sandbox
        # uid: podman refuses tmpfs's uid= option, and no other uid runs
        # inside the container to read it.
        tmpfs = {
            path: f"rw,nosuid,nodev,size={size},mode=1777"
            for path in (*_TMPFS, spec.home)
        }
        ulimits = [
            {"Name": "nofile", "Soft": limits.open_files, "Hard": limits.open_files},
            {"Name": "core", "Soft": 0, "Hard": 0},
            # The pids cgroup caps the run. RLIMIT_NPROC is named only because
            # podman, given any ulimit, fills in one above the hard limit and
            # the container fails to start ("error setting rlimit type 6").
            {"Name": "nproc", "Soft": _NPROC, "Hard": _NPROC},
        ]
        # No single file may outgrow the disk cap between two measurements.
        sizes = [v for v in (limits.file_size_bytes, limits.disk_bytes) if v]
        if sizes:
            ulimits.append({"Name": "fsize", "Soft": min(sizes), "Hard": min(sizes)})
        if limits.cpu_seconds is not None:
            cpu = limits.cpu_seconds
            ulimits.append({"Name": "cpu", "Soft": cpu, "Hard": cpu + 1})
        mounts = [
            {
                "Type": "bind",
                "Source": str(spec.workspace),
                "Target": spec.workspace_at,
            },
            *(
                {
                    "Type": "bind",
                    "Source": str(bind.source),
                    "Target": bind.dest,
                    "ReadOnly": not bind.writable,
                }
                for bind in spec.binds
            ),
        ]
        host: dict[str, Any] = {
            "NetworkMode": "none",
            "ReadonlyRootfs": True,
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "Init": True,
            "NanoCpus": int(self.cpus * 1e9),
            "Tmpfs": tmpfs,
            "ShmSize": size,
            "Ulimits": ulimits,
            "Mounts": mounts,
            "IpcMode": "private",
            "Privileged": False,
            "PublishAllPorts": False,
        }
        if limits.max_processes is not None:
            host["PidsLimit"] = limits.max_processes
        if limits.memory_bytes is not None:
            host["Memory"] = host["MemorySwap"] = limits.memory_bytes
        argv = list(spec.argv)
        return {
            # The argv runs as given, whatever entrypoint the image declares.
            "Entrypoint": argv[:1],
            "Cmd": argv[1:],
            "Env": [f"{key}={value}" for key, value in spec.full_env().items()],
            "User": self.user,
            "WorkingDir": spec.workspace_at,
            "Hostname": HOSTNAME,
            "Image": self.image,
            "NetworkDisabled": True,
            "AttachStdout": True,
            "AttachStderr": True,
            "Labels": {
                LABEL: "1",
                # Wall-clock time by which the run is over, for the orphan
                # reaper (a worker killed mid-run cannot remove its container).
                DEADLINE_LABEL: str(int(time.time() + limits.wall_seconds)),
            },
            "HostConfig": host,
        }

    def run(self, spec: SandboxSpec) -> SandboxOutcome:
        self.check()
        engine = self._engine()
        if os.geteuid() == 0:
            for path in (spec.workspace, *(b.source for b in spec.binds if b.writable)):
                chown_tree(path, *map(int, self.user.split(":")))
        reap_orphans(engine)
        name = f"replayhub-{uuid.uuid4().hex[:16]}"
        capture = HeadTailBuffer(spec.limits.output_bytes)
        started = time.monotonic()
        try:
            created = engine.call(
                "POST",
                "/containers/create" + query(name=name),
                self.container_config(spec),
            )
        except EngineError as error:
            raise SandboxUnavailable(
                f"the engine refused the sandbox's container ({error})."
            ) from error
        container = created["Id"]
        try:
            return self._run(engine, container, spec, capture, started)
        except EngineError as error:
            raise SandboxUnavailable(
                f"the engine would not run the sandbox's container ({error})."
            ) from error
        finally:
            with contextlib.suppress(EngineError):
                engine.call("DELETE", f"/containers/{container}" + query(force=1))

    def _run(
        self,
        engine: Engine,
        container: str,
        spec: SandboxSpec,
        capture: HeadTailBuffer,
        started: float,
    ) -> SandboxOutcome:
        stream = engine.attach(container)
        reader = threading.Thread(
            target=_read_stream, args=(stream, capture), daemon=True
        )
        reader.start()
        timed_out = stopped = False
        watchdog = disk_watchdog(spec)
        try:
            engine.call("POST", f"/containers/{container}/start")
            deadline = started + spec.limits.wall_seconds
            while reader.is_alive():
                if time.monotonic() >= deadline:
                    timed_out = True
                elif spec.stop is not None and spec.stop.is_set():
                    stopped = True
                elif not watchdog.poll(0):
                    reader.join(0.05)
                    continue
                engine.call(
                    "POST",
                    f"/containers/{container}/kill" + query(signal="KILL"),
                    ok=(204, 304, 409),
                )
                break
            waited = engine.call("POST", f"/containers/{container}/wait", timeout=60)
            state = engine.call("GET", f"/containers/{container}/json")["State"]
        finally:
            reader.join(5)
            stream.close()
        code = int(waited.get("StatusCode", state.get("ExitCode", -1)))
        # Debian 12's podman 4.3 never reports OOMKilled (its conmon leaves
        # the OOM marker in the service's working directory): a SIGKILL the
        # runner did not send is then taken for the memory cap.
        fired, detail = limit_that_ended(
            watchdog,
            code=code,
            timed_out=timed_out,
            stopped=stopped,
            memory_capped=spec.limits.memory_bytes is not None,
            oom_reported=bool(state.get("OOMKilled")),
            who="the engine's",
        )
        return SandboxOutcome(
            exit_code=None if timed_out or stopped else code,
            output=capture.text(),
            output_truncated=capture.truncated,
            timed_out=timed_out,
            limit_fired=fired,
            duration_s=time.monotonic() - started,
            limit_backend=self.limit_backend,
            limit_detail=detail,
            runner=self.name,
            isolation=self.isolation,
        )


def _read_stream(stream, capture: HeadTailBuffer) -> None:
    lines = LineJoiner(capture.feed)
    with contextlib.suppress(OSError):
        demultiplex(stream.recv, lines)
    lines.close()


def reap_orphans(engine: Engine, now: float | None = None) -> list[str]:
    """Remove sandbox containers past their deadline and grace; their ids.

    A worker that dies mid-run (killed, its host lost) leaves its container
    running, with nothing to stop it: every run removes what such workers
    left on the same engine, whichever worker it is.
    """
    now = time.time() if now is None else now
    filters = json.dumps({"label": [f"{LABEL}=1"]})
    try:
        listed = engine.call("GET", "/containers/json" + query(all=1, filters=filters))
    except EngineError:
        return []
    removed = []
    for container in listed or []:
        labels = container.get("Labels") or {}
        try:
            deadline = int(labels.get(DEADLINE_LABEL, ""))
        except ValueError:
            continue
        if deadline + ORPHAN_GRACE_SECONDS < now:
            with contextlib.suppress(EngineError):
                engine.call("DELETE", f"/containers/{container['Id']}" + query(force=1))
                removed.append(container["Id"])
    return removed
