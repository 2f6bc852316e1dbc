"""The runner contract and the pure pieces behind it; no bubblewrap needed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from replayhub.sandbox import (
    WORKSPACE,
    Bind,
    Limits,
    SandboxSpec,
    get_runner,
)
from replayhub.sandbox.bwrap import BwrapRunner
from replayhub.sandbox.cgroups import join_prefix
from replayhub.sandbox.output import HeadTailBuffer


def test_bwrap_is_the_default_runner() -> None:
    runner = get_runner()
    assert isinstance(runner, BwrapRunner)
    assert runner.name == "bwrap"


def test_an_unknown_runner_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown sandbox runner"):
        get_runner("chroot")


def test_the_workspace_is_mounted_at_a_fixed_path() -> None:
    assert WORKSPACE == "/workspace"


def test_only_network_none_is_accepted() -> None:
    with pytest.raises(ValueError, match="network"):
        SandboxSpec(argv=("true",), workspace=Path("/tmp"), network="host")


def test_an_empty_argv_is_rejected() -> None:
    with pytest.raises(ValueError, match="argv"):
        SandboxSpec(argv=(), workspace=Path("/tmp"))


def test_a_malformed_environment_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="environment variable name"):
        SandboxSpec(argv=("true",), workspace=Path("/tmp"), env={"A=B": "x"})


def test_a_relative_workspace_is_rejected() -> None:
    with pytest.raises(ValueError, match="absolute"):
        SandboxSpec(argv=("true",), workspace=Path("ws"))


@pytest.mark.parametrize("dest", ["relative", "/", "/a/../etc", "/a//b", "/a/"])
def test_a_bind_destination_must_be_a_normalised_absolute_path(dest: str) -> None:
    with pytest.raises(ValueError, match="bind dest"):
        Bind(Path("/usr"), dest)


def test_spec_environment_is_layered_over_the_fixed_minimal_environment() -> None:
    spec = SandboxSpec(
        argv=("env",), workspace=Path("/tmp"), env={"LANG": "C", "X": "1"}
    )
    assert spec.full_env() == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/home/sandbox",
        "PWD": "/workspace",
        "LANG": "C",
        "TMPDIR": "/tmp",
        "X": "1",
    }


def test_a_spec_cannot_be_changed_after_creation() -> None:
    env = {"A": "1"}
    spec = SandboxSpec(argv=["true"], workspace=Path("/tmp"), env=env)
    env["A"] = "2"
    assert spec.env["A"] == "1"
    assert spec.argv == ("true",)
    with pytest.raises(TypeError):
        spec.env["A"] = "3"  # type: ignore[index]


def test_limits_reject_nonsense_values() -> None:
    with pytest.raises(ValueError):
        Limits(wall_seconds=0)
    with pytest.raises(ValueError):
        Limits(memory_bytes=-1)


def test_output_under_the_cap_is_kept_whole() -> None:
    buffer = HeadTailBuffer(100)
    buffer.feed(b"hello ")
    buffer.feed(b"world")
    assert buffer.text() == "hello world"
    assert not buffer.truncated


def test_output_over_the_cap_keeps_head_and_tail_around_a_marker() -> None:
    buffer = HeadTailBuffer(10)
    for chunk in (b"HEAD", b"-middle-" * 1000, b"TAIL!"):
        buffer.feed(chunk)
    text = buffer.text()
    assert buffer.truncated
    assert text.startswith("HEAD-")
    assert text.endswith("TAIL!")
    assert "bytes of output omitted" in text


def test_output_capture_stays_bounded_however_much_is_fed() -> None:
    buffer = HeadTailBuffer(1000)
    for _ in range(10_000):
        buffer.feed(b"x" * 1000)
    text = buffer.text()
    assert len(text) < 1000 + 100
    assert buffer.total == 10_000_000


def test_invalid_utf8_in_output_is_replaced_not_fatal() -> None:
    buffer = HeadTailBuffer(100)
    buffer.feed(b"ok \xff\xfe done")
    assert buffer.text() == "ok \ufffd\ufffd done"


def test_cgroup_join_refuses_anything_but_a_cgroup_procs_file() -> None:
    root = Path("/sys/fs/cgroup")
    with pytest.raises(ValueError, match=r"cgroup\.procs"):
        join_prefix("/bin/sh", root, [Path("/usr/bin/prlimit")])
    with pytest.raises(ValueError, match=r"cgroup\.procs"):
        join_prefix("/bin/sh", root, [Path("/etc/cgroup.procs")])


def test_cgroup_join_writes_only_the_given_files_then_execs_the_command(
    tmp_path: Path,
) -> None:
    # Stand-in cgroup tree: the join script runs as root and writes wherever it
    # is pointed, so the arguments after the procs files must never be taken
    # for more files to write.
    first, second = tmp_path / "a" / "cgroup.procs", tmp_path / "b" / "cgroup.procs"
    for procs in (first, second):
        procs.parent.mkdir()
        procs.touch()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    argv = [*join_prefix("/bin/sh", tmp_path, [first, second]), "echo", "--", "x"]
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=True)
    assert result.stdout == "-- x\n"
    assert first.read_text().strip().isdigit()
    assert first.read_text() == second.read_text()
    assert list(cwd.iterdir()) == []
