"""Every benchmark in one run: one table of figures beside their floors.

Runs each script of benchmarks/ in turn (each measures its figures several
times, beside its floor or baseline, in the same run), gathers what they
report through :func:`benchmarks.support.record`, prints one table — figure
median, min and max, the floor or baseline, the ratio, the goal and whether it
holds — and writes it with the machine (cores, memory, PostgreSQL version,
load) and the date to ``benchmarks/results.json`` and ``docs/performance.md``
(between its generated-table markers; the prose around them is kept).

PostgreSQL is required: ``DATABASE_URL`` names a server (any database on it;
each benchmark creates and drops its own scratch database there), by default
``postgres://postgres@127.0.0.1:5432/postgres``.

    ./dev bench            # full sizes, sized for 10 minutes on 2 quiet cores
    ./dev bench --quick    # small sizes: checks every script still runs
    ./dev bench --quick --show-output   # and prints what each script prints

``--quick`` writes nowhere unless ``--out DIR`` is given (then DIR/results.json
and DIR/performance.md); its timings are noise and no goal is judged.
Exit status: 0 when every script ran, 1 when one failed, 2 without PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)

from benchmarks.support import PREFIX_ENV, RESULTS_ENV, admin_connect  # noqa: E402

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
BEGIN = "<!-- bench:begin (written by ./dev bench; edits here are lost) -->"
END = "<!-- bench:end -->"


@dataclass(frozen=True)
class Script:
    name: str
    full: list[str] = field(default_factory=list)
    quick: list[str] = field(default_factory=lambda: ["--quick"])
    # Scripts that seed their own SQLite database never see DATABASE_URL.
    sqlite: bool = False
    # Scripts too slow for --quick's "does it still run" (over ~40 s).
    full_only: bool = False


SUITE = [
    Script("preflight.py", ["--sample", "300", "--repeat", "3"]),
    Script("ingest.py", ["--runs", "3"]),
    Script("nightly_admission.py", ["--rounds", "3"]),
    Script("review_queue.py", ["--iterations", "60", "--paginator-iterations", "4"]),
    Script("trends.py", ["--iterations", "40", "--rollups", "6"]),
    Script("decision.py", ["--iterations", "200", "--rollups", "10"]),
    Script("replay_overhead.py", ["--runs", "3"], sqlite=True),
    Script("runner_overhead.py", ["--runs", "7"], sqlite=True),
    Script("test_gate.py", ["--runs", "3"], sqlite=True),
    Script("environment.py", ["--runs", "3"], sqlite=True),
    Script("rollouts.py", ["--runs", "3"], sqlite=True),
    Script("throughput.py", ["--replays", "2", "--rounds", "2"]),
    Script("workers.py", ["--replays", "8", "--rounds", "2"], full_only=True),
    Script("claims.py", ["--rounds", "3"]),
    Script("gateway.py", ["--calls", "400"]),
    Script("tape.py", ["--served", "400"]),
    Script("agent_tape.py", ["--calls", "20", "--repeat", "3"]),
    Script("transcripts.py", ["--runs", "3"]),
    Script("replicates.py", ["--runs", "10000", "--repeats", "5"]),
]


def machine(url: str) -> dict:
    with admin_connect(url) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
    meminfo = Path("/proc/meminfo").read_text()
    total = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "memory_gib": round(int(total.group(1)) / 1024 / 1024, 1) if total else None,
        "postgresql": version,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def run_script(script: Script, args, results: Path) -> dict:
    argv = [sys.executable, f"benchmarks/{script.name}"]
    argv += script.quick if args.quick else script.full
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env[RESULTS_ENV] = str(results)
    if script.sqlite:
        env.pop("DATABASE_URL", None)
    before = results.stat().st_size if results.exists() else 0
    start = time.perf_counter()
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    with results.open() as stream:
        stream.seek(before)
        rows = [json.loads(line) for line in stream if line.strip()]
    # A missed goal exits 1 but reports its figures; a quick run judges none.
    failed = not rows or "Traceback" in done.stderr or (args.quick and done.returncode)
    return {
        "script": script.name,
        "seconds": round(seconds, 1),
        "exit": done.returncode,
        "failed": failed,
        "rows": rows,
        "output": done.stdout,
        "errors": done.stderr[-4000:],
    }


def number(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def holds_text(row: dict) -> str:
    return {True: "yes", False: "NO", None: "-"}[row["holds"]]


def table_rows(rows: list[dict]) -> list[list[str]]:
    return [
        [
            row["figure"],
            row["unit"],
            number(row["median"]),
            number(row["min"]),
            number(row["max"]),
            number(row.get("p95")),
            row["floor"] or "-",
            number(row["floor_median"]),
            f"{row['ratio']:.2f}x" if row["ratio"] is not None else "-",
            row["goal"] or "-",
            holds_text(row),
        ]
        for row in rows
    ]


HEADER = [
    "figure",
    "unit",
    "median",
    "min",
    "max",
    "p95",
    "floor / baseline",
    "floor median",
    "ratio",
    "goal",
    "holds",
]


def text_table(rows: list[dict]) -> str:
    body = table_rows(rows)
    widths = [max(len(r[i]) for r in [HEADER, *body]) for i in range(len(HEADER))]
    right = {2, 3, 4, 5, 7, 8}
    lines = []
    for r in [HEADER, *body]:
        cells = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i])
            for i, c in enumerate(r)
        ]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows: list[dict]) -> str:
    def escape(cell: str) -> str:
        return cell.replace("|", "\\|")

    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in table_rows(rows):
        lines.append("| " + " | ".join(escape(c) for c in r) + " |")
    return "\n".join(lines)


def markdown(report: dict) -> str:
    m = report["machine"]
    quick = " --quick" if report["quick"] else ""
    load = ", ".join(str(x) for x in m["load_average"])
    end = ", ".join(str(x) for x in report["load_average_after"])
    lines = [
        BEGIN,
        "",
        f"Last run: **{m['date']}**, `./dev bench{quick}` in "
        f"{report['seconds']:.0f} s. Machine: {m['cores']} cores, "
        f"{m['memory_gib']} GiB memory, PostgreSQL {m['postgresql']}, Python "
        f"{m['python']}, Linux {m['kernel']}; load average {load} at the start, "
        f"{end} at the end.",
        "",
        markdown_table(report["rows"]),
        "",
    ]
    if report.get("rerun"):
        again = ", ".join(f"`{name}`" for name in report["rerun"])
        lines += [
            f"Rerun alone on {report['rerun_date']} (`./dev bench --only … "
            f"--update`): {again}.",
            "",
        ]
    notes = [r for r in report["rows"] if r.get("note")]
    if notes:
        lines += [f"- *{r['figure']}*: {r['note']}" for r in notes]
        lines.append("")
    lines += scale_out(report["rows"])
    failed = [s for s in report["scripts"] if s["failed"]]
    if failed:
        lines.append(
            "Failed to run: " + ", ".join(f"`{s['script']}`" for s in failed) + "."
        )
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def scale_out(rows: list[dict]) -> list[str]:
    """The scale-out estimate, from this run's per-replay costs and claim rate."""
    worker = [r for r in rows if r["benchmark"] == "throughput"]
    claims = [r for r in rows if r["extra"].get("kind") == "worker claims"]
    if not worker or not claims:
        return []
    host = max(worker, key=lambda r: r["extra"].get("concurrency", 0))
    cost = host["extra"]
    per_second = host["median"] / 60
    statements = cost["queries"] * per_second
    # What this database did with 16 clients, one short write each: a floor
    # of its capacity for the small statements a replay sends.
    capacity = claims[0]["floor_median"]
    lines = [
        "**Scale-out, from this run** (one worker host = one worker at "
        f"concurrency {cost.get('concurrency', '?')}):",
        "",
        f"- a host finishes {host['median']:.1f} replays/min "
        f"({per_second:.2f}/s) of the 1,000-file benchmark replay;",
        f"- per replay the database gets {cost['queries']:.0f} SQL statements "
        f"({cost['query_bytes'] / 1024:.1f} KiB of statements and parameters), so a "
        f"host sends {statements:.1f} statements/s;",
    ]
    if "broker_commands" in cost:
        lines.append(
            f"- per replay the broker gets {cost['messages']:.0f} task message(s), "
            f"{cost['broker_commands']:.0f} Redis commands "
            f"({cost['broker_bytes'] / 1024:.1f} KiB), "
            f"{cost['broker_commands'] * per_second:.1f} commands/s a host;"
        )
    else:
        lines.append(
            f"- per replay the broker gets {cost['messages']:.0f} task message(s) "
            "(filesystem queue in this run: no Redis commands counted);"
        )
    hosts = capacity / statements if statements else float("inf")
    lines += [
        f"- this PostgreSQL took {capacity:,.0f} short writes/s from 16 clients "
        "(the claim floor), so on this machine it alone would serve about "
        f"**{hosts:,.0f} worker hosts** before the replays' statements filled it.",
        "",
    ]
    return lines


