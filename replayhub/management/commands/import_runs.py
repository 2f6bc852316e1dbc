from __future__ import annotations

import contextlib
import glob
import json
import os
import sys
import time
from pathlib import Path
from typing import IO

from django.core.management.base import BaseCommand, CommandError

from replayhub.ingest import services
from replayhub.ingest.follow import matching, natural_key
from replayhub.ingest.importer import ImportSummary, Throttle, read_chunks
from replayhub.ingest.services import PreflightMode
from replayhub.ingest.transcripts.loader import AUTO, TRANSCRIPTS
from replayhub.ingest.verifiers import RolloutSummary, rollout_settings_problem
from replayhub.lib.files import open_regular
from replayhub.models import ImportFormat, Project


class Command(BaseCommand):
    help = (
        "Import native run records (JSONL, one run per line; docs/formats.md) from "
        "FILE or standard input (-), then preflight the new runs; or, with "
        "--format verifiers, verifiers rollout records from FILE, a GLOB or a "
        "followed directory (--follow). Exit status: 0 when every record was "
        "imported, already there or skipped, 1 when a line was invalid or "
        "conflicted with a stored run, 2 for a usage error."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", nargs="?", metavar="FILE|GLOB|-")
        parser.add_argument(
            "--format",
            choices=(*ImportFormat.values, AUTO),
            default="native",
            help="native run records (the default), verifiers rollout records "
            "(Trace.to_record() lines; a sibling index_<env>.jsonl is used), or "
            "an agent's own transcripts: claude-code, codex, aider, swe-agent, "
            "mini-swe-agent, openhands, swebench (JSONL, a JSON list or a JSON "
            "object by instance id), gemini-cli, atif (Harbor's trajectories), "
            "opencode (opencode export output); "
            "auto judges each file of a directory alone (a mini-swe-agent "
            "batch folder's preds.json is read after its trajectories, and a "
            "prediction a trajectory already holds is not imported again).",
        )
        parser.add_argument(
            "--instances",
            metavar="FILE",
            help="With --format swebench (or swe-agent, mini-swe-agent): the "
            "SWE-bench dataset as JSONL (instance_id, base_commit, "
            "problem_statement, ...).",
        )
        parser.add_argument(
            "--original",
            metavar="SHA",
            default="",
            help="With a transcript format: the commit that is the run's "
            "original, when it cannot be found from the session (the import "
            "summary's note says so); the import must make one run.",
        )
        parser.add_argument(
            "--follow",
            metavar="DIR_OR_GLOB",
            help="With --format verifiers: keep importing a training run's "
            "growing rollout files (each line once, partial lines left).",
        )
        parser.add_argument(
            "--once",
            action="store_true",
            help="With --follow: one pass, then exit.",
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=5.0,
            metavar="SECONDS",
            help="With --follow: seconds between passes (default 5).",
        )
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

    def handle(self, *args, file, project, as_json, no_preflight, preflight_only, **o):
        transcript = o["format"] in TRANSCRIPTS or o["format"] == AUTO
        if o["original"] and not transcript:
            raise CommandError(
                "--original takes an agent's own files (a transcript format): "
                "a native record names its own original_commit.",
                returncode=2,
            )
        if o["format"] == "verifiers" or o["follow"]:
            return self.rollouts(file, project, as_json, o)
        if transcript:
            return self.transcripts(file, project, as_json, no_preflight, o)
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
            summary = services.runs_import(
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

    def rollouts(self, file, project, as_json, options) -> None:
        if options["format"] != "verifiers":
            raise CommandError("--follow takes --format verifiers.", returncode=2)
        if not project:
            raise CommandError(
                "--format verifiers takes --project: records name no project.",
                returncode=2,
            )
        target = _project(project)
        if problem := rollout_settings_problem(target):
            raise CommandError(problem, returncode=2)
        if options["follow"]:
            if file:
                raise CommandError("give a FILE or --follow, not both.", returncode=2)
            return self.follow(target, options, as_json)
        if options["once"]:
            raise CommandError("--once goes with --follow.", returncode=2)
        if not file:
            raise CommandError("give a FILE, a GLOB, or - for stdin.", returncode=2)
        status = _Status(self.stderr)
        if file == "-":
            summary = services.rollouts_import(
                project=target,
                chunks=read_chunks(sys.stdin.buffer),
                progress=status.importing,
            )
        else:
            summary = services.rollouts_import(
                project=target, paths=_record_files(file), progress=status.importing
            )
        status.clear()
        self.stdout.write(_render(summary, as_json=as_json))
        if not summary.complete:
            sys.exit(1)

    def transcripts(self, file, project, as_json, no_preflight, options) -> None:
        if not project:
            raise CommandError(
                f"--format {options['format']} takes --project: transcripts name "
                "no project.",
                returncode=2,
            )
        target = _project(project)
        if not file or file == "-":
            raise CommandError("give a FILE, a DIRECTORY or a GLOB.", returncode=2)
        instances = options.get("instances")
        if instances and not os.path.isfile(instances):
            raise CommandError(f"cannot read {instances}: no such file.", returncode=2)
        status = _Status(self.stderr)
        summary = services.transcripts_import(
            project=target,
            paths=_transcript_files(file),
            format=options["format"],
            instances=Path(instances) if instances else None,
            preflight=PreflightMode.SKIP if no_preflight else PreflightMode.ALL,
            progress=status,
            original=options.get("original") or "",
        )
        for error in summary.preflight_errors:
            self.stderr.write(f"preflight: {error}")
        status.clear()
        self.stdout.write(_render(summary, as_json=as_json))
        if not summary.complete:
            sys.exit(1)

    def follow(self, project: Project, options, as_json: bool) -> None:
        pattern = options["follow"]
        if not (os.path.isdir(pattern) or glob.has_magic(pattern)):
            raise CommandError(
                f"--follow: {pattern} is neither a directory nor a glob.", returncode=2
            )
        source = services.follow_source_get(project=project, pattern=pattern)
        said: list[dict] = []
        while True:
            summary = services.rollouts_follow(source=source)
            # A problem that stays (an empty directory) is said once, not on
            # every pass.
            news = summary.files_problems != said
            said = summary.files_problems
            if options["once"] or summary.imported or news:
                self.stdout.write(_render(summary, as_json=as_json))
            if options["once"]:
                if not summary.complete:
                    sys.exit(1)
                return
            time.sleep(max(options["interval"], 0.1))


def _record_files(pattern: str) -> list[Path]:
    """The files FILE|GLOB names, in natural order; a usage error when none."""
    if os.path.lexists(pattern) and not os.path.isdir(pattern):
        # Opened as a regular file or not at all (never a link or a FIFO).
        return [Path(pattern)]
    if not glob.has_magic(pattern):
        raise CommandError(f"cannot read {pattern}: no such file.", returncode=2)
    skipped: list[str] = []
    found = sorted(matching(pattern, skipped), key=natural_key)
    for path in skipped:
        sys.stderr.write(f"skipped {path}: a symbolic link, not followed\n")
    if not found:
        raise CommandError(f"{pattern} matches no file.", returncode=2)
    return [Path(p) for p in found]


def _transcript_files(pattern: str) -> list[Path]:
    """A file, every file under a directory (a link is never followed), or a
    glob's files, in natural order."""
    if os.path.isdir(pattern) and not os.path.islink(pattern):
        found = []
        for root, directories, names in os.walk(pattern):
            directories.sort()
            found += [
                os.path.join(root, name)
                for name in names
                if not name.startswith(".") or name == ".aider.chat.history.md"
            ]
        links = [p for p in found if os.path.islink(p)]
        for path in links:
            sys.stderr.write(f"skipped {path}: a symbolic link, not followed\n")
        files = sorted(set(found) - set(links), key=natural_key)
        if not files:
            raise CommandError(f"{pattern} holds no file.", returncode=2)
        return [Path(p) for p in files]
    return _record_files(pattern)


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

    def importing(self, lines: int, summary: ImportSummary) -> None:
        self.show(
            f"import: {lines:,} lines read, {summary.imported:,} imported, "
            f"{summary.duplicates:,} duplicates, {summary.invalid_total:,} invalid"
        )

    def imported(self, summary: ImportSummary) -> None:
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
            # Only show() sets shown, and only once it has a stream to write to.
            assert self.stream is not None
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
        return open_regular(path)
    except OSError as error:
        raise CommandError(
            f"cannot read {path}: {error.strerror}.", returncode=2
        ) from None


def _render(summary: ImportSummary, *, as_json: bool) -> str:
    if as_json:
        return json.dumps(summary.to_dict())
    rows: list[tuple[str, int | str]] = [
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
    if isinstance(summary, RolloutSummary):
        data = summary.to_dict()
        skipped = ", ".join(f"{k} {v}" for k, v in data["skipped"].items() if v)
        rows += [("skipped", skipped or "0"), ("seeds", summary.seeds)]
    lines = [f"{name:<12}{value}" for name, value in rows]
    for entry in summary.invalid:
        where = f"{entry['file']}: " if "file" in entry else ""
        lines.append(f"{where}line {entry['line']}: invalid: {entry['error']}")
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
    if summary.format_hint:
        lines.append(summary.format_hint)
    # Runs imported without a base, and why (a transcript import).
    for entry in getattr(summary, "notes", ()):
        lines.append(f"{entry['file']}: line {entry['line']}: {entry['note']}")
    for entry in getattr(summary, "files", ()):
        for key in ("index_problem", "problem"):
            if key in entry:
                lines.append(f"{entry['file']}: {entry[key]}")
    return "\n".join(lines)
