"""Claude Code transcript import beside the native import of the same runs.

The figure: records per second of ``loader.import_sources`` (what
``import_runs --format claude-code`` calls) over one file of generated
Claude Code sessions -- each parsed, its tape built, the repository asked for
its base and original on the branch it names (three sessions in four name a
branch it holds; its branches and their histories are read once an import,
``repository.Lookups``), stored with its whole transcript. The baseline, in
the same run: the native import (``runs_import``) of the records that import
stored, written out as native JSONL -- the same runs, without the
transcript's parsing and the repository's questions. Each is measured on an
emptied run table, preflight skipped.

Goal: at least half the native import's records/s (0.5x) at 10,000 sessions.
``--quick`` (100 sessions, one run) judges no goal.

Latest figures (2026-12-07 04:36 UTC, a faster machine, nothing else
running, ``--sessions 10000 --runs 3``, twice): **0.54x** (5,598 records/s
against 10,327) and **0.53x** (5,547 against 10,452) -- met. The reading
process is the import's bottleneck there (about 110 us of CPU a session,
the parsing process 80, 20% of the two cores idle); it now freezes what the
importing process had loaded out of the collector's sight, as the parsing
processes do: full collections had been a tenth of its reading (0.133 s of
collector time for 10,000 sessions, 0.013 s frozen), and in three
alternated imports its CPU fell from 117-121 to 107-109 us a session, the
rate from 5,240-5,376 to 5,630-5,780 records/s; the benchmark's own runs
stay within their noise (0.53x-0.54x here, 0.53x before).

Before (2026-12-07, a slower machine, nothing else running,
``--sessions 10000 --runs 3``): **0.51x** (2,744 records/s against the
native import's 5,402, 01:50 UTC), **0.52x** (2,901 against 5,565, 01:53),
**0.56x** (2,921 against 5,177, 01:55) -- met, after the reading process
sent its records 64 to a message rather than one (each message woke both
processes). The native import had got faster that day (shared memory): the
code before the batching, on the same machine, did 0.44x (2,378 against
5,354) and, with one parsing process, 0.48x (2,651 against 5,573); the code
of the day before 0.51x (2,281 against 4,498). 7,400 of the 10,000 sessions
found their base and original.

Before, on a quiet machine (2026-12-06 21:55 UTC): 3,608 records/s against
the native import of the same runs' 6,756, 0.53x (met).

Before (2026-12-06 06:58 UTC, ``run.py --only ingest.py
transcripts.py --update``, load about 14 from a test run on the same 2
cores): 1,426 records/s against the native import's 1,425, 1.00x.

Before (2026-12-04, 2 cores shared with other work at a load
average of 7 to 15, three runs of ``--runs 3``): 0.53x, 0.64x and 0.92x,
median 0.64x -- in the ``./dev bench`` run 873 records/s against the native
import's 952. The code before, in the same window as the 0.53x run: 0.25x
(699 against 2,741); earlier the same evening 0.59x (617 against 1,041).
What changed: the files of a large import are read in a process of their
own (``transcripts.reading``), so the importing process only hands their
records to the native import; and reading a Claude Code file takes about
150 us of CPU a session instead of 250 at 10,000 sessions, mostly by keeping
each line's bytes until its session is built rather than the parsed
objects, which the garbage collector walked again at every collection, and
by merging a session's messages once instead of three times. The figures
swing with the other work on the machine; no quiet machine measured them.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python benchmarks/transcripts.py [--sessions 10000] [--runs 3] \\
        [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.support import in_scratch_database, record  # noqa: E402

SCRATCH_DB = "replayhub_bench_transcripts"
GOAL_RATIO = 0.5


def session_lines(number: int) -> list[dict]:
    """One session: a request, three answers with a tool call each and its
    result, a last answer, a summary line."""
    session = f"{number:08x}-0000-4000-8000-000000000000"
    # Three sessions in four name the branch they worked on, whose history
    # holds their base and, for some, the commits they made; the fourth names
    # a branch the repository does not hold.
    branch = f"agent/{number}" if number % 4 == 0 else "main"
    head = {"sessionId": session, "cwd": "/w/shop", "gitBranch": branch}
    minute = number % 50
    lines: list[dict] = [
        {
            **head,
            "type": "user",
            "uuid": f"{session}-u",
            "timestamp": f"2025-06-01T10:{minute:02d}:00Z",
            "message": {"role": "user", "content": f"Fix issue {number} in cart"},
        }
    ]
    for turn in range(4):
        content: list[dict] = [{"type": "text", "text": f"Step {turn}: reading."}]
        if turn < 3:
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{number}_{turn}",
                    "name": "Bash",
                    "input": {"command": f"grep -n total cart_{turn}.py"},
                }
            )
        lines.append(
            {
                **head,
                "type": "assistant",
                "uuid": f"{session}-a{turn}",
                "timestamp": f"2025-06-01T10:{minute:02d}:{10 + turn:02d}Z",
                "message": {
                    "id": f"msg_{number}_{turn}",
                    "role": "assistant",
                    "model": "claude-sonnet-4-20250514",
                    "content": content,
                    "stop_reason": "tool_use" if turn < 3 else "end_turn",
                    "usage": {"input_tokens": 900 + turn, "output_tokens": 80},
                },
            }
        )
        if turn < 3:
            lines.append(
                {
                    **head,
                    "type": "user",
                    "uuid": f"{session}-r{turn}",
                    "timestamp": f"2025-06-01T10:{minute:02d}:{20 + turn:02d}Z",
                    "message": {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": f"toolu_{number}_{turn}",
                                "content": "12:    return sum(lines)\n" * 4,
                            }
                        ],
                    },
                }
            )
    lines.append(
        {
            "type": "summary",
            "summary": f"Cart fix {number}",
            "leafUuid": f"{session}-a3",
        }
    )
    return lines


def write_sessions(path: Path, sessions: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for number in range(sessions):
            for line in session_lines(number):
                out.write(json.dumps(line) + "\n")


def run(args) -> int:
    import django

    django.setup()
    from replayhub.ingest.importer import read_chunks
    from replayhub.ingest.services import PreflightMode, runs_import
    from replayhub.ingest.transcripts.loader import Source, import_sources
    from replayhub.models import ImportFormat, Project, Run

    with tempfile.TemporaryDirectory(prefix="replayhub-bench-") as scratch:
        root = Path(scratch)
        repo = root / "repo"
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        for minute in range(0, 60, 3):
            when = f"2025-06-01T10:{minute:02d}:05Z"
            subprocess.run(
                ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b",
                 "commit", "-q", "--allow-empty", "-m", f"work at {when}"],
                check=True,
                env={**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when},
            )  # fmt: skip
        project = Project.objects.create(
            slug="bench", name="bench", repo_path=str(repo), test_command=["true"]
        )
        sessions = root / "sessions.jsonl"
        write_sessions(sessions, args.sessions)
        native = root / "native.jsonl"

        transcript_rates, native_rates = [], []
        for attempt in range(args.runs):
            Run.objects.all().delete()
            start = time.perf_counter()
            with sessions.open("rb") as stream:
                summary = import_sources(
                    project=project,
                    sources=[Source(sessions.name, read_chunks(stream))],
                    format=ImportFormat.CLAUDE_CODE,
                )
            seconds = time.perf_counter() - start
            assert summary.imported == args.sessions, summary.to_dict()
            transcript_rates.append(args.sessions / seconds)
            if attempt == 0:
                found = Run.objects.exclude(base_sha="")
                bases = found.count()
                originals = found.exclude(original_commit="").count()
                print(
                    f"{bases:,} of {args.sessions:,} sessions found their base, "
                    f"{originals:,} their original"
                )
                # The same runs as native records: what the import stored.
                with native.open("w", encoding="utf-8") as out:
                    for run_row in Run.objects.order_by("pk").iterator():
                        out.write(json.dumps(run_row.record) + "\n")
            Run.objects.all().delete()
            start = time.perf_counter()
            with native.open("rb") as stream:
                summary = runs_import(
                    project=project,
                    source=read_chunks(stream),
                    preflight=PreflightMode.SKIP,
                )
            seconds = time.perf_counter() - start
            assert summary.imported == args.sessions, summary.to_dict()
            native_rates.append(args.sessions / seconds)

    figure, floor = statistics.median(transcript_rates), statistics.median(native_rates)
    ratio = figure / floor
    holds = None if args.quick else ratio >= GOAL_RATIO
    print(
        f"claude-code import {figure:,.0f} rec/s "
        f"(min {min(transcript_rates):,.0f}, max {max(transcript_rates):,.0f})"
    )
    print(
        f"native import of the same runs {floor:,.0f} rec/s "
        f"(min {min(native_rates):,.0f}, max {max(native_rates):,.0f})"
    )
    verdict = "not judged" if holds is None else ("met" if holds else "MISSED")
    print(f"ratio claude-code/native {ratio:.2f}x, goal >= {GOAL_RATIO}x: {verdict}")
    record(
        "transcripts",
        f"Claude Code import, {args.sessions:,} sessions",
        unit="rec/s",
        samples=transcript_rates,
        floor="native import of the same runs",
        floor_samples=native_rates,
        goal=f">= {GOAL_RATIO}x native",
        holds=holds,
    )
    return 1 if holds is False else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int)
    parser.add_argument("--runs", type=int)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--database", default=SCRATCH_DB)
    args = parser.parse_args()
    args.sessions = args.sessions or (100 if args.quick else 10_000)
    args.runs = args.runs or (1 if args.quick else 3)
    return in_scratch_database(
        args.database, "benchmarks/transcripts.py", lambda: run(args)
    )


if __name__ == "__main__":
    sys.exit(main())
