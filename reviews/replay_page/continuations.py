"""What a rollout replay's page shows: the seed, both continuations, both rewards;
and the replay's output as a verifiers record to download.

Python computes, the template (``reviews/_rollout.html``) renders: messages are
reduced here to plain rows (role, text, whether the text is long, tool calls
with their arguments laid out, which call a tool result answers), and every
piece of text reaches the template as text, escaped there like any other.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import permission_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from replayhub import roles
from replayhub.lib import boundedjson
from replayhub.models import Replay, Seed
from replayhub.rollouts.completions import MalformedCompletion, normalise
from replayhub.rollouts.output import output_record, record_line
from replayhub.rollouts.replay import replay_mark
from reviews.replay_page.evidence import read_evidence
from reviews.views import replay_for

# Text longer than this, or of more lines, is collapsed behind its first line.
LONG_CHARS = 600
LONG_LINES = 12
SUMMARY_CHARS = 120


def rollout_view(replay: Replay) -> dict[str, Any] | None:
    """The rollout side of ``replay``'s page; None for a code run's replay."""
    found = read_evidence(replay.evidence).rollout
    seed: Seed | None = replay.seed if replay.seed_id else None
    if seed is None and not found:
        return None
    found = found or {}
    threshold = found.get("pass_threshold", replay.project.pass_threshold)
    original_reward = found.get("original_reward", replay.run.reward)
    replay_reward = found.get("replay_reward")
    view: dict[str, Any] = {
        "trace_id": replay.run.external_id,
        "seed": seed,
        "seed_number": seed.number if seed else found.get("seed"),
        "seed_kind": seed.get_kind_display() if seed else found.get("seed_kind", ""),
        "anchor": seed.get_anchor_display() if seed else found.get("anchor", ""),
        "anchor_node": seed.anchor_node if seed else None,
        "pass_threshold": threshold,
        "original_reward": original_reward,
        "original_passes": _passes(original_reward, threshold),
        "replay_reward": replay_reward,
        "replay_passes": _passes(replay_reward, threshold),
        "similarity": found.get("similarity"),
        # Replays stored before separate verifiers existed scored in the
        # harness's sandbox.
        "reward_source": found.get("reward_source") or "harness",
        "harness_reward": found.get("harness_reward"),
        "verifier": found.get("verifier") or {},
        "failure": found.get("failure", ""),
        "harness_commit": found.get("harness_commit", ""),
        "seed_messages": messages_view(seed.messages if seed else []),
        "original": messages_view(
            (seed.continuation or seed.original_completion) if seed else []
        ),
        "replayed": messages_view(found.get("completion") or []),
        "has_output": seed is not None and found.get("completion") is not None,
    }
    return view


def messages_view(messages: object) -> list[dict[str, Any]]:
    """Chat messages as rows for the page; a text completion is one row."""
    if messages == "" or messages == []:
        return []
    try:
        normal = normalise(messages)
    except MalformedCompletion as error:
        # Shown as recorded rather than dropped: a reviewer should see it.
        raw = json.dumps(messages, indent=2, ensure_ascii=False, default=str)
        return [{"role": "unreadable", "problem": str(error), **text_view(raw)}]
    calls = {c.id: c.name for m in normal for c in m.tool_calls if c.id}
    rows = []
    for message in normal:
        row: dict[str, Any] = {"role": message.role, **text_view(message.content)}
        row["tool_calls"] = [
            {
                "id": c.id,
                "name": c.name,
                **arguments_view(pretty_arguments(c.arguments)),
            }
            for c in message.tool_calls
        ]
        if message.role == "tool":
            row["answers"] = message.tool_call_id
            row["tool_name"] = message.name or calls.get(message.tool_call_id, "")
        rows.append(row)
    return rows


def text_view(text: str) -> dict[str, Any]:
    """``text`` with whether to collapse it and the line that stands for it."""
    long = len(text) > LONG_CHARS or text.count("\n") >= LONG_LINES
    first = text.strip().split("\n", 1)[0] if text.strip() else ""
    if len(first) > SUMMARY_CHARS:
        first = first[: SUMMARY_CHARS - 1] + "…"
    return {"text": text, "long": long, "summary": first, "chars": len(text)}


def arguments_view(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as :func:`text_view`, summed up by their
    fields (``file_path: calc.py``) rather than by the ``{`` JSON opens with."""
    view = text_view(arguments)
    try:
        value = boundedjson.loads(arguments)
    except boundedjson.Refused:
        return view
    if isinstance(value, dict) and value:
        parts = []
        for key, item in value.items():
            shown = item if isinstance(item, str) else json.dumps(item, default=str)
            parts.append(f"{key}: {shown.strip().split(chr(10), 1)[0]}")
        line = ", ".join(parts)
        if len(line) > SUMMARY_CHARS:
            line = line[: SUMMARY_CHARS - 1] + "…"
        view["summary"] = line
    return view


def pretty_arguments(arguments: str) -> str:
    """Tool-call arguments laid out when they are JSON, else as written."""
    try:
        value = boundedjson.loads(arguments)
    except boundedjson.Refused:
        return arguments
    return json.dumps(value, indent=2, ensure_ascii=False)


def _passes(reward: object, threshold: object) -> bool | None:
    if not isinstance(reward, int | float) or not isinstance(threshold, int | float):
        return None
    return reward >= threshold


@require_GET
@permission_required(roles.VIEW_REPLAYS, raise_exception=True)
def replay_rollout_record(request: HttpRequest, replay_id: int) -> HttpResponse:
    """The replay's output as one verifiers record (JSONL), marked as
    ReplayHub's own so that importing it back never makes it a rollout."""
    replay = replay_for(request.user, replay_id, related=("run", "seed"))
    found = read_evidence(replay.evidence).rollout
    if replay.seed is None or found.get("completion") is None:
        raise Http404("this replay has no rollout output")
    record = output_record(
        replay_id=replay.pk,
        trace_id=replay.run.external_id,
        task_name=replay.run.title,
        seed=replay.seed.messages,
        completion=found["completion"],
        reward=found.get("replay_reward"),
        mark=replay_mark(
            replay_id=replay.pk,
            seed_key=replay.seed.key,
            source=replay.run.external_id,
        ),
    )
    response = HttpResponse(record_line(record), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="replay-{replay.pk}.jsonl"'
    return response
