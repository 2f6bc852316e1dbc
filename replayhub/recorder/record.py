#!/usr/bin/env python3
"""replayhub-record: run a coding agent in this checkout and record the run.

One file, Python 3.9+ standard library and the git CLI only, so that it runs on
any laptop or CI runner (ReplayHub serves it at /recorder/replayhub-record.py).
The agent's model calls go through a recording endpoint on 127.0.0.1; what it
leaves is committed and pushed as ``refs/replayhub/runs/<id>`` without touching
the user's branch, index or files; the run record is posted, or spooled in
``.git/replayhub/spool/`` to be sent later. docs/recorder.md is the reference.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO, cast

PROG = "replayhub-record"
EXIT_USAGE = 2
EXIT_SPOOLED = 75  # EX_TEMPFAIL: recorded, but kept here to be sent later
EXIT_NOT_RUN = 127
OUTPUT_TAIL_BYTES = 64 * 1024
# The server's default REPLAYHUB_MAX_RECORD_BYTES: a longer record is refused.
MAX_RECORD_BYTES = 8 * 1024 * 1024
# One response kept for the tape at most; the agent still gets all of it.
EXCHANGE_BYTES = 32 * 1024 * 1024
GIT_TIMEOUT = 120.0
ADD_TIMEOUT = 900.0  # hashing every file of a large work tree
PUSH_TIMEOUT = 600.0
POST_TIMEOUT = 120.0
UPSTREAM_TIMEOUT = 900.0  # a long generation, between two bytes
RUN_REFS = "refs/replayhub/runs/"
BASE_REFS = "refs/replayhub/bases/"
UPSTREAMS = {
    "anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    "openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
}
# The endpoints that spend tokens: each answered call is one turn.
BILLED = {
    "anthropic": ("/v1/messages",),
    "openai": ("/chat/completions", "/responses", "/completions", "/embeddings"),
}
# The openai endpoints whose streams carry usage only when asked for it.
USAGE_ON_REQUEST = ("/chat/completions", "/completions")
# RFC 9110 hop-by-hop headers, and what the forwarder sets itself.
NOT_FORWARDED: tuple[str, ...] = ("connection", "keep-alive", "proxy-connection")
NOT_FORWARDED += ("proxy-authenticate", "proxy-authorization", "te", "trailer")
NOT_FORWARDED += ("transfer-encoding", "upgrade", "host", "content-length", "expect")
NOT_FORWARDED += ("accept-encoding",)
# The only request headers the tape keeps: never a key, a token or a cookie.
TAPED_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta", "user-agent")
FALLBACK_IDENTITY = {
    f"GIT_{who}_{what}": value
    for who in ("AUTHOR", "COMMITTER")
    for what, value in (("NAME", PROG), ("EMAIL", f"{PROG}@localhost"))
}


class Refusal(Exception):
    """Stop with this one line on standard error and ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


class GitFailed(Exception):
    """A git command failed; the message is its last line of error output."""


# --- git -----------------------------------------------------------------------------


