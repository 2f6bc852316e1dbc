"""One completion from a provider, called from the host (never the sandbox).

The request is the one an SDK of the provider's API would send — the Messages
API for ``anthropic``, chat completions for ``openai`` — built with the
gateway's own wire rules (``gateway.wire``: where the path joins the base URL,
where the key goes, how usage is read and priced). A 429 or a 5xx is retried
with exponential backoff (``Retry-After`` honoured up to a ceiling); nothing
else is: a timeout, a refused connection or another status ends the call with
its error. The key is held in memory only and masked in every error text.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from replayhub.gateway import wire
from replayhub.gateway.providers import Upstream
from replayhub.lib import boundedjson

ANTHROPIC_VERSION = "2023-06-01"
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
# The longest one backoff waits, whatever Retry-After asks for.
MAX_BACKOFF_SECONDS = 60.0


@dataclass(frozen=True)
class CallPolicy:
    """How hard to try: ``timeout`` bounds the connection and each read,
    ``retries`` are the attempts after the first (on 429 and 5xx only), the
    n-th waiting ``backoff * 2**(n-1)`` seconds."""

    timeout: float = 120.0
    retries: int = 3
    backoff: float = 1.0
    max_tokens: int = 4096


@dataclass(frozen=True)
class Completion:
    """What one call (all its attempts) gave. ``text`` is None when it failed,
    and ``error`` then says why ("" on success). Token counts add up every
    attempt that reported usage; ``cost_usd`` is None when the provider's price
    table does not price the model."""

    text: str | None
    error: str
    status: int | None
    attempts: int
    duration_ms: float
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal | None = None
    model_answered: str = ""

    @property
    def ok(self) -> bool:
        return self.text is not None


def retryable(status: int) -> bool:
    """Only a rate limit or a server's own failure is worth another attempt."""
    return status == 429 or 500 <= status <= 599


def backoff_delay(attempt: int, base: float, retry_after: str | None) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` from 1)."""
    delay = base * 2 ** (attempt - 1)
    if retry_after:
        try:
            asked = float(retry_after)
        except ValueError:
            asked = 0.0  # an HTTP date: the exponential delay will do
        if asked == asked and asked > delay:  # not NaN
            delay = asked
    return max(0.0, min(delay, MAX_BACKOFF_SECONDS))


def request_for(upstream: Upstream, model: str, prompt: str, max_tokens: int):
    """The path, headers and body of one completion request."""
    if upstream.kind == wire.ANTHROPIC:
        endpoint = "/v1/messages"
        headers = [
            ("anthropic-version", ANTHROPIC_VERSION),
            ("Content-Type", "application/json"),
        ]
    else:
        endpoint = "/chat/completions"
        headers = [("Content-Type", "application/json")]
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": prompt}],
    }
    path = wire.upstream_path(upstream.kind, upstream.base_url, endpoint)
    return (
        path,
        wire.upstream_headers(upstream.kind, headers, upstream.key),
        json.dumps(body, ensure_ascii=False).encode(),
    )


def answer_text(kind: str, data: Any) -> str | None:
    """The text of a completion response, or None when it has none."""
    if not isinstance(data, dict):
        return None
    if kind == wire.ANTHROPIC:
        blocks = data.get("content")
        if not isinstance(blocks, list):
            return None
        return "".join(
            block["text"]
            for block in blocks
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        )
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        return None
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return None


def _connection(base_url: str, timeout: float) -> http.client.HTTPConnection:
    url = urlsplit(base_url)
    host = url.hostname or ""
    if url.scheme == "https":
        # The default context verifies the certificate and the host name.
        return http.client.HTTPSConnection(
            host, url.port or 443, timeout=timeout, context=ssl.create_default_context()
        )
    return http.client.HTTPConnection(host, url.port or 80, timeout=timeout)


class _Attempt:
    """One HTTP exchange's outcome."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.body = b""
        self.retry_after: str | None = None
        self.error = ""


def _send(upstream: Upstream, request, timeout: float) -> _Attempt:
    path, headers, body = request
    attempt = _Attempt()
    conn = _connection(upstream.base_url, timeout)
    try:
        conn.putrequest("POST", path, skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        attempt.status = response.status
        attempt.retry_after = response.getheader("Retry-After")
        attempt.body = response.read(MAX_RESPONSE_BYTES + 1)
        if len(attempt.body) > MAX_RESPONSE_BYTES:
            attempt.error = "the response is larger than 16 MiB"
    except TimeoutError:
        attempt.error = f"no answer within {timeout:g} s"
    except ssl.SSLError as error:
        attempt.error = f"TLS failed: {error.reason or error}"
    except (OSError, http.client.HTTPException) as error:
        attempt.error = f"the connection failed: {type(error).__name__}: {error}"
    finally:
        conn.close()
    return attempt


def _masked(text: str, key: str) -> str:
    return text.replace(key, "*" * len(key)) if key else text


def complete(
    upstream: Upstream,
    *,
    model: str,
    prompt: str,
    policy: CallPolicy = CallPolicy(),
    sleep: Callable[[float], None] = time.sleep,
) -> Completion:
    """Ask ``model`` of ``upstream`` for one completion of ``prompt``."""
    request = request_for(upstream, model, prompt, policy.max_tokens)
    started = time.monotonic()
    tokens_in = tokens_out = 0
    cost: Decimal | None = None
    priced = True
    answered = ""
    attempts = 0
    while True:
        attempts += 1
        attempt = _send(upstream, request, policy.timeout)
        meter = wire.UsageMeter(upstream.kind, streaming=False)
        meter.feed(attempt.body)
        usage = meter.finish()
        tokens_in += usage.input_tokens or 0
        tokens_out += usage.output_tokens or 0
        answered = usage.model or answered
        if usage.input_tokens is not None or usage.output_tokens is not None:
            price = wire.cost(upstream.prices, usage.model or model, usage)
            if price is None:
                priced = False
            else:
                cost = (cost or Decimal(0)) + price
        status = attempt.status
        if (
            status is not None
            and retryable(status)
            and not attempt.error
            and attempts <= policy.retries
        ):
            sleep(backoff_delay(attempts, policy.backoff, attempt.retry_after))
            continue
        break
    error = attempt.error
    text = None
    if not error and status is not None and status != 200:
        detail = usage.error or attempt.body[:200].decode("utf-8", "replace").strip()
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        error = f"HTTP {status}{tried}: {detail}" if detail else f"HTTP {status}"
    elif not error:
        try:
            text = answer_text(upstream.kind, boundedjson.loads(attempt.body))
        except ValueError:
            text = None
        if text is None:
            error = "the response holds no completion text"
        else:
            # A careless upstream may echo what it was sent; the key stays out.
            text = _masked(text, upstream.key)
    return Completion(
        text=text,
        error=_masked(error, upstream.key)[:500],
        status=status,
        attempts=attempts,
        duration_ms=(time.monotonic() - started) * 1000,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_usd=cost if priced else None,
        model_answered=answered,
    )
