"""Real engines for the OCI runners' tests: podman's Docker-compatible
service and gVisor's ``runsc``, each on a root filesystem made here.

No registry: the image is a root filesystem built in the test (a static
busybox, ``/lib`` and ``/lib64`` linked into ``/usr`` so that the host's
``/usr``, bound read-only like bubblewrap binds it, can provide python3 and
git), imported with ``podman import`` and pinned by the manifest digest
podman reports for it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from replayhub.sandbox.cgroups import host_oci_runtime

IMAGE_NAME = "localhost/replayhub-sandbox-test"
PYTHON_IMAGE_NAME = "localhost/replayhub-sandbox-python-test"
# The system Python the sandbox runs (not the virtualenv's).
SYSTEM_PYTHON = "/usr/bin/python3"
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def containers_conf(runtime: str) -> str:
    """The engine's configuration for this host.

    podman's default nofile ulimit (1048576) exceeds the hard limit of many
    machines and fails every container with "error setting rlimit type 7";
    the runner sets its own limits, so the engine's defaults are emptied.
    The OCI runtime is the one this host's cgroup layout allows.
    """
    return f'[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "{runtime}"\n'


def build_rootfs(root: Path) -> Path:
    """A busybox root with merged-/usr links; returns ``root``."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    (root / "bin").mkdir(parents=True)
    shutil.copy2(busybox, root / "bin" / "busybox")
    applets = subprocess.run(
        [busybox, "--list"], capture_output=True, text=True, timeout=10, check=True
    ).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (root / "bin" / applet).symlink_to("busybox")
    for name in ("usr", "etc", "tmp", "proc", "dev", "sys", "run", "workspace"):
        (root / name).mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    for name in ("lib", "lib64", "sbin"):
        (root / "usr" / name).mkdir()
        (root / name).symlink_to(f"usr/{name}")
    (root / "etc" / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/nonexistent:/bin/sh\n"
    )
    (root / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    if Path("/etc/ld.so.cache").exists():
        shutil.copy2("/etc/ld.so.cache", root / "etc" / "ld.so.cache")
    return root


def add_python(root: Path) -> Path:
    """Copy the host's system python3, its standard library and the shared
    libraries they load into the busybox ``root``: a small image for a
    Python project's tests, made without a registry."""
    real = Path(os.path.realpath(SYSTEM_PYTHON))
    _copy(real, root)
    (root / "usr/bin/python3").symlink_to(real.name)
    # The system Python's own library, not the one running the tests.
    stdlib = Path(
        subprocess.run(
            [
                SYSTEM_PYTHON,
                "-c",
                "import sysconfig; print(sysconfig.get_path('stdlib'))",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    )
    shutil.copytree(
        stdlib,
        root / str(stdlib).lstrip("/"),
        symlinks=True,
        ignore=shutil.ignore_patterns("__pycache__", "test", "idlelib", "tkinter"),
    )
    objects = [real, *sorted((stdlib / "lib-dynload").glob("*.so"))]
    libraries: set[str] = set()
    for obj in objects:
        listed = subprocess.run(
            ["ldd", str(obj)], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        for line in listed.splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
            if path.startswith("/"):
                libraries.add(path)
    for library in sorted(libraries):
        _copy(Path(library), root)
    return root


def _copy(path: Path, root: Path) -> None:
    """``path`` into ``root`` at the same place, its symlinks followed and kept."""
    while True:
        target = root / str(path).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() and not target.is_symlink():
            shutil.copy2(path, target, follow_symlinks=False)
        if not path.is_symlink():
            return
        path = (path.parent / os.readlink(path)).resolve(strict=False)
        path = Path(os.path.normpath(path))


@dataclass
class Podman:
    """A podman service owned by the test session, in a directory of its own."""

    directory: Path
    service: subprocess.Popen[bytes]
    image: str
    _python_image: str = ""

    @property
    def host(self) -> str:
        return f"unix://{self.directory / 'podman.sock'}"

    @staticmethod
    def environment(directory: Path) -> dict[str, str]:
        return {
            "PATH": PATH,
            "CONTAINERS_CONF": str(directory / "containers.conf"),
            "HOME": str(directory),
        }

    @staticmethod
    def command(directory: Path, *args: str) -> list[str]:
        return [
            "podman",
            "--root",
            str(directory / "storage"),
            "--runroot",
            str(directory / "run"),
            *args,
        ]

    @classmethod
    def start(cls, runtime: str = "") -> Podman:
        """A service whose OCI runtime is ``runtime``, by default the one
        this host's cgroup layout allows."""
        # Short: the service's socket path must fit a sockaddr_un.
        directory = Path(tempfile.mkdtemp(prefix="rh-podman-", dir="/tmp"))
        directory.chmod(0o755)
        layout, works = host_oci_runtime()
        runtime = runtime or works
        if not shutil.which(runtime, path=PATH):
            raise RuntimeError(
                f"podman needs {runtime} on this host ({layout} cgroups), "
                f"and {runtime} is not installed"
            )
        (directory / "containers.conf").write_text(containers_conf(runtime))
        env = cls.environment(directory)
        sock = directory / "podman.sock"
        service = subprocess.Popen(
            cls.command(directory, "system", "service", "--time=0", f"unix://{sock}"),
            env=env,
            # conmon writes files (an "oom" marker) into its working directory.
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=(directory / "service.log").open("wb"),
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while not _answers(sock):
            if service.poll() is not None or time.monotonic() > deadline:
                service.kill()
                log = (directory / "service.log").read_text()[-500:]
                raise RuntimeError(f"podman's service did not start: {log}")
            time.sleep(0.1)
        podman = cls(directory, service, "")
        podman.image = podman.import_root(
            build_rootfs(directory / "rootfs"), IMAGE_NAME
        )
        return podman

    def import_root(self, rootfs: Path, name: str) -> str:
        """Import ``rootfs`` (then removed) as ``name``; its pinned reference."""
        env = self.environment(self.directory)
        tarball = self.directory / f"{rootfs.name}.tar"
        with tarfile.open(tarball, "w") as archive:
            archive.add(rootfs, arcname=".")
        shutil.rmtree(rootfs)
        subprocess.run(
            self.command(self.directory, "import", "--quiet", str(tarball), name),
            env=env,
            capture_output=True,
            timeout=120,
            check=True,
        )
        tarball.unlink()
        digest = subprocess.run(
            self.command(
                self.directory, "image", "inspect", "--format", "{{.Digest}}", name
            ),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
        return f"{name}@{digest}"

    def python_image(self) -> str:
        """A busybox image with the host's python3 (imported once)."""
        if not self._python_image:
            root = add_python(build_rootfs(self.directory / "python-rootfs"))
            self._python_image = self.import_root(root, PYTHON_IMAGE_NAME)
        return self._python_image

    def containers(self) -> list[str]:
        return subprocess.run(
            self.command(self.directory, "ps", "--all", "--quiet"),
            env=self.environment(self.directory),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.split()

    def stop(self) -> None:
        self.service.terminate()
        try:
            self.service.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.service.kill()
            self.service.wait()
        # Only this service's own storage: never `system reset`, which also
        # clears host-wide network definitions.
        subprocess.run(
            self.command(self.directory, "rm", "--all", "--force"),
            env=self.environment(self.directory),
            capture_output=True,
            timeout=120,
            check=False,
        )
        shutil.rmtree(self.directory, ignore_errors=True)


def _answers(path: Path) -> bool:
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(2)
        try:
            probe.connect(str(path))
            probe.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return b" 200 " in probe.recv(100)
        except OSError:
            return False


def podman_available() -> bool:
    return shutil.which("podman") is not None and os.geteuid() == 0
