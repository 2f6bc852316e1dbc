from __future__ import annotations

import contextlib
import json
import sys
from typing import IO

from django.core.management.base import BaseCommand, CommandError

from replayhub.ingest.importer import Summary, Throttle, read_chunks
from replayhub.ingest.services import PreflightMode, runs_import
from replayhub.models import Project


class Command(BaseCommand):
    help = (
        "Import native run records (JSONL, one run per line; docs/formats.md) from "
        "FILE or standard input (-), then preflight the new runs. Exit status: 0 "
        "when every record was imported or already there, 1 when a line was "
        "invalid or conflicted with a stored run, 2 for a usage error."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", nargs="?", metavar="FILE|-")
        parser.add_argument(
            "--project",
            metavar="SLUG",
            help="Project for records without a 'project' key; records naming "
            "another project are refused.",
        )
        parser.add_argument(
            "--json",
            action="store_true",
            dest="as_json",
            help="Print the summary as one JSON object.",
        )
        parser.add_argument(
            "--no-preflight",
            action="store_true",
            help="Leave the new runs pending (preflight runs git for every run).",
        )
        parser.add_argument(
            "--preflight-only",
            action="store_true",
            help="Import nothing; preflight the pending runs of --project.",
        )

    def handle(self, *args, file, project, as_json, no_preflight, preflight_only, **_):
        target = _project(project) if project else None
        if preflight_only and (file or target is None or no_preflight):
            raise CommandError(
                "--preflight-only takes --project and no FILE.", returncode=2
            )
        if not (file or preflight_only):
            raise CommandError("give a FILE to import, or - for stdin.", returncode=2)
        status = _Status(self.stderr)
        # Preflight covers the pending runs of every project touched, runs left
        # pending by an earlier --no-preflight import included: with
        # --preflight-only, nothing is read and those of --project are done.
        with _open(file) as stream:
            summary = runs_import(
                project=target,
                source=() if stream is None else read_chunks(stream),
                preflight=PreflightMode.SKIP if no_preflight else PreflightMode.ALL,
                progress=status,
            )
        for error in summary.preflight_errors:
            self.stderr.write(f"preflight: {error}")
        status.clear()
        self.stdout.write(_render(summary, as_json=as_json))
        if not summary.complete:
            sys.exit(1)


def _project(slug: str) -> Project:
    try:
        return Project.objects.get(slug=slug)
    except Project.DoesNotExist:
        raise CommandError(f"there is no project {slug!r}.", returncode=2) from None


class _Status:
    """A status line for a long import on a terminal's stderr, rewritten in
    place at most a few times a second; nothing when stderr is not a terminal
    (logs and pipes get the summary alone)."""

    INTERVAL = 0.5

    def __init__(self, stream) -> None:
        self.stream = stream if stream.isatty() else None
        self.due = Throttle(self.INTERVAL)
        self.shown = False

    def importing(self, lines: int, summary: Summary) -> None:
        self.show(
            f"import: {lines:,} lines read, {summary.imported:,} imported, "
            f"{summary.duplicates:,} duplicates, {summary.invalid_total:,} invalid"
        )

    def imported(self, summary: Summary) -> None:
        pass

    def preflighting(self, done: int, total: int) -> None:
        self.show(f"preflight: {done:,} of {total:,} new runs")

    def show(self, text: str) -> None:
        if self.stream is None or not self.due():
            return
        self.shown = True
        self.stream.write(f"\r{text}\x1b[K", ending="")
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K", ending="")
            self.stream.flush()


def _open(path: str | None) -> contextlib.AbstractContextManager[IO[bytes] | None]:
    """The file to import, to use in a ``with``: standard input for ``-`` (left
    open), None for no file. A file that cannot be opened is a usage error."""
    if not path:
        return contextlib.nullcontext()
    if path == "-":
        return contextlib.nullcontext(sys.stdin.buffer)
    try:
        return open(path, "rb")
    except OSError as error:
        raise CommandError(
            f"cannot read {path}: {error.strerror}.", returncode=2
        ) from None


def _render(summary: Summary, *, as_json: bool) -> str:
    if as_json:
        return json.dumps(summary.to_dict())
    rows = [
        ("imported", summary.imported),
        ("duplicates", summary.duplicates),
        ("conflicts", summary.conflicts_total),
        ("invalid", summary.invalid_total),
    ]
    if summary.preflight is not None:
        counts = summary.preflight
        text = f"{counts['ready']} ready, {counts['unreproducible']} unreproducible"
        if counts["failed"]:
            text += f", {counts['failed']} failed"
        text += f" ({counts['pending']} pending)"
        rows.append(("preflight", text))
    lines = [f"{name:<12}{value}" for name, value in rows]
    for entry in summary.invalid:
        lines.append(f"line {entry['line']}: invalid: {entry['error']}")
    for entry in summary.conflicts:
        # Quoted and escaped: an external id is untrusted text for a terminal.
        lines.append(
            f"line {entry['line']}: conflict: {entry['project']} "
            f"{json.dumps(entry['external_id'])} was imported before with other "
            "content; the stored run was kept"
        )
    shown = len(summary.invalid) + len(summary.conflicts)
    hidden = summary.invalid_total + summary.conflicts_total - shown
    if hidden:
        lines.append(f"… and {hidden} more (the summary lists the first ones)")
    return "\n".join(lines)
