"""Which OCI runtime an engine needs on this host's cgroup layout: the
detection as a pure function over both layouts, and the real engine on the
layout this machine has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayhub.sandbox import SandboxSpec, SandboxUnavailable
from replayhub.sandbox.cgroups import (
    HYBRID,
    LEGACY,
    NONE,
    UNIFIED,
    cgroup_layout,
    cgroup_mounts,
    host_oci_runtime,
    oci_runtime_for,
)
from replayhub.sandbox.docker import DockerRunner
from replayhub.sandbox.engine import refusal
from tests.sandbox.engines import Podman

ROOT_LINE = "24 1 0:22 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
UNIFIED_INFO = (
    ROOT_LINE + "30 24 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate\n"
)
HYBRID_INFO = ROOT_LINE + (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)
LEGACY_INFO = "\n".join(HYBRID_INFO.splitlines()[:-1]) + "\n"
# crun's answer to an attach on a hybrid host, as podman 4.3 sends it.
CRUN_HYBRID = json.dumps(
    {
        "cause": "OCI runtime error",
        "message": "preparing container 6ff1 for attach: crun: cgroups in hybrid "
        "mode not supported, drop all controllers from cgroupv2: OCI runtime error",
        "response": 409,
    }
).encode()


@pytest.mark.parametrize(
    ("mountinfo", "layout"),
    [
        (UNIFIED_INFO, UNIFIED),
        (HYBRID_INFO, HYBRID),
        (LEGACY_INFO, LEGACY),
        (ROOT_LINE, NONE),
        ("", NONE),
    ],
)
def test_the_layout_is_read_from_the_mount_table(mountinfo: str, layout: str) -> None:
    assert cgroup_layout(cgroup_mounts(mountinfo)) == layout


def test_a_mount_point_merely_named_cgroup_is_not_a_cgroup_hierarchy() -> None:
    info = ROOT_LINE + "50 24 0:40 / /srv/cgroup rw - ext4 /dev/vdb rw\n"
    assert cgroup_mounts(info) == []


def test_garbled_lines_are_ignored() -> None:
    info = "nonsense\n - cgroup2\n1 2 3 - \n" + HYBRID_INFO
    assert cgroup_layout(cgroup_mounts(info)) == HYBRID


@pytest.mark.parametrize(
    ("layout", "controllers", "runtime"),
    [
        (UNIFIED, "cpuset cpu io memory pids\n", "crun"),
        (HYBRID, "hugetlb\n", "runc"),
        (HYBRID, "\n", "crun"),
        (LEGACY, "", "crun"),
        (NONE, "", "crun"),
    ],
)
def test_runc_only_where_crun_refuses(layout: str, controllers: str, runtime: str):
    assert oci_runtime_for(layout, controllers) == runtime


def test_cruns_hybrid_refusal_reads_as_one_line_naming_the_cure() -> None:
    line = refusal(409, CRUN_HYBRID)
    assert "\n" not in line and line.startswith("409 ")
    assert "hybrid" in line and 'runtime = "runc"' in line


def test_any_other_refusal_is_its_message_on_one_line() -> None:
    assert refusal(500, b'{"message": "no\\nspace   left"}') == "500 no space left"
    assert refusal(502, b"<html>\n" + b"x" * 9000) == "502 <html> " + "x" * 293
    assert refusal(500, b"[" * 5000) == "500 " + "[" * 300


def test_the_engine_runs_containers_with_the_runtime_detected_here(
    podman: Podman, tmp_path: Path
) -> None:
    layout, runtime = host_oci_runtime()
    conf = (podman.directory / "containers.conf").read_text()
    assert f'runtime = "{runtime}"' in conf
    outcome = DockerRunner(podman.image, host=podman.host).run(
        SandboxSpec(argv=("echo", f"ran on {layout}"), workspace=tmp_path)
    )
    assert outcome.exit_code == 0 and f"ran on {layout}" in outcome.output


def test_crun_on_this_host_runs_or_is_refused_in_one_line_as_the_layout_says(
    tmp_path: Path,
) -> None:
    _, runtime = host_oci_runtime()
    engine = Podman.start(runtime="crun")
    try:
        runner = DockerRunner(engine.image, host=engine.host)
        spec = SandboxSpec(argv=("echo", "ran"), workspace=tmp_path)
        if runtime == "crun":
            assert runner.run(spec).output.strip() == "ran"
        else:
            with pytest.raises(SandboxUnavailable) as refused:
                runner.run(spec)
            message = str(refused.value)
            assert "\n" not in message and "hybrid" in message
            assert 'runtime = "runc"' in message
    finally:
        engine.stop()
