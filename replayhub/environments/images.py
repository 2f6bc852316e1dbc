"""Root images: an image's root filesystem as the sandbox's root.

A project may name a root image (``name@sha256:<digest>``). The admin imports
it on each worker from an OCI image layout (made by ``skopeo copy`` where a
registry is reachable, or unpacked from a tarball they were given):
``manage.py image_import REF --layout DIR[:TAG]`` checks that the layout's
manifest has the reference's digest and unpacks it with ``umoci`` under
``REPLAYHUB_IMAGES_DIR/<digest>/rootfs``. The bubblewrap runner then binds
that tree read-only in place of the host's ``/usr``, ``/bin``, ``/lib`` and
``/etc`` files; the Docker runner runs the image itself.

A record whose image digest differs from the project's root image is a
provenance warning, or ``inconclusive / image_mismatch`` when the project
requires the match.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import uuid
from pathlib import Path

from django.conf import settings

from replayhub.lib.fstree import remove_tree
from replayhub.models import Project
from replayhub.sandbox import Runner, SandboxUnavailable, get_runner

_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})\Z")
UMOCI_TIMEOUT = 600


class ImageError(Exception):
    """An image could not be imported; the message says why in one sentence."""


def image_digest(ref: str | None) -> str:
    """``sha256:<hex>`` of a pinned reference, "" for a floating one."""
    match = _DIGEST.search(ref or "")
    return match.group(1) if match else ""


def mismatch(root_image: str, recorded_image: str | None) -> str:
    """Why the record's image is not the project's root image ("" when it is,
    or when either digest is unknown). Pure."""
    ours, theirs = image_digest(root_image), image_digest(recorded_image)
    if not ours or not theirs or ours == theirs:
        return ""
    return (
        f"the record's sandbox image digest {theirs[:19]}… differs from the "
        f"project's root image {ours[:19]}…"
    )


def images_dir() -> Path:
    return Path(settings.REPLAYHUB_IMAGES_DIR)


def rootfs_path(ref: str) -> Path | None:
    digest = image_digest(ref)
    if not digest:
        return None
    return images_dir() / digest.replace(":", "-") / "rootfs"


def rootfs_for(project: Project) -> Path | None:
    """The unpacked root filesystem of the project's root image on this worker."""
    path = rootfs_path(project.root_image) if project.root_image else None
    return path if path is not None and (path / "usr").is_dir() else None


def root_label(project: Project) -> str:
    """What the sandbox's root is, for the environment key."""
    if project.runner == "docker":
        return f"docker:{project.root_image or project.sandbox_image}"
    if rootfs_for(project):
        return f"image:{image_digest(project.root_image)}"
    return "host"


def runner_for(project: Project) -> Runner:
    """The project's runner, on its root image where one is unpacked here.

    Raises SandboxUnavailable when the runner does not give the isolation
    the project requires (the database already refuses such a project; this
    holds the line should a runner's isolation change).
    """
    if project.runner == "docker":
        runner = get_runner("docker", image=project.root_image or project.sandbox_image)
    else:
        root = rootfs_for(project)
        runner = (
            get_runner(project.runner, root=root)
            if root
            else get_runner(project.runner)
        )
    if project.min_isolation and runner.isolation != project.min_isolation:
        raise SandboxUnavailable(
            f"the project requires {project.min_isolation} isolation and its "
            f"runner {runner.name} gives {runner.isolation}."
        )
    return runner


def warnings_for(project: Project, recorded_image: str | None) -> list[str]:
    """Provenance warnings about the sandbox's root on this worker."""
    found = []
    if problem := mismatch(project.root_image, recorded_image):
        found.append(problem)
    if project.root_image and project.runner != "docker" and not rootfs_for(project):
        found.append(
            f"the root image {project.root_image!r} is not unpacked on this worker "
            "(manage.py image_import), so the sandbox ran on the host's /usr"
        )
    return found


def layout_digest(layout: Path, tag: str) -> str:
    """The manifest digest the layout's index gives ``tag``."""
    try:
        index = json.loads((layout / "index.json").read_text())
    except (OSError, ValueError) as error:
        raise ImageError(f"{layout} is not an OCI image layout ({error})") from error
    for manifest in index.get("manifests", []):
        annotations = manifest.get("annotations") or {}
        if annotations.get("org.opencontainers.image.ref.name") == tag:
            return str(manifest.get("digest", ""))
    raise ImageError(f"the layout {layout} has no tag {tag!r}")


def import_layout(ref: str, layout: Path, tag: str) -> Path:
    """Unpack ``layout:tag`` as the root filesystem of ``ref``; returns it.

    The layout's manifest digest must be the one ``ref`` pins: an image that
    is not the named one never becomes a root.
    """
    wanted = image_digest(ref)
    if not wanted:
        raise ImageError(f"{ref!r} is not pinned by digest (name@sha256:…)")
    found = layout_digest(layout, tag)
    if found != wanted:
        raise ImageError(
            f"the layout's {tag!r} is {found or 'unknown'}, not {wanted} as {ref!r} "
            "pins"
        )
    umoci = shutil.which("umoci")
    if umoci is None:
        raise ImageError("umoci is not installed (apt-get install umoci)")
    target = rootfs_path(ref)
    assert target is not None
    bundle = target.parent
    staging = bundle.parent / f".unpack-{uuid.uuid4().hex[:8]}"
    staging.parent.mkdir(parents=True, exist_ok=True)
    _keep_to_the_sandbox(staging.parent)
    # Rootless even as root: a hostile layer's device nodes are not made, and
    # nothing is owned by the uids the layer names.
    argv = [umoci, "unpack", "--rootless", "--image", f"{layout}:{tag}", str(staging)]
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=UMOCI_TIMEOUT,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        check=False,
    )
    if result.returncode != 0:
        remove_tree(staging)
        line = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise ImageError(f"umoci could not unpack {layout}:{tag}: {line}")
    _defang(staging / "rootfs")
    # The sandbox uid must reach the tree; umoci makes its bundle private.
    staging.chmod(0o755)
    (staging / "rootfs").chmod(0o755)
    remove_tree(bundle)
    os.rename(staging, bundle)
    return target


def _keep_to_the_sandbox(directory: Path) -> None:
    """The images directory: this worker's, and the sandbox's group may pass
    through it (bubblewrap binds a root from there as the sandbox uid); no
    other user reaches what is in it."""
    if os.geteuid() == 0:
        group = getattr(get_runner("bwrap"), "sandbox_gid", 65534)
        os.chown(directory, 0, group)
    directory.chmod(0o750 if os.geteuid() == 0 else 0o711)


def _defang(rootfs: Path) -> None:
    """What an image may not bring onto the worker host: device nodes, FIFOs
    and sockets are removed, setuid and setgid bits cleared, and anything
    owned by another user given to this one. Links are never followed."""
    uid, gid = os.geteuid(), os.getegid()
    stack = [rootfs]
    while stack:
        directory = stack.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                mode = info.st_mode
                if stat.S_ISDIR(mode):
                    stack.append(Path(entry.path))
                elif not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                    os.unlink(entry.path)
                    continue
                if (info.st_uid, info.st_gid) != (uid, gid):
                    os.lchown(entry.path, uid, gid)
                if not stat.S_ISLNK(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
                    os.chmod(entry.path, stat.S_IMODE(mode) & ~0o6000)
