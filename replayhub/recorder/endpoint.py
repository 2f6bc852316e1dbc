"""The recording endpoint: the agent's model APIs on 127.0.0.1.

Each call goes on to the real API with the agent's own key, its answer comes
back to the agent as it arrives, and the exchange is kept on the run's tape
without its headers; the keys the agent sent are kept apart (``keys``) so
that ``scrub`` masks them in everything written. No redirect is followed
(``redirects``): the agent's key goes to the upstream it was set for only.
Usage and model are read from each answer as the replay gateway reads them.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from replayhub.recorder.exits import PROG
from replayhub.recorder.redirects import OPENER, redirected_to
from replayhub.recorder.scrub import KEY_HEADERS, credential

# One response kept for the tape at most; the agent still gets all of it.
EXCHANGE_BYTES = 32 * 1024 * 1024
UPSTREAM_TIMEOUT = 900.0  # a long generation, between two bytes
# A body nested deeper is kept as its text: with the record and the tape
# around it, it stays under the 100 levels the server reads.
BODY_DEPTH = 64
UPSTREAMS = {
    "anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    "openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
    # Gemini's root, with no version: the client's paths start with theirs.
    "gemini": ("GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com"),
}
# The endpoints that spend tokens: each answered call is one turn.
BILLED = {
    "anthropic": ("/v1/messages",),
    "openai": ("/chat/completions", "/responses", "/completions", "/embeddings"),
}
# Gemini names the model and the method in the path.
GEMINI_BILLED = re.compile(
    r"/v1[a-z0-9]*/models/[^/:]{1,128}:(?:generateContent|streamGenerateContent)"
)
# The openai endpoints whose streams carry usage only when asked for it.
USAGE_ON_REQUEST = ("/chat/completions", "/completions")
# RFC 9110 hop-by-hop headers, and what the forwarder sets itself.
NOT_FORWARDED: tuple[str, ...] = ("connection", "keep-alive", "proxy-connection")
NOT_FORWARDED += ("proxy-authenticate", "proxy-authorization", "te", "trailer")
NOT_FORWARDED += ("transfer-encoding", "upgrade", "host", "content-length", "expect")
NOT_FORWARDED += ("accept-encoding",)
# The only request headers the tape keeps: never a key, a token or a cookie.
TAPED_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta", "user-agent")


def upstream_url(kind: str, base: str, path: str) -> str:
    """The upstream URL of the agent's ``path``: openai's ``base`` carries the
    API version (``OPENAI_BASE_URL``), anthropic's SDK adds ``/v1`` itself."""
    base = base.rstrip("/")
    if kind == "openai" and (path == "/v1" or path.startswith(("/v1/", "/v1?"))):
        path = path[3:]
    elif kind == "anthropic" and base.endswith("/v1") and path.startswith("/v1/"):
        base = base[:-3]
    elif kind == "gemini":
        version = path.split("/", 2)[1] if path.count("/") >= 2 else ""
        if version and base.endswith("/" + version):
            base = base[: -len(version) - 1]
    return base + path


def billed(kind: str, api_path: str) -> bool:
    if kind == "gemini":
        return GEMINI_BILLED.fullmatch(api_path) is not None
    return api_path in BILLED[kind]


def query_key(path: str) -> str | None:
    """The key a Gemini client may put in the query (``?key=``) instead of
    its header, to be masked as a header's is."""
    query = urllib.parse.parse_qs(path.partition("?")[2])
    found = query.get("key")
    return found[0] if found else None


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
        for name in ("model", "modelVersion"):
            if isinstance(source.get(name), str) and source[name]:
                model = source[name]
        given = source.get("usageMetadata" if kind == "gemini" else "usage")
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
    elif kind == "gemini":  # each chunk's counts are the call's so far
        read = _count(usage.get("promptTokenCount"))
        output = ("candidatesTokenCount", "thoughtsTokenCount")
        wrote = sum(_count(usage.get(name)) for name in output)
    else:  # chat completions say prompt/completion, the responses API input/output
        read = _count(usage.get("prompt_tokens", usage.get("input_tokens")))
        wrote = _count(usage.get("completion_tokens", usage.get("output_tokens")))
    return {"input_tokens": read, "output_tokens": wrote}, model


