#!/usr/bin/env python3
"""replayhub-record: run a coding agent in this checkout and record the run.

Python 3.9+ standard library and the git CLI only, so that it runs on any
laptop or CI runner: ReplayHub serves the recorder as one file at
/recorder/replayhub-record.py (``bundle`` joins this package's modules into
it). The agent's model calls go through a recording endpoint on 127.0.0.1
(``endpoint``); what it leaves is committed and pushed as
``refs/replayhub/runs/<id>`` without touching the user's branch, index or
files (``checkout``); the run record, every key the recorder saw masked in
it (``scrub``), is posted, or spooled in ``.git/replayhub/spool/`` to be sent
later (``delivery``). docs/recorder.md is the reference.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, cast

from replayhub.recorder.checkout import Checkout, GitFailed
from replayhub.recorder.delivery import deliver, send_spooled, spool
from replayhub.recorder.endpoint import UPSTREAMS, RecordingEndpoint
from replayhub.recorder.exits import (
    EXIT_NOT_RUN,
    EXIT_SPOOLED,
    PROG,
    Refusal,
    say,
)
from replayhub.recorder.scrub import KeyScrub, local_keys, map_strings
from replayhub.recorder.surroundings import agent_cli, surroundings_of
from replayhub.recorder.wiring import wired

OUTPUT_TAIL_BYTES = 64 * 1024
# The server's default REPLAYHUB_MAX_RECORD_BYTES: a longer record is refused.
MAX_RECORD_BYTES = 8 * 1024 * 1024
RUN_REFS = "refs/replayhub/runs/"
BASE_REFS = "refs/replayhub/bases/"
# The variables that hold the ingest token by default; the agent gets none of
# them (nor the one --token-env names), so it cannot post runs of its own.
TOKEN_VARIABLES = ("REPLAYHUB_TOKEN",)


# --- the agent -----------------------------------------------------------------------


def run_agent(
    command: list[str], env: dict[str, str], *, tee: bool
) -> tuple[int, float, str | None]:
    """Run the agent; its exit code, duration and output tail (None unless
    ``tee``). Ctrl-C and SIGTERM reach the agent, and the recorder stays to
    record what it did. Without ``tee`` the agent keeps the terminal."""
    tail = bytearray()
    lock = threading.Lock()
    child: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, frame: object) -> None:
        # Ctrl-C reaches the agent from the terminal already; SIGTERM may not.
        if child and signum == signal.SIGTERM:
            child[0].send_signal(signum)

    def copy(source: BinaryIO, sink: BinaryIO) -> None:
        while chunk := os.read(source.fileno(), 65536):
            with contextlib.suppress(OSError):
                sink.write(chunk)
                sink.flush()
            with lock:
                tail.extend(chunk)
                del tail[:-OUTPUT_TAIL_BYTES]

    # A handler (not SIG_IGN, which a child inherits) is reset by exec.
    signals = (signal.SIGINT, signal.SIGTERM)
    handlers = {sig: signal.signal(sig, forward) for sig in signals}
    started = time.monotonic()
    try:
        pipe = subprocess.PIPE if tee else None
        try:
            child.append(subprocess.Popen(command, env=env, stdout=pipe, stderr=pipe))
        except OSError as error:
            raise Refusal(f"cannot run {command[0]!r}: {error}", EXIT_NOT_RUN) from None
        proc = child[0]
        sinks = [(proc.stdout, sys.stdout.buffer), (proc.stderr, sys.stderr.buffer)]
        copiers = [threading.Thread(target=copy, args=p, daemon=True) for p in sinks]
        copiers = copiers if tee else []
        for thread in copiers:
            thread.start()
        code = proc.wait()
        for thread in copiers:
            thread.join(timeout=10)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    exit_code = 128 - code if code < 0 else code  # killed by signal N: 128 + N
    output = bytes(tail).decode("utf-8", "replace") if tee else None
    return exit_code, round(time.monotonic() - started, 3), output


def agent_env(
    endpoint: RecordingEndpoint, *, token_env: str, **replayhub: str
) -> dict[str, str]:
    """The user's environment without the ingest token, with the model APIs on
    the recording endpoint and ``REPLAYHUB_<NAME>`` for each of ``replayhub``,
    as the sandbox sets them."""
    hidden = {token_env, *TOKEN_VARIABLES}
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env.update(endpoint.base_urls())
    env.update(
        {f"REPLAYHUB_{name.upper()}": value for name, value in replayhub.items()}
    )
    # An HTTP proxy in the environment must not be asked for 127.0.0.1.
    for name in ("NO_PROXY", "no_proxy"):
        env[name] = ",".join(filter(None, [env.get(name, ""), "127.0.0.1"]))
    return env


# --- the record ----------------------------------------------------------------------


def ci_info(env: Mapping[str, str]) -> dict[str, str] | None:
    """The CI job this runs in, from the variables each CI service sets."""
    github = [env.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY")]
    if env.get("GITHUB_ACTIONS") == "true" and all(github) and env.get("GITHUB_RUN_ID"):
        url = f"{github[0]}/{github[1]}/actions/runs/{env['GITHUB_RUN_ID']}"
        return {"provider": "github", "url": url}
    found = [
        ("gitlab", "CI_JOB_URL", env.get("GITLAB_CI")),
        ("buildkite", "BUILDKITE_BUILD_URL", True),
        ("circleci", "CIRCLE_BUILD_URL", True),
        ("jenkins", "BUILD_URL", env.get("JENKINS_URL") or env.get("JENKINS_HOME")),
    ]
    for provider, variable, present in found:
        if present and env.get(variable):
            return {"provider": provider, "url": env[variable]}
    return None


def totals(tape: list[dict[str, Any]]) -> dict[str, int]:
    """Usage summed over the exchanges; a turn is an answered billed call."""
    usage = {"input_tokens": 0, "output_tokens": 0, "turns": 0}
    for entry in tape:
        for key, value in (entry.get("usage") or {}).items():
            usage[key] += value
        usage["turns"] += bool(entry.get("billed") and entry["status"] // 100 == 2)
    return usage


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def cap_tape(tape: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The tape within ``budget`` bytes of JSON: the largest responses go first,
    then the largest requests (``"truncated": true`` says so), then the last entries."""
    tape = [dict(entry) for entry in tape]
    size = _size(tape)
    for field in ("response", "request"):
        for entry in sorted(tape, key=lambda e: _size(e.get(field)), reverse=True):
            if size <= budget:
                return tape
            before = _size(entry)
            entry.update({field: None, "truncated": True})
            size -= before - _size(entry)
    while tape and size > budget:
        size -= _size(tape.pop()) + 2
    return tape


