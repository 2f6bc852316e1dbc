"""A tiny Python package index on the worker's loopback, for the demo and tests.

:func:`pure_wheel` writes a pure-Python wheel (a zip with the dist-info files
pip reads) from module sources; :class:`PackageIndex` serves wheels in the
PEP 503 "simple" layout on ``127.0.0.1``, so a project's setup phase can
``pip install`` from it through the egress proxy, with nothing fetched from
the internet.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import re
import threading
import zipfile
from collections.abc import Mapping
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?\Z")


def normalize(name: str) -> str:
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def pure_wheel(name: str, version: str, modules: Mapping[str, str]) -> bytes:
    """A ``py3-none-any`` wheel of ``modules`` (``{"pkg/__init__.py": source}``)."""
    if not _NAME.match(name) or not _NAME.match(version):
        raise ValueError(f"{name!r} {version!r} is not a simple name and version")
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    files: dict[str, bytes] = {path: text.encode() for path, text in modules.items()}
    files[f"{dist}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    ).encode()
    files[f"{dist}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: replayhub\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n"
    )
    record = "".join(
        f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items()
    )
    files[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return buffer.getvalue()


def write_index(root: Path, wheels: Mapping[str, bytes]) -> None:
    """Lay out ``root`` as a simple index of ``wheels`` (file name -> bytes)."""
    projects: dict[str, list[str]] = {}
    (root / "files").mkdir(parents=True, exist_ok=True)
    for filename, data in wheels.items():
        (root / "files" / filename).write_bytes(data)
        projects.setdefault(normalize(filename.split("-")[0]), []).append(filename)
    simple = root / "simple"
    simple.mkdir(exist_ok=True)
    links = []
    for project, filenames in sorted(projects.items()):
        (simple / project).mkdir(exist_ok=True)
        anchors = "".join(
            f'<a href="../../files/{html.escape(f)}#sha256='
            f'{hashlib.sha256((root / "files" / f).read_bytes()).hexdigest()}">'
            f"{html.escape(f)}</a>\n"
            for f in sorted(filenames)
        )
        (simple / project / "index.html").write_text(
            f"<!DOCTYPE html>\n<html><body>\n{anchors}</body></html>\n"
        )
        links.append(f'<a href="{project}/">{project}</a>\n')
    (simple / "index.html").write_text(
        f"<!DOCTYPE html>\n<html><body>\n{''.join(links)}</body></html>\n"
    )


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class PackageIndex:
    """Serve ``root`` (see :func:`write_index`) on 127.0.0.1; a context manager.

    ``port`` 0 takes a free port; :attr:`url` is the index URL for pip.
    """

    def __init__(self, root: Path, port: int = 0) -> None:
        handler = partial(_QuietHandler, directory=str(root))
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/simple/"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> PackageIndex:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def serve_forever(self) -> None:
        self.server.serve_forever()
