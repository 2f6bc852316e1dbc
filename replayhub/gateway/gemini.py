"""Gemini's ``generateContent`` wire (Gemini CLI's), as pure functions: its
endpoints (the model is part of the path), its key header, its usage, a
stream's ``data:`` chunks rebuilt into the one response they add up to, and
a response written back as a stream.

Paths: ``/v1beta/models/<model>:generateContent`` (JSON) and
``…:streamGenerateContent`` (with ``?alt=sse`` server-sent events, each
``data:`` a partial ``GenerateContentResponse``), ``…:countTokens`` and
``GET /v1beta/models``. The key goes in ``x-goog-api-key``. The base URL is
the API's root with no version (``https://generativelanguage.googleapis.com``,
as ``GOOGLE_GEMINI_BASE_URL`` is); one that ends in the version the path
starts with does not repeat it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from replayhub.lib.jsonvalues import items

KIND = "gemini"
KEY_HEADER = "x-goog-api-key"
_CALL = re.compile(
    r"/(v1|v1beta|v1alpha)/models/([A-Za-z0-9][A-Za-z0-9._-]{0,127})"
    r":(generateContent|streamGenerateContent|countTokens)"
)
_LIST = re.compile(r"/(v1|v1beta|v1alpha)/models")
BILLED_METHODS = frozenset({"generateContent", "streamGenerateContent"})
STREAM_METHOD = "streamGenerateContent"


def call(path: str) -> tuple[str, str] | None:
    """``(model, method)`` of a model call's path, or ``None``."""
    found = _CALL.fullmatch(path)
    return (found.group(2), found.group(3)) if found else None


def allowed(method: str, path: str) -> bool:
    if method == "POST":
        return call(path) is not None
    return method == "GET" and _LIST.fullmatch(path) is not None


def billed(path: str) -> bool:
    found = call(path)
    return found is not None and found[1] in BILLED_METHODS


def streams(path: str) -> bool:
    found = call(path)
    return found is not None and found[1] == STREAM_METHOD


def model_of(path: str) -> str | None:
    found = call(path)
    return found[0] if found else None


def max_output(body: Mapping[str, Any]) -> int | None:
    config = body.get("generationConfig")
    given = config.get("maxOutputTokens") if isinstance(config, dict) else None
    return given if isinstance(given, int) and not isinstance(given, bool) else None


def upstream_path(base: str, path: str) -> str:
    """``path`` on a base URL's path: a version the base ends in not repeated."""
    base = base.rstrip("/")
    version = path.split("/", 2)[1] if path.count("/") >= 2 else ""
    if version and base.endswith("/" + version):
        base = base[: -len(version) - 1]
    return base + path


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def usage(metadata: Mapping[str, Any]) -> dict[str, int]:
    """``usageMetadata`` as the gateway counts usage: thinking is output."""
    return {
        "input_tokens": _count(metadata.get("promptTokenCount")),
        "output_tokens": _count(metadata.get("candidatesTokenCount"))
        + _count(metadata.get("thoughtsTokenCount")),
        "cached_tokens": _count(metadata.get("cachedContentTokenCount")),
        "cache_write_tokens": 0,
    }


_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
}


def error_body(status: int, message: str) -> bytes:
    data = {
        "error": {
            "code": status,
            "message": message,
            "status": _STATUS.get(status, "INTERNAL"),
        }
    }
    return json.dumps(data).encode()


# -- tapes -------------------------------------------------------------------


def rebuild(chunks: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The response a stream's chunks add up to: each candidate's parts in
    order (a text part following a text part of the same kind joined to it),
    the last finish reason, usage, model version and response id."""
    merged: dict[str, Any] | None = None
    candidates: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if merged is None:
            merged = {}
        for key in ("usageMetadata", "modelVersion", "responseId", "promptFeedback"):
            if key in chunk:
                merged[key] = chunk[key]
        for candidate in items(chunk.get("candidates")):
            if isinstance(candidate, dict):
                _merge(candidates, candidate)
    if merged is None:
        return None
    merged["candidates"] = [candidates[i] for i in sorted(candidates)]
    return merged


def _merge(candidates: dict[int, dict[str, Any]], candidate: dict[str, Any]) -> None:
    index = candidate.get("index")
    at = index if isinstance(index, int) else 0
    into = candidates.setdefault(at, {"content": {"role": "model", "parts": []}})
    for key, value in candidate.items():
        if key != "content":
            into[key] = value
    content = candidate.get("content")
    if not isinstance(content, dict):
        return
    if isinstance(content.get("role"), str):
        into["content"]["role"] = content["role"]
    parts: list[Any] = into["content"]["parts"]
    for part in items(content.get("parts")):
        last = parts[-1] if parts else None
        if (
            isinstance(part, dict)
            and isinstance(last, dict)
            and set(part) <= {"text", "thought"}
            and set(last) <= {"text", "thought"}
            and isinstance(part.get("text"), str)
            and isinstance(last.get("text"), str)
            and part.get("thought") == last.get("thought")
        ):
            last["text"] += part["text"]
        else:
            parts.append(dict(part) if isinstance(part, dict) else part)


def events(response: dict[str, Any]) -> list[bytes]:
    """``response`` as a ``?alt=sse`` stream: one ``data:`` chunk holding all
    of it, which is a stream the API may send."""
    text = json.dumps(response, ensure_ascii=False)
    return [f"data: {text}\r\n\r\n".encode("utf-8", "surrogatepass")]
