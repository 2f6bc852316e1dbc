"""A project's events as webhook bodies, and their signature.

CloudEvents 1.0 in its structured JSON form (``specversion``, ``id``,
``source``, ``type``, ``time``, ``datacontenttype``, ``data``), or a body a
Slack-compatible incoming webhook shows (``{"text": ...}``). A webhook with a
secret gets ``X-ReplayHub-Signature-256: sha256=<hex>``, the HMAC-SHA256 of
the exact bytes posted, as GitHub signs its own webhooks; a receiver
compares it in constant time before reading the body.
"""

from __future__ import annotations

import hashlib
import hmac

EVENTS = ("replay.finished", "review.decided", "night.closed", "trends.signal")
TYPE_PREFIX = "dev.replayhub."
SIGNATURE_HEADER = "X-ReplayHub-Signature-256"


def cloudevent(
    *, event: str, id: str, source: str, time: str, data: dict, subject: str = ""
) -> dict:
    body = {
        "specversion": "1.0",
        "id": id,
        "source": source,
        "type": TYPE_PREFIX + event,
        "time": time,
        "datacontenttype": "application/json",
        "data": data,
    }
    if subject:
        body["subject"] = subject
    return body


def slack(text: str) -> dict:
    return {"text": text}


def signature(key: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def events_problem(events: list[str]) -> str:
    """Why ``events`` is not a subset of the events ("" when it is)."""
    if not events:
        return f"name at least one event ({', '.join(EVENTS)})."
    unknown = [event for event in events if event not in EVENTS]
    if unknown:
        return f"unknown event {unknown[0]!r} (one of {', '.join(EVENTS)})."
    return ""