def write_doc(path: Path, report: dict) -> None:
    generated = markdown(report)
    text = path.read_text() if path.exists() else f"# Performance\n\n{BEGIN}\n{END}\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + generated + tail
    else:
        text = text.rstrip("\n") + "\n\n" + generated + "\n"
    path.write_text(text)


def merged(last: dict, report: dict) -> dict:
    """``last`` with the scripts ``report`` ran replaced by its figures."""
    ran = {s["script"] for s in report["scripts"]}
    order = {s.name: i for i, s in enumerate(SUITE)}
    scripts = [s for s in last["scripts"] if s["script"] not in ran]
    scripts = sorted([*scripts, *report["scripts"]], key=lambda s: order[s["script"]])
    rows = [r for r in last["rows"] if f"{r['benchmark']}.py" not in ran]
    rows = sorted([*rows, *report["rows"]], key=lambda r: order[f"{r['benchmark']}.py"])
    return {
        **last,
        "rows": rows,
        "scripts": scripts,
        "rerun": sorted(ran | set(last.get("rerun", []))),
        "rerun_date": report["machine"]["date"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="./dev bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument(
        "--show-output", action="store_true", help="print what each script prints"
    )
    parser.add_argument(
        "--out", type=Path, help="write results.json and performance.md here"
    )
    parser.add_argument(
        "--only", nargs="+", metavar="SCRIPT", help="run only these scripts"
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="with --only: replace those scripts' figures in the last results",
    )
    args = parser.parse_args()

    url = os.environ.get("DATABASE_URL") or DEFAULT_URL
    if not url.startswith(("postgres://", "postgresql://")):
        print(
            "./dev bench needs PostgreSQL: set "
            "DATABASE_URL=postgres://USER@HOST:PORT/DB "
            "(each benchmark makes and drops its own scratch database on that server)",
            file=sys.stderr,
        )
        return 2
    try:
        facts = machine(url)
    except Exception as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else error
        print(
            f"./dev bench needs PostgreSQL, and cannot reach it at {url}: {reason}\n"
            "Start PostgreSQL or set DATABASE_URL=postgres://USER@HOST:PORT/DB",
            file=sys.stderr,
        )
        return 2
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    if args.quick:
        # Never the full run's scratch databases: a quick run may overlap one.
        os.environ.setdefault(PREFIX_ENV, "replayhub_benchq_")

    suite = [s for s in SUITE if not args.only or s.name in args.only]
    suite = [s for s in suite if not (args.quick and s.full_only and not args.only)]
    results = Path(tempfile.mkstemp(prefix="replayhub-bench-", suffix=".jsonl")[1])
    began = time.perf_counter()
    scripts = []
    try:
        for script in suite:
            print(f"--- {script.name} ...", flush=True)
            outcome = run_script(script, args, results)
            scripts.append(outcome)
            status = "FAILED" if outcome["failed"] else "ok"
            print(
                f"    {status} in {outcome['seconds']:.0f} s, "
                f"{len(outcome['rows'])} figures",
                flush=True,
            )
            if args.show_output:
                print(outcome["output"], end="", flush=True)
            if outcome["failed"]:
                print(outcome["output"][-2000:] + outcome["errors"], file=sys.stderr)
    finally:
        results.unlink(missing_ok=True)

    report = {
        "quick": args.quick,
        "seconds": round(time.perf_counter() - began, 1),
        "machine": facts,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "rows": [row for s in scripts for row in s["rows"]],
        "scripts": [
            {k: s[k] for k in ("script", "seconds", "exit", "failed")} for s in scripts
        ],
    }
    print()
    print(text_table(report["rows"]))
    print(
        f"\n{len(report['rows'])} figures from {len(scripts)} scripts in "
        f"{report['seconds']:.0f} s on {facts['cores']} cores, PostgreSQL "
        f"{facts['postgresql']}; load average {facts['load_average']} -> "
        f"{report['load_average_after']}"
    )

    out = args.out
    if out is None and not args.quick:
        json_path, doc_path = (
            ROOT / "benchmarks/results.json",
            ROOT / "docs/performance.md",
        )
    elif out is not None:
        out.mkdir(parents=True, exist_ok=True)
        json_path, doc_path = out / "results.json", out / "performance.md"
    else:
        json_path = doc_path = None
    if json_path is not None and doc_path is not None:
        if args.update and json_path.exists():
            report = merged(json.loads(json_path.read_text()), report)
        json_path.write_text(json.dumps(report, indent=2) + "\n")
        write_doc(doc_path, report)
        print(f"wrote {json_path} and {doc_path}")
    return 1 if any(s["failed"] for s in scripts) else 0


if __name__ == "__main__":
    sys.exit(main())