def _json_or_text(body: bytes) -> Any:
    """A body as the tape keeps it: its JSON, or its text when it is not JSON
    or nests past :data:`BODY_DEPTH` (the server refuses a record nested past
    100 levels, and the run would stay in the spool for good)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        parsed = body
    if parsed is body or _nests_past(parsed, BODY_DEPTH):
        return body.decode("utf-8", "replace")
    return parsed


def _nests_past(value: Any, limit: int) -> bool:
    work = [(value, 0)]
    while work:
        item, depth = work.pop()
        if isinstance(item, (list, dict)):
            if depth == limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            work.extend((child, depth + 1) for child in children)
    return False


def first_call(request: Any, headers: dict[str, str]) -> dict[str, Any]:
    """The model an Anthropic call asked for and its ``anthropic-beta`` values."""
    model = request.get("model") if isinstance(request, dict) else None
    betas = headers.get("anthropic-beta", "").split(",")
    found: dict[str, Any] = {"beta": [b.strip() for b in betas if b.strip()][:64]}
    if isinstance(model, str) and model:
        found["model"] = model[:200]
    return found


class RecordingEndpoint(ThreadingHTTPServer):
    """The agent's model APIs on 127.0.0.1: each call goes to the real API with
    the agent's own key and is kept on ``tape`` without its headers; the keys
    it carried are in ``keys``. Paths carry a secret: nothing else on the
    machine (a web page by DNS rebinding) writes on it.
    """

    daemon_threads = True

    def __init__(self, upstreams: dict[str, str]) -> None:
        super().__init__(("127.0.0.1", 0), _Exchange)
        self.upstreams = upstreams
        self.secret = secrets.token_urlsafe(16)
        self.tape: list[dict[str, Any]] = []
        self.keys: set[str] = set()
        # The model and beta flags of the first Anthropic messages call: the
        # model variant ("[1m]") and the betas go together, and a replay
        # that sends others sends a different call.
        self.first_anthropic: dict[str, Any] | None = None
        self.lock = threading.Lock()

    def base_urls(self) -> dict[str, str]:
        root = f"http://127.0.0.1:{self.server_address[1]}/{self.secret}"
        return {
            "ANTHROPIC_BASE_URL": f"{root}/anthropic",
            "OPENAI_BASE_URL": f"{root}/openai/v1",
            "GOOGLE_GEMINI_BASE_URL": f"{root}/gemini",
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
        if kind not in endpoint.upstreams or not known:
            self._answer(404, "not a recording endpoint")
            return
        if self.headers.get("Upgrade"):
            # A WebSocket (Codex tries one for the Responses API) would not be
            # on the tape; refused as the gateway refuses it, the agent falls
            # back to HTTP, as it does in its replay.
            self._answer(403, f"{PROG} records HTTP calls, not WebSocket upgrades")
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
        with endpoint.lock:
            endpoint.keys.update(
                credential(k, v) for k, v in given if k.lower() in KEY_HEADERS
            )
            if kind == "gemini" and (key := query_key(path)):
                endpoint.keys.add(key)
            messages = kind == "anthropic" and api_path == "/v1/messages"
            if messages and endpoint.first_anthropic is None:
                endpoint.first_anthropic = first_call(request, taped)
        entry: dict[str, Any] = {"provider_kind": kind, "method": self.command}
        entry.update(path=path, headers=taped, request=request)
        started = time.monotonic()
        url = upstream_url(kind, endpoint.upstreams[kind], path)
        # The upstreams are checked to be http(s) URLs before the agent starts.
        call = urllib.request.Request(url, body or None, headers, method=self.command)  # noqa: S310
        upstream = self._call(call, kind, entry)
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
            entry["billed"] = billed(kind, api_path) and self.command == "POST"
        entry["duration_seconds"] = round(time.monotonic() - started, 3)
        with endpoint.lock:
            endpoint.tape.append({k: v for k, v in entry.items() if v is not None})

    do_GET = do_POST  # /v1/models

    def _call(
        self, call: urllib.request.Request, kind: str, entry: dict[str, Any]
    ) -> Any:
        """The upstream's answer to pass on (an error status is one too), or
        None when the agent was answered a 502 here, ``entry`` saying why."""
        try:
            return OPENER.open(call, timeout=UPSTREAM_TIMEOUT)
        except urllib.error.HTTPError as error:
            where = redirected_to(error)
            if where is None:
                return error  # an answer all the same: the agent gets it
            error.close()
            # Neither the redirect nor its target's answer reaches the agent:
            # its SDK would follow it with the key to wherever it points.
            message = (
                f"{PROG}: the upstream answered {error.code}, a redirect to "
                f"{where}, which is not followed with the agent's key (if that "
                f"is the API, give it as --{kind}-upstream)"
            )
        except (OSError, ValueError) as error:
            message = f"{PROG} could not reach {call.full_url}: {error}"
        self._answer(502, message)
        entry.update(status=502, error=message[:500])
        return None

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