def build_record(
    facts: dict[str, Any],
    tape: list[dict[str, Any]],
    max_bytes: int = MAX_RECORD_BYTES,
    keys: KeyScrub | None = None,
) -> dict[str, Any]:
    """The native run record: ``facts`` (None values left out), the provider,
    model and usage the tape tells, and the tape cut to fit in ``max_bytes``;
    every string in it masked of ``keys`` and storable (:func:`storable`)."""
    keys = keys or KeyScrub()
    record = {key: value for key, value in facts.items() if value is not None}
    kinds = Counter(entry["provider_kind"] for entry in tape)
    if kinds:
        record.setdefault("provider", kinds.most_common(1)[0][0])
    models = [entry["model"] for entry in tape if entry.get("model")]
    if models:
        record.setdefault("model", models[-1])
    record["usage"] = totals(tape)

    def masked(text: str) -> str:
        return storable(keys.text(text))

    record = map_strings(record, masked)
    budget = max(max_bytes - _size(record) - 4096, 0)
    record["tape"] = cap_tape(map_strings(tape, masked), budget)
    return record


def storable(text: str) -> str:
    """``text`` with NULs and lone surrogates replaced: the server refuses a
    record holding either (PostgreSQL cannot store them)."""
    return text.replace("\0", "\ufffd").encode("utf-8", "replace").decode()


def title_of(prompt: str) -> str:
    line = next((line.strip() for line in prompt.splitlines() if line.strip()), "")
    return line if len(line) <= 120 else line[:119] + "\u2026"