def git(
    args: list[str],
    *,
    cwd: Path,
    timeout: float = GIT_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run ``git args`` in ``cwd`` (``env`` added to ours); its output, stripped."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GitFailed(f"git {args[0]}: {error}") from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitFailed(f"git {args[0]}: {lines[-1] if lines else 'failed'}")
    return done.stdout.decode("utf-8", "replace").strip()


class Checkout:
    """The work tree the agent runs in, as it was before the agent ran."""

    def __init__(self, cwd: Path) -> None:
        try:
            self.top = Path(git(["rev-parse", "--show-toplevel"], cwd=cwd))
            self.head = self.git("rev-parse", "--verify", "HEAD^{commit}")
        except GitFailed as error:
            raise Refusal(f"not in a git work tree with a commit ({error})") from None
        try:
            self.branch: str | None = self.git("symbolic-ref", "-q", "--short", "HEAD")
        except GitFailed:
            self.branch = None  # detached, as CI checkouts often are
        # The common directory, so that every worktree of a clone shares a spool.
        self.git_dir = (self.top / self.git("rev-parse", "--git-common-dir")).resolve()
        self.index = self.top / self.git("rev-parse", "--git-path", "index")

    def git(self, *args: str, **kwargs: Any) -> str:
        return git(list(args), cwd=self.top, **kwargs)

    def dirty_paths(self) -> list[str]:
        """Changed, staged and untracked paths (ignored ones aside)."""
        out = self.git("status", "--porcelain", "-z", "--no-renames", "-uall")
        return [entry[3:] for entry in out.split("\0") if entry]

    def commit_work_tree(self, *, parents: list[str], message: str) -> str | None:
        """Commit the work tree on ``parents``; None when it has the tree of its
        only parent. ``git add -A`` goes into a copy of the index (with its stat
        cache), so the user's index, branch and files are never touched."""
        with tempfile.TemporaryDirectory(prefix="replayhub-record-") as scratch:
            index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            if self.index.is_file():
                shutil.copyfile(self.index, index["GIT_INDEX_FILE"])
            else:
                self.git("read-tree", parents[0], env=index)
            self.git("add", "--all", timeout=ADD_TIMEOUT, env=index)
            tree = self.git("write-tree", env=index)
        same = tree == self.git("rev-parse", f"{parents[0]}^{{tree}}")
        if same and len(parents) == 1:
            return None
        argv = ["commit-tree", tree, "-m", message]
        for parent in parents:
            argv += ["-p", parent]
        try:
            return self.git(*argv)
        except GitFailed:
            # No identity configured (a fresh CI runner): commit under ours.
            return self.git(*argv, env=FALLBACK_IDENTITY)


def push(repository: Path, remote: str, refs: dict[str, str]) -> str | None:
    """Push each ``sha`` to its ``ref`` on ``remote``; None, or why it failed."""
    specs = [f"{sha}:{ref}" for ref, sha in sorted(refs.items())]
    try:
        # No prompt for credentials: a CI job would hang on it.
        args = ["push", "--quiet", remote, *specs]
        prompt = {"GIT_TERMINAL_PROMPT": "0"}
        git(args, cwd=repository, timeout=PUSH_TIMEOUT, env=prompt)
    except GitFailed as error:
        return f"the push to {remote!r} failed ({error})"
    return None


# --- the recording endpoint ----------------------------------------------------------


def upstream_url(kind: str, base: str, path: str) -> str:
    """The upstream URL of the agent's ``path``: openai's ``base`` carries the
    API version (``OPENAI_BASE_URL``), anthropic's SDK adds ``/v1`` itself."""
    base = base.rstrip("/")
    if kind == "openai" and (path == "/v1" or path.startswith(("/v1/", "/v1?"))):
        path = path[3:]
    elif kind == "anthropic" and base.endswith("/v1") and path.startswith("/v1/"):
        base = base[:-3]
    return base + path


def ask_for_usage(data: dict[str, Any], body: bytes) -> bytes:
    """A completions stream's body asking for the usage chunk, as the replay
    gateway asks (SDKs read it as the documented last chunk)."""
    options = data.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return body
    options = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return json.dumps({**data, "stream_options": options}).encode()


def sse_events(raw: bytes) -> list[str]:
    """The raw events of a server-sent event stream, blank line separators off."""
    text = raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    return [event for event in text.split("\n\n") if event.strip()]


def _event_json(event: str) -> Any:
    lines = event.split("\n")
    data = [line[5:].removeprefix(" ") for line in lines if line.startswith("data:")]
    try:
        return json.loads("\n".join(data)) if data else None
    except ValueError:
        return None  # [DONE], keep-alive text


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def read_usage(
    kind: str, response: Any, stream: bool
) -> tuple[dict[str, int] | None, str | None]:
    """One exchange's usage (None when not reported) and model, read as the
    replay gateway reads them: anthropic input counts cache reads and writes."""
    docs = [_event_json(event) for event in response] if stream else [response]
    usage: dict[str, Any] | None = None
    model = None
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        source = doc
        if kind == "anthropic" and doc.get("type") == "message_start":
            source = doc["message"] if isinstance(doc.get("message"), dict) else {}
        elif kind == "openai" and isinstance(doc.get("response"), dict):
            source = doc["response"]
        if isinstance(source.get("model"), str) and source["model"]:
            model = source["model"]
        given = source.get("usage")
        if not isinstance(given, dict):
            continue
        if kind == "anthropic" and doc.get("type") == "message_delta":
            # The delta's counts are cumulative and replace the start's.
            ints = {k: v for k, v in given.items() if isinstance(v, int)}
            usage = {**(usage or {}), **ints}
        else:
            usage = dict(given)
    if usage is None:
        return None, model
    if kind == "anthropic":
        cache = ("cache_read_input_tokens", "cache_creation_input_tokens")
        read = sum(_count(usage.get(name)) for name in ("input_tokens", *cache))
        wrote = _count(usage.get("output_tokens"))
    else:  # chat completions say prompt/completion, the responses API input/output
        read = _count(usage.get("prompt_tokens", usage.get("input_tokens")))
        wrote = _count(usage.get("completion_tokens", usage.get("output_tokens")))
    return {"input_tokens": read, "output_tokens": wrote}, model


def _json_or_text(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")


class RecordingEndpoint(ThreadingHTTPServer):
    """The agent's model APIs on 127.0.0.1: each call goes to the real API with
    the agent's own key and is kept on ``tape`` without its headers. Paths carry
    a secret: nothing else on the machine (a web page by DNS rebinding) writes on it.
    """

    daemon_threads = True

    def __init__(self, upstreams: dict[str, str]) -> None:
        super().__init__(("127.0.0.1", 0), _Exchange)
        self.upstreams = upstreams
        self.secret = secrets.token_urlsafe(16)
        self.tape: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def base_urls(self) -> dict[str, str]:
        root = f"http://127.0.0.1:{self.server_address[1]}/{self.secret}"
        return {
            "ANTHROPIC_BASE_URL": f"{root}/anthropic",
            "OPENAI_BASE_URL": f"{root}/openai/v1",
        }

    def __enter__(self) -> RecordingEndpoint:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()
        self.server_close()


class _Exchange(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the agent's terminal is the agent's

    def do_POST(self) -> None:
        endpoint = cast(RecordingEndpoint, self.server)
        secret, _, rest = self.path.lstrip("/").partition("/")
        kind, _, path = rest.partition("/")
        path = "/" + path
        known = secrets.compare_digest(secret.encode(), endpoint.secret.encode())
        if kind not in UPSTREAMS or not known:
            self._answer(404, "not a recording endpoint")
            return
        # The SDKs send a Content-Length; a chunked request body is not read.
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = _json_or_text(body) if body else None
        stream = isinstance(request, dict) and request.get("stream") is True
        # The endpoint as the upstream names it (openai's without its /v1).
        api_path = upstream_url(kind, "", path.partition("?")[0])
        if kind == "openai" and stream and api_path in USAGE_ON_REQUEST:
            body = ask_for_usage(cast(dict, request), body)
        given = self.headers.items()
        headers = {k: v for k, v in given if k.lower() not in NOT_FORWARDED}
        headers["Accept-Encoding"] = "identity"
        taped = {k.lower(): v for k, v in given if k.lower() in TAPED_HEADERS}
        entry: dict[str, Any] = {"provider_kind": kind, "method": self.command}
        entry.update(path=path, headers=taped, request=request)
        started = time.monotonic()
        url = upstream_url(kind, endpoint.upstreams[kind], path)
        # The upstreams are checked to be http(s) URLs before the agent starts.
        call = urllib.request.Request(url, body or None, headers, method=self.command)  # noqa: S310
        try:
            upstream: Any = urllib.request.urlopen(call, timeout=UPSTREAM_TIMEOUT)  # noqa: S310
        except urllib.error.HTTPError as error:
            upstream = error  # an answer all the same: the agent gets it
        except (OSError, ValueError) as error:
            upstream = None
            message = f"{PROG} could not reach {url}: {error}"
            self._answer(502, message)
            entry.update(status=502, error=message[:500])
        if upstream is not None:
            with upstream:
                status, kept, complete = self._relay(upstream)
            is_stream = "text/event-stream" in upstream.headers.get("Content-Type", "")
            response = sse_events(kept) if is_stream else _json_or_text(kept)
            usage, model = read_usage(kind, response, is_stream)
            if model is None and isinstance(request, dict):
                model = str(request.get("model") or "") or None
            entry.update(status=status, stream=is_stream, response=response)
            entry.update(model=model, usage=usage, truncated=not complete or None)
            entry["billed"] = api_path in BILLED[kind] and self.command == "POST"
        entry["duration_seconds"] = round(time.monotonic() - started, 3)
        with endpoint.lock:
            endpoint.tape.append({k: v for k, v in entry.items() if v is not None})

    do_GET = do_POST  # /v1/models

    def _relay(self, upstream: Any) -> tuple[int, bytes, bool]:
        """Pass the upstream's answer on as it arrives (chunked); returns its
        status, the bytes kept for the tape and whether they are all of it."""
        status = int(getattr(upstream, "status", None) or upstream.code)
        self.send_response(status)
        for name, value in upstream.headers.items():
            if name.lower() not in NOT_FORWARDED:
                self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        kept = bytearray()
        complete = listening = True
        read = getattr(upstream, "read1", upstream.read)
        while True:
            try:
                chunk = read(65536)
            except OSError:
                chunk, complete = b"", False
            if not chunk:
                break
            if len(kept) + len(chunk) <= EXCHANGE_BYTES:
                kept += chunk
            else:
                complete = False
            try:
                if listening:
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
            except OSError:
                listening = False  # the agent hung up; the tape goes on
        if listening:
            with contextlib.suppress(OSError):
                self.wfile.write(b"0\r\n\r\n")
        return status, bytes(kept), complete

    def _answer(self, status: int, message: str) -> None:
        body = json.dumps({"error": {"message": message}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


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


def agent_env(endpoint: RecordingEndpoint, **replayhub: str) -> dict[str, str]:
    """The user's environment with the model APIs on the recording endpoint and
    ``REPLAYHUB_<NAME>`` for each of ``replayhub``, as the sandbox sets them."""
    env = {**os.environ, **endpoint.base_urls()}
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


def clean(value: Any) -> Any:
    """``value`` with NULs and lone surrogates replaced: the server refuses a
    record holding either (PostgreSQL cannot store them)."""
    if isinstance(value, str):
        return value.replace("\0", "\ufffd").encode("utf-8", "replace").decode()
    if isinstance(value, list):
        return [clean(item) for item in value]
    if isinstance(value, dict):
        return {clean(key): clean(item) for key, item in value.items()}
    return value


def build_record(
    facts: dict[str, Any], tape: list[dict[str, Any]], max_bytes: int = MAX_RECORD_BYTES
) -> dict[str, Any]:
    """The native run record: ``facts`` (None values left out), the provider,
    model and usage the tape tells, and the tape cut to fit in ``max_bytes``."""
    record = {key: value for key, value in facts.items() if value is not None}
    kinds = Counter(entry["provider_kind"] for entry in tape)
    if kinds:
        record.setdefault("provider", kinds.most_common(1)[0][0])
    models = [entry["model"] for entry in tape if entry.get("model")]
    if models:
        record.setdefault("model", models[-1])
    record["usage"] = totals(tape)
    record = clean(record)
    record["tape"] = cap_tape(clean(tape), max(max_bytes - _size(record) - 4096, 0))
    return record


def title_of(prompt: str) -> str:
    line = next((line.strip() for line in prompt.splitlines() if line.strip()), "")
    return line if len(line) <= 120 else line[:119] + "\u2026"


# --- delivery ------------------------------------------------------------------------


def post(server: str, project: str, token: str, record: dict[str, Any]) -> str | None:
    """Post ``record``; None when the server stored it (or had it already)."""
    url = f"{server.rstrip('/')}/api/v1/projects/{urllib.parse.quote(project)}/runs"
    body = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
    headers = {"Authorization": f"Bearer {token}"}
    headers["Content-Type"] = "application/x-ndjson"
    # The server is checked to be an http(s) URL.
    request = urllib.request.Request(url, body.encode(), headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=POST_TIMEOUT):  # noqa: S310
            return None
    except urllib.error.HTTPError as error:
        text = error.read(4096).decode("utf-8", "replace")
        with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
            answer = json.loads(text)
            text = answer.get("error", text)
            text += "".join(f"; {bad['error']}" for bad in answer.get("invalid", []))
        return f"the server refused the record ({error.code}): {text[:1000]}"
    except (OSError, ValueError) as error:
        return f"the server at {server} did not answer ({error})"


def spool(directory: Path, delivery: dict[str, Any]) -> Path:
    """Write ``delivery`` to ``directory/<external id>.json``, readable by the
    user only: it holds the prompt and the tape (never the token)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{delivery['record']['external_id']}.json"
    partial = path.with_suffix(".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(delivery, out, ensure_ascii=False)
    os.replace(partial, path)
    return path


def deliver(delivery: dict[str, Any]) -> str | None:
    """Push the refs (unless pushed already), then post; None when both are
    done, else why not. ``delivery["pushed"]`` follows the push."""
    if not delivery["pushed"] and delivery["refs"]:
        why = push(Path(delivery["repository"]), delivery["remote"], delivery["refs"])
        if why:
            return why
    delivery["pushed"] = True
    token = os.environ.get(delivery["token_env"])
    if not token:
        return f"${delivery['token_env']} is not set (the project's ingest token)"
    return post(delivery["server"], delivery["project"], token, delivery["record"])


def say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def send_spooled(path: Path, args: argparse.Namespace) -> bool:
    """Send one spooled run; True when delivered (its file is then removed)."""
    try:
        delivery = json.loads(path.read_text(encoding="utf-8"))
        run_id = delivery["record"]["external_id"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        say(f"{path} is not a spooled run ({error})")
        return False
    # What the command line names wins over what the spool file remembers.
    for name in ("server", "project", "token_env", "remote"):
        delivery[name] = getattr(args, name) or delivery[name]
    delivery["record"]["project"] = delivery["project"]
    why = deliver(delivery)
    if why:
        spool(path.parent, {**delivery, "reason": why})
        say(f"{path.name}: not sent: {why}")
        return False
    path.unlink()
    say(f"sent run {run_id} to {delivery['server']}")
    return True


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

    with tempfile.TemporaryDirectory(prefix="replayhub-record-") as io_dir:
        prompt_file = Path(io_dir) / "prompt.txt"
        prompt_file.write_text(prompt, encoding="utf-8")
        with RecordingEndpoint(upstreams) as endpoint:
            given = {"prompt_file": str(prompt_file), "model": args.model}
            env = agent_env(endpoint, **given, task_id=run_id)
            tee = not sys.stdout.isatty()
            exit_code, duration, output = run_agent(command, env, tee=tee)
            tape = list(endpoint.tape)

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
        original: str | None = left or parents[0]
        done = [("agent-commit", moved), ("work-tree", left)]
        how = "+".join(name for name, did in done if did) or "unchanged"
        refs[RUN_REFS + run_id] = cast(str, original)
        if base != checkout.head:
            refs[BASE_REFS + run_id] = base
        for ref, sha in refs.items():
            checkout.git("update-ref", ref, sha)
    except GitFailed as error:
        say(f"the run's commit could not be written: {error}")
        refs, original, how = {}, None, f"failed: {error}"

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
        "record": build_record(facts, tape, args.max_record_bytes),
    }
    why = deliver(delivery)
    if why is None:
        say(f"recorded run {run_id} ({len(tape)} model calls) in {project}")
        return exit_code
    path = spool(args.spool_dir or checkout.git_dir / "replayhub" / "spool", delivery)
    say(f"{why}; the run is kept in {path}")
    say(f"send it later with: {PROG} --send {path}")
    return EXIT_SPOOLED


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
