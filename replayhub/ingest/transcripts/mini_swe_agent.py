"""mini-swe-agent trajectories: ``last_mini_run.traj.json`` (the ``mini``
command's) and ``<instance id>.traj.json`` (its SWE-bench batch runner's).

One JSON object, rewritten after every step by mini-swe-agent 2.x:
``trajectory_format`` (``mini-swe-agent-1.1``), ``info`` (``mini_version``,
``exit_status``, ``submission``: the text printed after the submit command,
a diff when the agent submitted one; ``model_stats``: ``instance_cost``,
``api_calls``; ``config``: ``agent``, ``model.model_name``, ``environment``),
``messages`` (chat messages: ``system``, then ``user`` — the task inside the
instance template —, ``assistant`` with ``extra.response.usage`` and
``extra.timestamp`` in epoch seconds, ``tool``, and a last ``exit``) and, from
the batch runner, ``instance_id``.

One run per file. A batch runner's trajectory is identified as
``<model>:<instance id>`` and takes its base from ``--instances``; the
``mini`` command's names no instance and no commit, so it is identified by
the SHA-256 of its bytes and has no base: its patch is kept as the output.
The prompt is the whole first user message, template included: that is what
the model was asked.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from replayhub.ingest.lines import RecordLine
from replayhub.ingest.transcripts.documents import dig, document_or_refusal
from replayhub.ingest.transcripts.shapes import (
    LineError,
    Parsed,
    RecordDraft,
    block_text,
    cost_usd,
    count,
    first_line,
    iso,
    shown,
)

FORMAT = "mini-swe-agent"
# A submission is taken as a patch only when it reads as one: the ``mini``
# command's submission is whatever the agent printed, often a sentence.
_DIFF = re.compile(r"^(diff --git |--- \S)", re.MULTILINE)


def parse(
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
    raw, value = found
    problem = _problem(value)
    if problem:
        yield LineError(1, problem)
        return
    info, messages = value["info"], value["messages"]
    prompt = next(
        (
            text
            for m in messages
            if isinstance(m, dict)
            and m.get("role") == "user"
            and (text := block_text(m.get("content"))).strip()
        ),
        "",
    )
    if not prompt:
        yield LineError(1, "the trajectory has no user message: no task")
        return
    model = dig(info, "config", "model", "model_name")
    model = model if isinstance(model, str) else ""
    given = value.get("instance_id")
    instance_id = given if isinstance(given, str) and given else ""
    record: dict[str, Any] = {
        "external_id": f"{model or FORMAT}:{instance_id}"
        if instance_id
        else f"{FORMAT}-{hashlib.sha256(raw).hexdigest()[:32]}",
        "title": instance_id or first_line(prompt),
        "prompt": prompt,
        "usage": _usage(info, messages),
        "transcript": {"format": FORMAT, "document": value},
    }
    if model:
        record["model"] = model
    base = (instances or {}).get(instance_id, {}).get("base_commit")
    if isinstance(base, str) and base:
        record["base_sha"] = base
    submission = info.get("submission")
    submission = submission if isinstance(submission, str) else ""
    if submission:
        record["output"] = submission
    draft = RecordDraft(1, record)
    _time(draft, messages, file_time)
    label = f"{instance_id or 'mini-swe-agent run'} ({model or FORMAT})"
    if _DIFF.search(submission):
        draft.search.patch = submission
        draft.search.patch_label = label
    elif submission.strip():
        draft.notes.append(
            "the submission is not a patch: the run has no original commit"
        )
    else:
        status = info.get("exit_status")
        draft.notes.append(
            f"the submission is empty (exit status {shown(status)}): the run "
            "has no original commit"
        )
    yield draft


def _problem(value: Any) -> str:
    """Why ``value`` is not a mini-swe-agent trajectory, or ""."""
    if not isinstance(value, dict):
        return "not a mini-swe-agent trajectory: not a JSON object"
    kind = value.get("trajectory_format")
    if kind is not None and not (
        isinstance(kind, str) and kind.startswith("mini-swe-agent")
    ):
        return f"not a mini-swe-agent trajectory: trajectory_format is {shown(kind)}"
    if not isinstance(value.get("info"), dict):
        return "not a mini-swe-agent trajectory: no info object"
    if kind is None and "mini_version" not in value["info"]:
        return "not a mini-swe-agent trajectory: no trajectory_format or mini_version"
    if not isinstance(value.get("messages"), list):
        return "not a mini-swe-agent trajectory: no messages list"
    return ""


def _usage(info: dict[str, Any], messages: list[Any]) -> dict[str, Any]:
    """Tokens summed over the model's answers; calls and cost as mini-swe-agent
    counted them."""
    sent = received = answers = 0
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            tokens = dig(message, "extra", "response", "usage")
            if isinstance(tokens, dict):
                answers += 1
                sent += count(tokens.get("prompt_tokens"))
                received += count(tokens.get("completion_tokens"))
    stats = info.get("model_stats")
    stats = stats if isinstance(stats, dict) else {}
    usage: dict[str, Any] = {"turns": count(stats.get("api_calls"))}
    if answers:
        # A trajectory that kept no response (1.x) says nothing of its tokens.
        usage["input_tokens"], usage["output_tokens"] = sent, received
    if (cost := cost_usd(stats.get("instance_cost"))) is not None:
        usage["cost_usd"] = cost
    return usage


def _time(draft: RecordDraft, messages: list[Any], file_time: datetime | None) -> None:
    """``started_at``: the first message's time, else the file's, else (an
    upload) the base commit's; always inferred, as the trajectory records no
    start."""
    stamps = [
        stamp
        for message in messages
        if isinstance(message, dict)
        and isinstance(stamp := dig(message, "extra", "timestamp"), int | float)
        and not isinstance(stamp, bool)
        and 0 < stamp < 32503680000  # before the year 3000
    ]
    if stamps:
        draft.infer(
            "started_at",
            iso(datetime.fromtimestamp(min(stamps), UTC)),
            "trajectories record no start time; this is the first timed message's",
        )
    elif file_time is not None:
        draft.infer(
            "started_at",
            iso(file_time),
            "trajectories record no start time; this is the file's",
        )
    else:
        draft.search.time_from_base = True
