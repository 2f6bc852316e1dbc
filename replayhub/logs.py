"""Structured logs: one JSON object per line, the replay id on each line of a replay."""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

_replay_id: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "replay_id", default=None
)


@contextmanager
def replay_context(replay_id: int) -> Iterator[None]:
    """Every log line written inside carries ``replay_id``."""
    token = _replay_id.set(replay_id)
    try:
        yield
    finally:
        _replay_id.reset(token)


class ReplayIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "replay_id", None) is None:
            record.replay_id = _replay_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """A log record as one line of JSON; messages from agents stay data, not markup."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        replay_id = getattr(record, "replay_id", None)
        if replay_id is not None:
            entry["replay_id"] = replay_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class ClientErrorFilter(logging.Filter):
    """A 4xx answer is the client's mistake, not the server's (a form refused,
    a page one's role may not open): log it at DEBUG, one line, without the
    traceback Django attaches. Every answer is in the web server's access log;
    at the default level only 5xx reach the server's log, as errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if status is None or status >= 500:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        # The level was checked before this filter ran, at WARNING.
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
