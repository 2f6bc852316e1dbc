"""The Docker runner: its container config, and real containers on podman's
Docker-compatible service, checked from inside."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from replayhub.sandbox import Bind, Limits, SandboxSpec, SandboxUnavailable, get_runner
from replayhub.sandbox.docker import DEADLINE_LABEL, DockerRunner
from replayhub.sandbox.engine import Engine
from replayhub.sandbox.network import relay_mount
from tests.sandbox.engines import Podman

IMAGE = "python@sha256:" + "ab" * 32
LIMITS = Limits(
    wall_seconds=30,
    memory_bytes=256 * 1024**2,
    max_processes=64,
    tmpfs_bytes=16 * 1024**2,
    file_size_bytes=10**6,
)


def spec(workspace: Path, *argv: str, **kw) -> SandboxSpec:
    kw.setdefault("limits", LIMITS)
    return SandboxSpec(argv=argv or ("true",), workspace=workspace, **kw)


def test_the_container_is_isolated_by_its_config(tmp_path: Path) -> None:
    config = get_runner("docker", image=IMAGE).container_config(
        spec(tmp_path, binds=(Bind(Path("/srv"), "/srv"),))
    )

    host = config["HostConfig"]
    assert host["NetworkMode"] == "none" and config["NetworkDisabled"]
    assert host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"] and host["Init"]
    assert host["PidsLimit"] == 64
    assert host["Memory"] == host["MemorySwap"] == 256 * 1024**2
    assert config["User"] == "65534:65534"
    assert {"Type": "bind", "Source": str(tmp_path), "Target": "/workspace"} in host[
        "Mounts"
    ]
    assert {
        "Type": "bind",
        "Source": "/srv",
        "Target": "/srv",
        "ReadOnly": True,
    } in host["Mounts"]


def test_the_argv_runs_as_given_whatever_the_image_entrypoint(tmp_path: Path) -> None:
    config = get_runner("docker", image=IMAGE).container_config(
        spec(tmp_path, "python3", "-m", "unittest", "; rm -rf /")
    )
    assert config["Entrypoint"] == ["python3"]
    assert config["Cmd"] == ["-m", "unittest", "; rm -rf /"]
    assert config["Image"] == IMAGE


@pytest.mark.parametrize("image", ["python:3.11", "python@sha256:abc", ""])
def test_an_image_not_pinned_by_digest_is_refused(image: str) -> None:
    with pytest.raises(SandboxUnavailable, match="pinned by digest"):
        get_runner("docker", image=image).check()


def test_without_an_engine_the_runner_is_unavailable_and_runs_nothing(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran-on-host"
    runner = get_runner("docker", image=IMAGE, host="unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailable, match="no Docker engine answers"):
        runner.run(SandboxSpec(argv=("touch", str(marker)), workspace=tmp_path))
    assert not marker.exists()


def test_a_tcp_engine_is_refused() -> None:
    runner = get_runner("docker", image=IMAGE, host="tcp://10.0.0.1:2375")
    with pytest.raises(SandboxUnavailable, match="unix socket"):
        runner.check()


# -- against a real engine --------------------------------------------------


@pytest.fixture
def docker(podman: Podman) -> DockerRunner:
    return DockerRunner(podman.image, host=podman.host)


# Reports from inside what the container got, with busybox alone.
INSIDE = r"""
echo "uid=$(id -u) gid=$(id -g)"
grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status
grep NoNewPrivs /proc/self/status
if (echo x > /probe) 2>/dev/null; then echo "root=writable"
else echo "root=read-only"; fi
for m in /tmp /home/sandbox /run /var/tmp /dev/shm; do
  echo "tmpfs $m $(awk -v m=$m '$2 == m && $3 == "tmpfs" {print $4}' /proc/mounts)"
done
echo "memory=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes \
  /sys/fs/cgroup/memory.max 2>/dev/null)"
echo "pids=$(cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null)"
echo "interfaces=$(ls /sys/class/net | tr '\n' ' ')"
awk '$3 !~ /^(tmpfs|proc|sysfs|cgroup2?|devpts|mqueue)$/ && $4 ~ /^rw/ {
  print "writable " $2 }' /proc/mounts
