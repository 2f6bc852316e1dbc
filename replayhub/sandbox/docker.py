"""The Docker runner: the same contract as bubblewrap, in a production image.

Each run is one container from an image pinned by digest, with no network,
a read-only root file system, size-capped tmpfs for ``/tmp`` and HOME, a
non-root user, every capability dropped, ``no-new-privileges``, and pids,
memory and CPU limits enforced by the engine. The workspace is the only
writable bind. Environment values are passed by name (``--env NAME``), so they
appear in the docker client's environment, never on a command line.

Model and egress access keep ``--network none``: the relay directory of
:mod:`replayhub.sandbox.network` is one more read-only bind, and the argv it
wraps starts the relay, so an image for such runs must have ``python3`` on
PATH. Unix sockets only cross a bind mount on a Linux engine, not through a
desktop engine's virtual machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
import uuid

from replayhub.lib.fstree import chown_tree
from replayhub.sandbox.base import (
    BASE_ENV,
    HOME,
    TMP,
    WORKSPACE,
    SandboxOutcome,
    SandboxSpec,
    SandboxUnavailable,
)
from replayhub.sandbox.output import HeadTailBuffer

PINNED = re.compile(r"@sha256:[0-9a-f]{64}\Z")
SANDBOX_USER = "65534:65534"


class DockerRunner:
    name = "docker"

    def __init__(
        self,
        image: str = "",
        *,
        docker_path: str = "docker",
        user: str = SANDBOX_USER,
        cpus: float = 1.0,
    ) -> None:
        self.image = image
        self.docker_path = docker_path
        self.user = user
        self.cpus = cpus

    def check(self) -> None:
        if not PINNED.search(self.image or ""):
            raise SandboxUnavailable(
                f"the Docker runner needs an image pinned by digest "
                f"(name@sha256:…), not {self.image or 'no image'!r}."
            )
        docker = shutil.which(self.docker_path)
        if docker is None:
            raise SandboxUnavailable("the docker client is not installed.")
        probe = subprocess.run(
            [docker, "version", "--format", "{{.Server.Version}}"],
            env=_client_env({}),
            capture_output=True,
            timeout=20,
            check=False,
        )
        if probe.returncode != 0:
            raise SandboxUnavailable("no Docker engine answers the docker client.")

    def owner(self) -> tuple[int, int] | None:
        """The host uid and gid that own what a run left in its workspace, when
        not the worker's own (the worker is root)."""
        if os.geteuid() != 0:
            return None
        uid, gid = map(int, self.user.split(":"))
        return uid, gid

    def command(self, spec: SandboxSpec, container: str) -> list[str]:
        """The exact ``docker run`` argv for ``spec`` (pure; tested as such)."""
        limits = spec.limits
        argv = [
            self.docker_path,
            "run",
            "--name",
            container,
            "--network",
            "none",
            "--read-only",
            "--tmpfs",
            f"{TMP}:rw,nosuid,nodev,size={limits.tmpfs_bytes},mode=1777",
            "--tmpfs",
            f"{HOME}:rw,nosuid,nodev,size={limits.tmpfs_bytes},mode=0700,"
            f"uid={self.user.split(':')[0]}",
            "--user",
            self.user,
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--init",
            "--cpus",
            str(self.cpus),
            "--ulimit",
            f"nofile={limits.open_files}:{limits.open_files}",
            "--ulimit",
            "core=0:0",
            "--workdir",
            WORKSPACE,
            "--mount",
            f"type=bind,source={spec.workspace},target={WORKSPACE}",
        ]
        if limits.max_processes is not None:
            argv += ["--pids-limit", str(limits.max_processes)]
        if limits.memory_bytes is not None:
            argv += [
                "--memory",
                str(limits.memory_bytes),
                "--memory-swap",
                str(limits.memory_bytes),
            ]
        if limits.file_size_bytes is not None:
            size = limits.file_size_bytes
            argv += ["--ulimit", f"fsize={size}:{size}"]
        if limits.cpu_seconds is not None:
            argv += ["--ulimit", f"cpu={limits.cpu_seconds}:{limits.cpu_seconds}"]
        for bind in spec.binds:
            readonly = "" if bind.writable else ",readonly"
            argv += [
                "--mount",
                f"type=bind,source={bind.source},target={bind.dest}{readonly}",
            ]
        for key, value in sorted(spec.full_env().items()):
            if key in spec.env and key not in BASE_ENV and not key.startswith("DOCKER"):
                # By name: the value comes from the client's environment and
                # never shows on a command line (it may be a granted secret).
                argv += ["--env", key]
            else:
                argv += ["--env", f"{key}={value}"]
        argv += ["--", self.image, *spec.argv]
        return argv

    def run(self, spec: SandboxSpec) -> SandboxOutcome:
        self.check()
        for path in (spec.workspace, *(b.source for b in spec.binds if b.writable)):
            if os.geteuid() == 0:
                chown_tree(path, *map(int, self.user.split(":")))
        container = f"replayhub-{uuid.uuid4().hex[:16]}"
        capture = HeadTailBuffer(spec.limits.output_bytes)
        started = time.monotonic()
        argv = self.command(spec, container)
        argv[0] = shutil.which(self.docker_path) or self.docker_path
        process = subprocess.Popen(
            argv,
            env=_client_env(dict(spec.env)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        reader = threading.Thread(target=_read_into, args=(process.stdout, capture))
        reader.start()
        timed_out = stopped = False
        deadline = started + spec.limits.wall_seconds
        try:
            while process.poll() is None:
                if time.monotonic() >= deadline:
                    timed_out = True
                elif spec.stop is not None and spec.stop.is_set():
                    stopped = True
                else:
                    time.sleep(0.05)
                    continue
                self._docker("kill", container)
                process.wait()
        finally:
            reader.join()
            oom = self._docker(
                "inspect", "--format", "{{.State.OOMKilled}}", container
            ).strip()
            self._docker("rm", "--force", container)
        code = process.returncode
        fired = "memory" if oom == "true" else ""
        fired = fired or ("wall_time" if timed_out else "stopped" if stopped else "")
        return SandboxOutcome(
            exit_code=None
            if timed_out or stopped
            else (128 - code if code < 0 else code),
            output=capture.text(),
            output_truncated=capture.truncated,
            timed_out=timed_out,
            limit_fired=fired,
            duration_s=time.monotonic() - started,
            limit_backend="docker",
        )

    def _docker(self, *args: str) -> str:
        result = subprocess.run(
            [self.docker_path, *args],
            env=_client_env({}),
            capture_output=True,
            timeout=60,
            check=False,
        )
        return result.stdout.decode(errors="replace")


def _client_env(passed_by_name: dict[str, str]) -> dict[str, str]:
    # The client gets the values the container takes by name, and what it
    # needs to reach the engine; nothing else of the worker's environment.
    env = dict(passed_by_name)
    env["PATH"] = os.environ.get("PATH", os.defpath)
    for key in ("DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT", "HOME"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _read_into(stream, capture: HeadTailBuffer) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):
        capture.feed(chunk)
    stream.close()
