import json
import sys

from django.core.management.base import BaseCommand, CommandError

from replayhub.ingest.importer import Summary, Throttle, import_stream, read_chunks
from replayhub.ingest.preflight import preflight_pending
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
        status = _Status(self.stderr)
        if preflight_only:
            if file or target is None or no_preflight:
                raise CommandError(
                    "--preflight-only takes --project and no FILE.", returncode=2
                )
            summary = Summary()
        elif not file:
            raise CommandError("give a FILE to import, or - for stdin.", returncode=2)
        else:
            summary = _import(file, target, status.importing)
        # The pending runs of every project touched, including runs left pending
        # by an earlier --no-preflight import.
        projects = summary.project_ids | ({target.pk} if target else set())
        if projects and not no_preflight:
            result = preflight_pending(project_ids=projects, progress=status.preflight)
            summary.preflight = result.to_dict()
            for error in result.errors:
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

    def preflight(self, done: int, total: int) -> None:
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


def _import(path: str, project: Project | None, progress) -> Summary:
    if path == "-":
        return import_stream(
            chunks=read_chunks(sys.stdin.buffer), project=project, progress=progress
        )
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed below; open errors are usage
    except OSError as error:
        raise CommandError(
            f"cannot read {path}: {error.strerror}.", returncode=2
        ) from None
    with stream:
        return import_stream(
            chunks=read_chunks(stream), project=project, progress=progress
        )


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
