"""OpenCode's storage folder (``~/.local/share/opencode/storage``, before
OpenCode kept its sessions in SQLite) read as an export.

That storage keeps a session in pieces: its info in
``storage/session/<project id>/<session id>.json``, each message in
``storage/message/<session id>/<message id>.json`` and each part of a message
in ``storage/part/<message id>/<part id>.json``. A session's info file,
imported, is joined here with its messages and their parts (each in the order
of its id: OpenCode's ids grow with time) into the document
``opencode export <session id>`` prints, which the OpenCode reader takes. The
message and part files of a session imported the same way are its pieces,
not files of their own (:func:`pieces`).

Every file is opened as a regular file (never a link); the joined document
stops growing past ``limit`` bytes, which the reader then refuses with its
size. No Django, no database.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from replayhub.lib import boundedjson
from replayhub.lib.files import open_regular

# Messages of a session, and parts of a message, read at most.
_MAX_FILES = 20_000


def storage_root(path: Path) -> Path | None:
    """The storage directory of a session's info file
    (``<root>/session/<project>/ses_….json``), else None."""
    if not (path.name.startswith("ses_") and path.suffix == ".json"):
        return None
    if len(path.parents) < 4:
        return None
    root = path.parent.parent.parent
    if path.parent.parent.name != "session" or not (root / "message").is_dir():
        return None
    return root


def pieces(paths: Iterable[Path]) -> set[Path]:
    """Of ``paths``, the message and part files of the sessions whose info
    files are among them: joined into those sessions, not read alone."""
    given = list(paths)
    sessions = {
        (root, path.stem) for path in given if (root := storage_root(path)) is not None
    }
    messages = {
        (root, message.stem)
        for root, session in sessions
        for message in _listed(root / "message" / session)
    }
    wanted = {"message": sessions, "part": messages}
    return {
        path
        for path in given
        if len(path.parents) > 2
        and (path.parents[2], path.parent.name) in wanted.get(path.parents[1].name, ())
    }


def export(path: Path, root: Path, limit: int) -> bytes:
    """The session whose info is at ``path`` as ``opencode export`` prints it:
    ``{"info": …, "messages": [{"info": …, "parts": […]}, …]}``, stopping
    once past ``limit`` bytes."""
    info = _read(path, limit)
    size = len(json.dumps(info))
    messages: list[dict[str, Any]] = []
    for message in _listed(root / "message" / path.stem):
        if size > limit:
            break
        value = _read(message, limit)
        parts = []
        for part in _listed(root / "part" / message.stem):
            if size > limit:
                break
            parts.append(_read(part, limit))
            size += len(json.dumps(parts[-1]))
        messages.append({"info": value, "parts": parts})
        size += len(json.dumps(value))
    if isinstance(info, dict) and "id" in info:
        # The session's id first, where an export has it (``detect`` looks).
        info = {"id": info["id"], **info}
    return json.dumps({"info": info, "messages": messages}).encode()


def _listed(directory: Path) -> list[Path]:
    """The ``.json`` files of a directory, by name; [] when there is none."""
    try:
        names = sorted(p.name for p in directory.iterdir() if p.suffix == ".json")
    except OSError:
        return []
    return [directory / name for name in names[:_MAX_FILES]]


def _read(path: Path, limit: int) -> Any:
    """One piece's JSON (None when it cannot be read as such: the reader
    then says what is missing)."""
    try:
        with open_regular(path) as stream:
            data = stream.read(limit + 1)
        return boundedjson.loads(data)
    except (OSError, ValueError):
        return None
