"""The Docker runner, on the exact command it builds; a live run needs an engine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from replayhub.sandbox import Bind, Limits, SandboxSpec, SandboxUnavailable, get_runner

IMAGE = "python@sha256:" + "ab" * 32


def spec(tmp_path, **kw):
    return SandboxSpec(
        argv=("python3", "-m", "unittest", "; rm -rf /"),
        workspace=tmp_path,
        env={"REPLAYHUB_TASK_ID": "t-1", "API_KEY": "s3cret"},
        limits=Limits(
            wall_seconds=30,
            memory_bytes=256 * 1024**2,
            max_processes=64,
            tmpfs_bytes=64 * 1024**2,
            file_size_bytes=10**6,
        ),
        binds=(Bind(tmp_path, "/replayhub", writable=True),),
        **kw,
    )


def test_the_command_isolates_the_container(tmp_path):
    argv = get_runner("docker", image=IMAGE).command(spec(tmp_path), "replayhub-x")

    joined = " ".join(argv)
    for flag in [
        "--network none",
        "--read-only",
        "--user 65534:65534",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--pids-limit 64",
        f"--memory {256 * 1024**2}",
        f"--memory-swap {256 * 1024**2}",
        "--ulimit core=0:0",
        "--ulimit fsize=1000000:1000000",
        "--workdir /workspace",
        "--init",
    ]:
        assert flag in joined, flag
    assert f"type=bind,source={tmp_path},target=/workspace" in argv
    assert f"type=bind,source={tmp_path},target=/replayhub" in argv
    assert any(a.startswith("/tmp:rw,nosuid,nodev,size=67108864") for a in argv)


def test_the_command_ends_with_the_pinned_image_and_the_argv_untouched(tmp_path):
    argv = get_runner("docker", image=IMAGE).command(spec(tmp_path), "c")

    tail = argv[argv.index("--") :]
    assert tail == ["--", IMAGE, "python3", "-m", "unittest", "; rm -rf /"]


def test_secret_values_never_appear_on_the_command_line(tmp_path):
    argv = get_runner("docker", image=IMAGE).command(spec(tmp_path), "c")

    assert "s3cret" not in " ".join(argv)
    at = argv.index("API_KEY")
    assert argv[at - 1 : at + 1] == ["--env", "API_KEY"]
    assert "HOME=/home/sandbox" in argv


def test_read_only_binds_are_mounted_read_only(tmp_path):
    ro = SandboxSpec(
        argv=("true",), workspace=tmp_path, binds=(Bind(Path("/srv"), "/srv"),)
    )
    argv = get_runner("docker", image=IMAGE).command(ro, "c")
    assert "type=bind,source=/srv,target=/srv,readonly" in argv


@pytest.mark.parametrize("image", ["python:3.11", "python@sha256:abc", ""])
def test_an_image_not_pinned_by_digest_is_refused(tmp_path, image):
    with pytest.raises(SandboxUnavailable, match="pinned by digest"):
        get_runner("docker", image=image).check()


def test_without_an_engine_the_runner_is_unavailable_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran-on-host"
    runner = get_runner("docker", image=IMAGE, docker_path="/nonexistent/docker")
    with pytest.raises(SandboxUnavailable):
        runner.run(SandboxSpec(argv=("touch", str(marker)), workspace=tmp_path))
    assert not marker.exists()


def _engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(
        ["docker", "version", "--format", "{{.Server.Version}}"],
        capture_output=True,
        timeout=20,
        check=False,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _engine_answers(), reason="no Docker engine answers here")
def test_a_real_container_runs_isolated(tmp_path):  # pragma: no cover - needs engine
    image = subprocess.run(
        ["docker", "inspect", "--format", "{{index .RepoDigests 0}}", "busybox"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not image:
        pytest.skip("no local busybox image with a digest")
    runner = get_runner("docker", image=image)
    outcome = runner.run(
        SandboxSpec(argv=("sh", "-c", "id -u; echo hi > f"), workspace=tmp_path)
    )
    assert outcome.exit_code == 0
    assert "65534" in outcome.output
    assert (tmp_path / "f").read_text() == "hi\n"
