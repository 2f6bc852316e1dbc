"""Transcripts written as one JSON document: SWE-agent trajectories (``.traj``)
and OpenHands trajectories (a JSON list of events).

Both are read whole, but never more than the record size limit: the document
is kept with the run, so a larger one could not be stored anyway and is
refused as it is read.

SWE-agent: an object with ``trajectory`` (steps: ``action``, ``observation``,
``thought``, ``response``), ``history`` (the messages sent, demonstrations
marked ``is_demo``), ``info`` (``submission``: the patch, ``exit_status``,
``model_stats``: ``instance_cost``, ``tokens_sent``, ``tokens_received``,
``api_calls``) and ``replay_config`` (the run's configuration as JSON text:
``env.repo.base_commit``, ``problem_statement``, ``agent.model.name``). One
run per trajectory, identified as ``<model>:<instance id>``.

OpenHands: a list of events, each with ``id``, ``timestamp``, ``source``
(``user``, ``agent``, ``environment``) and either an ``action`` (``message``,
``run``, ``edit``, ``finish``…) with ``args`` or an ``observation`` with
``content``; an agent's events carry ``llm_metrics`` (``accumulated_cost``,
``accumulated_token_usage``: ``prompt_tokens``, ``completion_tokens``,
``model``). The list names no session, so a trajectory is identified by the
SHA-256 of its bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from replayhub.ingest.lines import RecordLine
from replayhub.ingest.native import RecordError, parse_text
from replayhub.ingest.transcripts.shapes import (
    LineError,
    Parsed,
    RecordDraft,
    Search,
    cost_usd,
    count,
    first_line,
    iso,
    moment,
)
from replayhub.lib import boundedjson

SWE_AGENT = "swe-agent"
OPENHANDS = "openhands"


def document_or_refusal(
    lines: Iterable[RecordLine], limit: int, *, what: str = "the trajectory"
) -> Generator[LineError, None, tuple[bytes, Any] | None]:
    """A file's lines joined and parsed as one JSON value, for a reader of a
    whole-document format, used as ``found = yield from
    document_or_refusal(...)``.

    Returns the file's bytes and its value. Returns None when there is none:
    after yielding the file's one-line refusal (line 1, naming ``what``) when
    it is over ``limit`` bytes, not UTF-8 or not JSON, and without a word
    when it holds nothing but white space (no record, as an empty file of run
    records). The file is never read past ``limit``."""
    try:
        found = _read_document(lines, limit, what)
    except RecordError as error:
        yield LineError(1, str(error))
        return None
    return found


def _read_document(
    lines: Iterable[RecordLine], limit: int, what: str
) -> tuple[bytes, Any] | None:
    parts: list[bytes] = []
    size = 0
    for _, data, _ in lines:
        size += len(data) + 1 if data is not None else limit + 1
        if size > limit:
            raise RecordError(f"{what} is over the limit of {limit:,} bytes")
        parts.append(data or b"")
    raw = b"\n".join(parts)
    if not raw.strip().removeprefix(b"\xef\xbb\xbf").strip():
        return None
    try:
        return raw, parse_text(raw.decode("utf-8").removeprefix("\ufeff"))
    except UnicodeDecodeError:
        raise RecordError(f"{what} is not UTF-8 text") from None


def parse_swe_agent(
    lines: Iterable[RecordLine],
    *,
    name: str = "",
    limit: int,
    instances: dict[str, dict[str, Any]] | None = None,
    file_time: datetime | None = None,
) -> Iterator[Parsed]:
    found = yield from document_or_refusal(lines, limit)
    if found is None:
        return
    _, value = found
    if not isinstance(value, dict) or not isinstance(value.get("info"), dict):
        yield LineError(1, "not a SWE-agent trajectory: no info object")
        return
    info = value["info"]
    config: dict[str, Any] = {}
    if isinstance(value.get("replay_config"), str):
        # JSON text inside the document: read within the same bounds, and a
        # configuration past them refuses the trajectory.
        try:
            parsed = boundedjson.loads(value["replay_config"], max_bytes=limit)
            config = parsed if isinstance(parsed, dict) else {}
        except boundedjson.Refused as refused:
            if refused.bound:
                yield LineError(1, f"replay_config: {refused}")
                return
            config = {}
    elif isinstance(value.get("replay_config"), dict):
        config = value["replay_config"]
    statement = dig(config, "problem_statement")
    statement = statement if isinstance(statement, dict) else {}
    stem = name.rsplit("/", 1)[-1].removesuffix(".traj")
    given = statement.get("id")
    instance_id: str = given if isinstance(given, str) and given else stem
    instance = (instances or {}).get(instance_id, {})
    prompt = statement.get("text") if isinstance(statement.get("text"), str) else ""
    if not prompt:
        prompt = instance.get("problem_statement") or _first_task(value.get("history"))
    if not prompt:
        yield LineError(1, f"{instance_id}: no problem statement or task message")
        return
    model = dig(config, "agent", "model", "name")
    model = model if isinstance(model, str) else ""
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    usage: dict[str, Any] = {
        "input_tokens": count(stats.get("tokens_sent")),
        "output_tokens": count(stats.get("tokens_received")),
        "turns": count(stats.get("api_calls")),
    }
    if (cost := cost_usd(stats.get("instance_cost"))) is not None:
        usage["cost_usd"] = cost
    record: dict[str, Any] = {
        "external_id": f"{model or 'swe-agent'}:{instance_id}",
        "title": instance_id,
        "prompt": prompt,
        "usage": usage,
        "transcript": {"format": SWE_AGENT, "document": value},
    }
    if model:
        record["model"] = model
    base = dig(config, "env", "repo", "base_commit") or instance.get("base_commit")
    if isinstance(base, str) and base:
        record["base_sha"] = base
    submission = info.get("submission")
    if isinstance(submission, str) and submission:
        record["output"] = submission
    draft = RecordDraft(1, record)
    if file_time is not None:
        draft.infer(
            "started_at",
            iso(file_time),
            "trajectories record no start time; this is the file's",
        )
    draft.search = Search(
        patch=submission if isinstance(submission, str) else "",
        patch_label=f"{instance_id} ({model or 'swe-agent'})",
        time_from_base=file_time is None,
    )
    yield draft


def dig(value: Any, *path: str) -> Any:
    """The value at ``path`` through nested objects, or None."""
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _first_task(history: Any) -> str:
    if not isinstance(history, list):
        return ""
    for message in history:
        if (
            isinstance(message, dict)
            and message.get("role") == "user"
            and not message.get("is_demo")
        ):
            content = message.get("content")
            if isinstance(content, str) and content.strip():
                return content
    return ""


def parse_openhands(
    lines: Iterable[RecordLine], *, name: str = "", limit: int
) -> Iterator[Parsed]:
    found = yield from document_or_refusal(lines, limit)
    if found is None:
        return
    raw, value = found
    if isinstance(value, dict) and isinstance(value.get("history"), list):
        value = value["history"]
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        yield LineError(1, "not an OpenHands trajectory: a JSON list of events")
        return
    prompt = ""
    for event in value:
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if event.get("source") == "user" and event.get("action") == "message":
            prompt = args.get("content") or event.get("message") or ""
            if isinstance(prompt, str) and prompt.strip():
                break
            prompt = ""
    if not prompt:
        yield LineError(1, "the trajectory has no user message")
        return
    times = [t for event in value if (t := _time(event.get("timestamp")))]
    if not times:
        yield LineError(1, "no event has a timestamp")
        return
    metrics: dict[str, Any] = {}
    for event in value:
        if isinstance(event.get("llm_metrics"), dict):
            metrics = event["llm_metrics"]
    tokens = metrics.get("accumulated_token_usage")
    tokens = tokens if isinstance(tokens, dict) else {}
    usage: dict[str, Any] = {
        "input_tokens": count(tokens.get("prompt_tokens")),
        "output_tokens": count(tokens.get("completion_tokens")),
    }
    if (cost := cost_usd(metrics.get("accumulated_cost"))) is not None:
        usage["cost_usd"] = cost
    record: dict[str, Any] = {
        "external_id": "openhands-" + hashlib.sha256(raw).hexdigest()[:32],
        "title": first_line(prompt),
        "prompt": prompt,
        "started_at": iso(min(times)),
        "usage": usage,
        "transcript": {"format": OPENHANDS, "events": value},
    }
    if isinstance(tokens.get("model"), str) and tokens["model"]:
        record["model"] = tokens["model"]
    for event in reversed(value):
        if event.get("action") == "finish":
            args = event.get("args") if isinstance(event.get("args"), dict) else {}
            text = args.get("final_thought") or event.get("message")
            if isinstance(text, str) and text:
                record["output"] = text
            break
    draft = RecordDraft(1, record)
    if not any(moment(event.get("timestamp")) for event in value):
        draft.inferred["started_at"] = (
            "OpenHands writes its times without a zone; read as UTC"
        )
    draft.notes.append(
        "an OpenHands trajectory names no commit: the run has no original commit"
    )
    yield draft


def _time(value: Any) -> datetime | None:
    found = moment(value)
    if found is None and isinstance(value, str):
        # OpenHands writes its times without a zone, in UTC.
        try:
            found = datetime.fromisoformat(value).replace(tzinfo=UTC)
        except ValueError:
            return None
    return found