# --- the command ---------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} --server URL --project P [options] -- AGENT COMMAND...\n"
        f"       {PROG} --send SPOOLFILE | --send-all [--server URL ...]",
        description="Run a coding agent in this checkout and record the run for "
        "ReplayHub: its base, its model calls and the commit it left.",
    )
    # None when not given, so that --send tells a flag from the spool's value.
    p.add_argument("--server", help="ReplayHub's URL (default $REPLAYHUB_SERVER)")
    p.add_argument("--project", help="project slug (default $REPLAYHUB_PROJECT)")
    p.add_argument("--token-env", help="variable holding the ingest token")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="the task given to the agent")
    prompt.add_argument("--prompt-file", type=Path, help="a file holding the task")
    p.add_argument("--model", default="", help="the model (default: the tape's)")
    p.add_argument("--remote", help="where the run's ref goes (default origin)")
    p.add_argument("--allow-dirty", action="store_true", help="record changes in base")
    p.add_argument("--spool-dir", type=Path, help="default .git/replayhub/spool")
    for kind, (variable, default) in UPSTREAMS.items():
        upstream = os.environ.get(variable) or default
        p.add_argument(f"--{kind}-upstream", default=upstream, help=f"({upstream})")
    p.add_argument("--max-record-bytes", type=int, default=MAX_RECORD_BYTES)
    send = p.add_mutually_exclusive_group()
    send.add_argument("--send", type=Path, metavar="SPOOLFILE", help="send one run")
    send.add_argument("--send-all", action="store_true", help="send every spooled run")
    return p


def _http_url(name: str, value: str | None) -> str:
    if urllib.parse.urlsplit(value or "").scheme not in ("http", "https"):
        raise Refusal(f"--{name} must be an http:// or https:// URL, not {value!r}")
    return cast(str, value)


def record_run(args: argparse.Namespace, command: list[str]) -> int:
    """Check, run the agent, write back, deliver; the exit code."""
    if not command:
        raise Refusal("give the agent command after --")
    server = _http_url("server", args.server or os.environ.get("REPLAYHUB_SERVER"))
    project = args.project or os.environ.get("REPLAYHUB_PROJECT")
    if not project:
        raise Refusal("give the project with --project (or $REPLAYHUB_PROJECT)")
    upstreams = {
        k: _http_url(f"{k}-upstream", vars(args)[f"{k}_upstream"]) for k in UPSTREAMS
    }
    try:
        from_file = args.prompt_file.read_text("utf-8") if args.prompt_file else ""
    except (OSError, UnicodeDecodeError) as error:
        raise Refusal(f"cannot read the prompt file: {error}") from None
    prompt: str = args.prompt or from_file
    if not prompt.strip():
        raise Refusal("give the agent's task with --prompt or --prompt-file")
    token_env = args.token_env or "REPLAYHUB_TOKEN"
    if not os.environ.get(token_env):
        raise Refusal(f"${token_env} is not set: it holds the project's ingest token")
    checkout = Checkout(Path.cwd())
    dirty = checkout.dirty_paths()
    if dirty and not args.allow_dirty:
        raise Refusal(
            f"the work tree has {len(dirty)} uncommitted change(s) ({dirty[0]!r} …): "
            "commit or stash them, or pass --allow-dirty to record them in the base"
        )
    now = datetime.now(timezone.utc)
    run_id = f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
    base = checkout.head
    if dirty:
        message = f"{PROG}: the uncommitted work tree run {run_id} started from"
        base = checkout.commit_work_tree(parents=[base], message=message) or base

    keys = local_keys(os.environ, token_env)
    with tempfile.TemporaryDirectory(prefix="replayhub-record-") as io_dir:
        prompt_file = Path(io_dir) / "prompt.txt"
        prompt_file.write_text(prompt, encoding="utf-8")
        with RecordingEndpoint(upstreams) as endpoint:
            given = {"prompt_file": str(prompt_file), "model": args.model}
            env = agent_env(endpoint, token_env=token_env, **given, task_id=run_id)
            agent = agent_cli(command, env)
            command, env = wired(command, env)
            tee = not sys.stdout.isatty()
            exit_code, duration, output = run_agent(command, env, tee=tee)
            tape = list(endpoint.tape)
            for key in endpoint.keys:
                keys.add(key)
            first_anthropic = endpoint.first_anthropic

    refs, original, how = write_back(checkout, base, run_id)
    facts: dict[str, Any] = {
        "project": project,
        "external_id": run_id,
        "title": title_of(prompt),
        "prompt": prompt,
        "started_at": now.isoformat(timespec="seconds"),
        "model": args.model or None,
        "base_sha": base,
        "base_branch": checkout.branch,
        "original_commit": original,
        "original_branch": RUN_REFS + run_id if original else None,
        "output": output,
        "agent": {"exit_code": exit_code, "duration_seconds": duration},
        "ci": ci_info(os.environ),
        "recorder": {"dirty_base": bool(dirty), "write_back": how},
        "surroundings": surroundings_of(
            top=checkout.top,
            branch=checkout.branch,
            env=os.environ,
            agent=agent,
            first_call=first_anthropic,
        ),
    }
    facts["agent"]["command"] = command
    delivery = {
        "server": server,
        "project": project,
        "token_env": token_env,
        "remote": args.remote or "origin",
        "repository": str(checkout.git_dir),
        "refs": refs,
        "pushed": False,
        "record": build_record(facts, tape, args.max_record_bytes, keys),
    }
    why = deliver(delivery)
    if why is None:
        say(f"recorded run {run_id} ({len(tape)} model calls) in {project}")
        # The last line: where the run is read and replayed.
        if delivery.get("page"):
            say(f"its page: {delivery['page']}")
        return exit_code
    why = keys.text(why)
    spool_dir = args.spool_dir or checkout.git_dir / "replayhub" / "spool"
    path = spool(spool_dir, {**delivery, "reason": why}, keys)
    say(f"{why}; the run is kept in {path}")
    say(f"send it later with: {PROG} --send {path}")
    return EXIT_SPOOLED


