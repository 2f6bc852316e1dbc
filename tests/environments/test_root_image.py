"""A recorded image as the sandbox's root: an OCI layout built here with umoci,
unpacked on the worker, and bubblewrap running on it instead of the host's /usr."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from replayhub.environments.images import (
    image_digest,
    mismatch,
    root_label,
    rootfs_for,
    runner_for,
    warnings_for,
)
from replayhub.lib.fstree import remove_tree
from replayhub.models import Project
from replayhub.sandbox import Limits, SandboxSpec
from replayhub.sandbox.docker import DockerRunner

BUSYBOX_LINKS = ("sh", "ls", "cat", "echo", "test", "touch")


def umoci(*args: str) -> None:
    argv = ["umoci", *args]
    if os.geteuid() != 0:
        argv.insert(2, "--rootless")
    subprocess.run(argv, check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> tuple[Path, str]:
    """A one-layer image: a static busybox and a marker file, nothing else."""
    work = tmp_path_factory.mktemp("oci")
    oci = work / "layout"
    subprocess.run(["umoci", "init", "--layout", str(oci)], check=True, timeout=60)
    subprocess.run(["umoci", "new", "--image", f"{oci}:tiny"], check=True, timeout=60)
    bundle = work / "bundle"
    umoci("unpack", "--image", f"{oci}:tiny", str(bundle))
    rootfs = bundle / "rootfs"
    (rootfs / "usr" / "bin").mkdir(parents=True)
    (rootfs / "usr" / "share").mkdir()
    shutil.copy2("/bin/busybox", rootfs / "usr" / "bin" / "busybox")
    for name in BUSYBOX_LINKS:
        (rootfs / "usr" / "bin" / name).symlink_to("busybox")
    (rootfs / "bin").symlink_to("usr/bin")
    (rootfs / "usr" / "share" / "marker").write_text("tiny image\n")
    umoci("repack", "--image", f"{oci}:tiny", str(bundle))
    index = json.loads((oci / "index.json").read_text())
    digest = index["manifests"][0]["digest"]
    return oci, f"registry.example/tiny@{digest}"


@pytest.fixture
def images(settings):
    root = Path(settings.REPLAYHUB_WORK_DIR) / f"images-{uuid.uuid4().hex[:8]}"
    settings.REPLAYHUB_IMAGES_DIR = root
    yield root
    remove_tree(root)


@pytest.mark.django_db
def test_the_imported_image_is_the_sandbox_root_and_host_usr_is_not_visible(
    layout, images, tmp_path, capsys
):
    oci, ref = layout
    call_command("image_import", ref, "--layout", f"{oci}:tiny")
    assert "unpacked" in capsys.readouterr().out
    project = Project.objects.create(slug="tiny", repo_path="/srv/x", root_image=ref)
    workspace = images / "ws"
    workspace.mkdir(parents=True)

    runner = runner_for(project)
    outcome = runner.run(
        SandboxSpec(
            argv=(
                "sh",
                "-c",
                "cat /usr/share/marker; ls /usr/bin; "
                "test -e /usr/bin/python3 && echo HOST-PYTHON-VISIBLE; "
                "touch /usr/share/x 2>/dev/null || echo usr-read-only",
            ),
            workspace=workspace,
            limits=Limits(wall_seconds=30),
        )
    )

    assert outcome.exit_code == 0, outcome.output
    assert "tiny image" in outcome.output
    assert "busybox" in outcome.output
    assert "HOST-PYTHON-VISIBLE" not in outcome.output
    assert "usr-read-only" in outcome.output
    assert root_label(project) == f"image:{image_digest(ref)}"
    assert warnings_for(project, ref) == []


def test_a_layout_whose_digest_is_not_the_reference_is_refused(layout, images):
    oci, ref = layout
    other = ref.split("@")[0] + "@sha256:" + "0" * 64

    with pytest.raises(CommandError, match="not sha256:0000"):
        call_command("image_import", other, "--layout", f"{oci}:tiny")
    assert not images.exists() or not any(images.iterdir())


def test_a_floating_reference_is_refused(layout, images):
    oci, _ = layout
    with pytest.raises(CommandError, match="not pinned by digest"):
        call_command(
            "image_import", "registry.example/tiny:latest", "--layout", str(oci)
        )


@pytest.mark.django_db
def test_without_an_unpacked_copy_the_host_root_is_used_with_a_warning(images):
    ref = "registry.example/tiny@sha256:" + "a" * 64
    project = Project.objects.create(slug="tiny", repo_path="/srv/x", root_image=ref)

    assert rootfs_for(project) is None
    assert root_label(project) == "host"
    (warning,) = warnings_for(project, ref)
    assert "not unpacked on this worker" in warning


def test_a_record_from_another_image_is_a_mismatch():
    ours = "registry.example/tiny@sha256:" + "a" * 64
    theirs = "registry.example/tiny@sha256:" + "b" * 64

    assert "differs from the project's root image" in mismatch(ours, theirs)
    assert mismatch(ours, ours) == ""
    assert mismatch(ours, "python:3.12") == ""
    assert mismatch("", theirs) == ""


@pytest.mark.django_db
def test_the_docker_runner_runs_the_root_image_itself(tmp_path):
    ref = "registry.example/tiny@sha256:" + "c" * 64
    project = Project.objects.create(
        slug="tiny",
        repo_path="/srv/x",
        runner="docker",
        root_image=ref,
        sandbox_image="python:3.12@sha256:" + "d" * 64,
    )

    runner = runner_for(project)

    assert isinstance(runner, DockerRunner)
    config = runner.container_config(SandboxSpec(argv=("true",), workspace=tmp_path))
    assert config["Image"] == ref and config["Entrypoint"] == ["true"]


@pytest.fixture(scope="module")
def hostile_layout(tmp_path_factory) -> tuple[Path, str]:
    """A layer as root could make it: a device node, a FIFO, a setuid-root and
    a setgid file, and a file of another user."""
    if os.geteuid() != 0:
        pytest.skip("only root can build such a layer")
    work = tmp_path_factory.mktemp("hostile")
    oci = work / "layout"
    subprocess.run(["umoci", "init", "--layout", str(oci)], check=True, timeout=60)
    subprocess.run(["umoci", "new", "--image", f"{oci}:bad"], check=True, timeout=60)
    bundle = work / "bundle"
    subprocess.run(
        ["umoci", "unpack", "--image", f"{oci}:bad", str(bundle)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    rootfs = bundle / "rootfs"
    (rootfs / "dev").mkdir()
    os.mknod(rootfs / "dev" / "mem", 0o666 | stat.S_IFCHR, os.makedev(1, 1))
    os.mkfifo(rootfs / "fifo")
    shell = rootfs / "rootshell"
    shutil.copy2("/bin/busybox", shell)
    shell.chmod(0o4755)
    (rootfs / "groupie").write_text("x")
    (rootfs / "groupie").chmod(0o2755)
    (rootfs / "theirs").write_text("y")
    os.chown(rootfs / "theirs", 1234, 1234)
    subprocess.run(
        ["umoci", "repack", "--image", f"{oci}:bad", str(bundle)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    index = json.loads((oci / "index.json").read_text())
    return oci, f"registry.example/bad@{index['manifests'][0]['digest']}"


def test_an_imported_image_brings_no_device_setuid_or_foreign_file(
    hostile_layout, images
):
    oci, ref = hostile_layout
    call_command("image_import", ref, "--layout", f"{oci}:bad")

    root = images / image_digest(ref).replace(":", "-") / "rootfs"
    assert (root / "rootshell").is_file()
    for path in root.rglob("*"):
        info = path.lstat()
        assert (
            stat.S_ISREG(info.st_mode)
            or stat.S_ISDIR(info.st_mode)
            or (stat.S_ISLNK(info.st_mode))
        ), path
        assert not info.st_mode & 0o6000, path
        assert info.st_uid == os.geteuid(), path
    # Other users cannot reach the images; the sandbox's group can pass.
    assert stat.S_IMODE(images.stat().st_mode) == 0o750