echo "cwd=$(pwd) home=$HOME"
"""


def test_inside_the_container_the_limits_and_isolation_are_in_force(
    docker: DockerRunner, workspace: Path
) -> None:
    outcome = docker.run(spec(workspace, "sh", "-c", INSIDE))

    assert outcome.exit_code == 0, outcome.output
    lines = outcome.output.splitlines()
    assert "uid=65534 gid=65534" in lines, outcome.output
    for cap in ("CapEff", "CapPrm", "CapBnd"):
        assert f"{cap}:\t0000000000000000" in lines, outcome.output
    assert "NoNewPrivs:\t1" in lines, outcome.output
    assert "root=read-only" in lines, outcome.output
    size = f"size={16 * 1024}k"
    for place in ("/tmp", "/home/sandbox", "/run", "/var/tmp", "/dev/shm"):
        (line,) = [x for x in lines if x.startswith(f"tmpfs {place} ")]
        assert size in line, line
    assert f"memory={256 * 1024**2}" in lines, outcome.output
    assert "pids=64" in lines, outcome.output
    assert "interfaces=lo " in lines, outcome.output
    assert [x for x in lines if x.startswith("writable ")] == ["writable /workspace"], (
        outcome.output
    )
    assert "cwd=/workspace home=/home/sandbox" in lines, outcome.output
    assert outcome.limit_backend == "engine cgroups", outcome.output


def test_output_exit_status_and_workspace_writes_come_back(
    docker: DockerRunner, workspace: Path
) -> None:
    outcome = docker.run(
        spec(workspace, "sh", "-c", "echo out; echo err >&2; echo hi > f; exit 3")
    )

    assert outcome.exit_code == 3
    assert outcome.output == "out\nerr\n"
    assert (workspace / "f").read_text() == "hi\n"


def test_the_wall_clock_kills_the_container_and_none_is_left(
    docker: DockerRunner, podman: Podman, workspace: Path
) -> None:
    outcome = docker.run(
        spec(workspace, "sh", "-c", "echo started; sleep 60", limits=Limits(1))
    )

    assert outcome.timed_out and outcome.limit_fired == "wall_time"
    assert outcome.exit_code is None and "started" in outcome.output
    assert outcome.duration_s < 10
    assert podman.containers() == []


def test_a_memory_hog_is_killed_by_the_engine(
    docker: DockerRunner, workspace: Path
) -> None:
    # busybox's awk grows a string until the cgroup's cap ends it.
    hog = 'BEGIN { s = "x"; while (1) s = s s }'
    outcome = docker.run(
        spec(
            workspace,
            "awk",
            hog,
            limits=Limits(30, memory_bytes=64 * 1024**2, file_size_bytes=None),
        )
    )

    assert outcome.limit_fired == "memory", outcome
    assert outcome.exit_code == 137


def test_the_relay_reaches_a_host_socket_in_an_image_without_python(
    docker: DockerRunner, workspace: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import socket
    import threading

    net = Path(workspace.parent / f"{workspace.name}-net")
    net.mkdir(mode=0o755)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(net / "gateway.sock"))
    (net / "gateway.sock").chmod(0o666)
    server.listen()

    def answer() -> None:
        client, _ = server.accept()
        with client:
            request = client.recv(1000)
            client.sendall(b"HTTP/1.0 200 OK\r\n\r\nrelayed " + request[:3])

    threading.Thread(target=answer, daemon=True).start()
    mount = relay_mount(net, {8080: "gateway.sock"})
    try:
        outcome = docker.run(
            spec(
                workspace,
                *mount.wrap(["wget", "-q", "-O", "-", "http://127.0.0.1:8080/"]),
                binds=(mount.bind,),
            )
        )
    finally:
        server.close()
        import shutil

        shutil.rmtree(net, ignore_errors=True)

    assert outcome.exit_code == 0, outcome.output
    assert outcome.output == "relayed GET"


def test_a_container_left_by_a_dead_worker_is_removed_by_the_next_run(
    docker: DockerRunner, podman: Podman, workspace: Path
) -> None:
    engine = Engine(podman.host)
    config = docker.container_config(spec(workspace, "sleep", "300"))
    # As a worker killed mid-run would leave it: running, past its deadline.
    config["Labels"][DEADLINE_LABEL] = str(int(time.time()) - 3600)
    orphan = engine.call("POST", "/containers/create", config)["Id"]
    engine.call("POST", f"/containers/{orphan}/start")
    alive = docker.run(spec(workspace, "true", limits=Limits(30)))

    assert alive.exit_code == 0
    assert podman.containers() == []