def write_back(
    checkout: Checkout, base: str, run_id: str
) -> tuple[dict[str, str], str | None, str]:
    """The run's refs (written here, to push), its original commit and how
    the agent left it (``recorder.write_back``)."""
    refs: dict[str, str] = {}
    try:
        # The agent's commits are its write-back; what it left uncommitted goes
        # in a commit on top of them (or of the base), on a ref of its own.
        head = checkout.git("rev-parse", "--verify", "HEAD^{commit}")
        moved = head != checkout.head
        if moved and base not in (head, checkout.head):
            parents = [base, head]  # a dirty base stays the first parent
        else:
            parents = [head if moved else base]
        message = f"{PROG}: the work tree agent run {run_id} left"
        left = checkout.commit_work_tree(parents=parents, message=message)
        original = left or parents[0]
        done = [("agent-commit", moved), ("work-tree", left)]
        how = "+".join(name for name, did in done if did) or "unchanged"
        refs[RUN_REFS + run_id] = original
        if base != checkout.head:
            refs[BASE_REFS + run_id] = base
        for ref, sha in refs.items():
            checkout.git("update-ref", ref, sha)
    except GitFailed as error:
        say(f"the run's commit could not be written: {error}")
        return {}, None, f"failed: {error}"
    return refs, original, how


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    argv, command = argv[:cut], argv[cut + 1 :]
    args = parser().parse_args(argv)
    try:
        if args.send:
            return 0 if send_spooled(args.send, args) else EXIT_SPOOLED
        if args.send_all:
            spooled = args.spool_dir or Checkout(Path.cwd()).git_dir / "replayhub/spool"
            sent = [send_spooled(path, args) for path in sorted(spooled.glob("*.json"))]
            say(f"{sum(sent)} of {len(sent)} spooled run(s) sent")
            return 0 if all(sent) else EXIT_SPOOLED
        return record_run(args, command)
    except Refusal as refusal:
        say(str(refusal))
        return refusal.code


if __name__ == "__main__":
    sys.exit(main())
