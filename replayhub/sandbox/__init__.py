"""Isolated execution of recorded agent runs; see ``base`` for the runner contract.

A runner takes a ``SandboxSpec`` (what to run, where, with which limits) and
returns a ``SandboxOutcome``. There is no host fallback: a runner that cannot
isolate the command raises ``SandboxUnavailable``, and the replay ends
``inconclusive / sandbox_unavailable``. Every outcome names its ``runner``
and ``isolation``; the replay's page shows them beside the limit backend,
and the worker check lists which runners pass their self-check on that
worker (``health.runner_availability``). ``tests/sandbox/test_battery.py``
makes the same escape attempts against each runner that passes it.

Modules:

- base: the contract (``SandboxSpec``, ``Limits``, ``Bind``, ``Runner``,
  ``SandboxOutcome``, ``SandboxUnavailable``, ``get_runner``).
- bwrap: the bubblewrap runner, the default on Linux (no daemon): its
  docstring holds the isolation, the launch chain, the limits and the two
  host paths unprivileged bwrap cannot hide. bwrapargs builds bwrap's option
  list (namespaces, mounts, environment, seccomp); supervise pumps the
  output of a running sandbox and kills it without leaving an orphan.
- docker and engine: the Docker runner (``isolation`` "oci"), speaking the
  Engine API over its unix socket with ``http.client``; any Docker-API
  engine serves it (the tests use podman's service).
- gvisor: the gVisor runner (``runsc``), a user-space kernel per run.
- cgroups: memory and process caps from whatever the host offers (a systemd
  scope, a raw cgroup v1 or v2 directory, or rlimits only).
- watchdog: caps measured from outside a running sandbox (disk; memory and
  processes where there is no cgroup).
- seccomp: the system calls a sandboxed command may not make.
- network, relay, relaybin (and ``relay.c``): the only way out, host unix
  sockets relayed to the sandbox's loopback.
- output: bounded capture of a command's output, head and rolling tail.

Rules every runner keeps:

- As root, the command runs as an unprivileged host uid (65534 by default):
  a process mapped to host root could read root-only files through the
  read-only binds. The workspace and writable binds are chowned to it, and
  every bind source must be reachable by it, which is why
  ``REPLAYHUB_WORK_DIR`` falls back to a folder in ``/var/tmp`` when the
  checkout lives under a private home.
- Nothing of the worker's environment (database URL, keys) is readable
  inside, neither in the command's environment nor in ``/proc/<pid>/environ``
  of any process it can see.
- Network off: only loopback exists inside. The gateway and the egress proxy
  (``replayhub.gateway``) are reached through a read-only bind of a socket
  directory (``network``) by every runner; Docker and gVisor keep no network
  but loopback.
- Trees an agent wrote are walked iteratively and relative to directory
  descriptors, never through a symlink (``lib.fstree``): the chown before a
  run and the removal after it handle a tree thousands of levels deep.
- Limits: the wall clock by killing the sandbox's init and the process
  group; memory and process count by a cgroup where the host allows one;
  CPU seconds, file size, open files and core dumps by rlimits; output kept
  as head and tail with a truncation flag. With rlimits only (a worker
  container whose cgroup filesystem is read-only) RLIMIT_AS is per process,
  so the watchdog also sums the resident memory of every process the run
  started and counts them, sampling every 0.25 s (a fast allocation can
  overshoot briefly); ``check --deploy`` warns of it (``replayhub.W001``).
- A command that cannot be executed reports 127, as a shell would.

Departure: the disk cap is a watchdog, not a size-capped filesystem. A tmpfs
made inside bwrap dies before the capture reads the workspace, a host tmpfs
holds the cap in memory, and loop devices and project quotas are rarely
available to a worker container. The watchdog measures the workspace and the
writable binds every 0.25 s (longer for a tree slow to measure; a sparse
file counts at its size) and stops the run over the cap, with RLIMIT_FSIZE
lowered to the cap so no single file outgrows it between measurements. The
Docker and gVisor runners poll the same watchdog for the disk only (their
kernels cap memory and processes).
"""

from __future__ import annotations

from replayhub.sandbox.base import (
    WORKSPACE,
    Bind,
    Limits,
    Runner,
    SandboxOutcome,
    SandboxSpec,
    SandboxUnavailable,
    get_runner,
)

__all__ = [
    "WORKSPACE",
    "Bind",
    "Limits",
    "Runner",
    "SandboxOutcome",
    "SandboxSpec",
    "SandboxUnavailable",
    "get_runner",
]
