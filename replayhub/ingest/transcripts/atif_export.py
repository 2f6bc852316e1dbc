"""ATIF written: a run's conversation, or a replay's tape, as one trajectory
in the Agent Trajectory Interchange Format that :mod:`atif` reads, so that
what ReplayHub holds goes back to Harbor and the other tools of that format.

It sits beside the reader because it writes the very shape the reader takes:
the tests read every document written here back through :func:`atif.parse`
and :func:`atif.turns`, and the two move together when the format does.

Two sources make steps:

- :func:`steps_from_turns`: an imported transcript as
  :func:`conversation.conversation` reads it (any format the run page shows);
  system, user and agent steps, reasoning on the agent step it led to, each
  tool call with its result in the step's observation. A transcript's turns
  carry no token counts: the run's totals go to ``final_metrics``.
- :func:`steps_from_exchanges`: a tape (a replay's own, or the one a run was
  recorded with), one agent step per model call with its usage, the messages
  each call added before it (the system prompt once, user messages, tool
  results folded into the step that made the call) read from the Anthropic,
  OpenAI chat, Responses and Gemini shapes.

:func:`document` puts the steps in one ``ATIF-v1.7`` document naming where it
came from (``extra.replayhub``, ``notes``), bounded: a text past
``text_chars`` is cut and marked, and the steps stop where the document would
pass ``limit`` bytes, the notes saying so. Everything in a document is
untrusted text the agent or a model wrote; it is only ever written as JSON.
No verdict, reason or review is ever put in one. Pure: no Django, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from replayhub.gateway.tape import Exchange, from_record_tape
from replayhub.gateway.tape_messages import Said, answer, history, system
from replayhub.ingest.transcripts import atif
from replayhub.ingest.transcripts.conversation import conversation
from replayhub.ingest.transcripts.shapes import count
from replayhub.ingest.transcripts.turns import (
    ASSISTANT,
    REASONING,
    SYSTEM,
    TOOL,
    USER,
    Turn,
)
from replayhub.lib import boundedjson

VERSION = f"ATIF-v1.{atif.KNOWN_MINOR}"
# A message, reasoning, tool result or call's arguments longer than this is cut.
TEXT_CHARS = 512 * 1024
# What a document holds besides its steps, reserved under the byte limit.
HEAD_BYTES = 16 * 1024
CUT_MARK = " … [cut by ReplayHub: {n:,} characters in all]"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Origin:
    """What the document comes from: the run (and the replay, for a
    replay's tape), what the steps were read from, and the agent."""

    run_id: int
    project: str
    external_id: str
    source: str
    replay_id: int | None = None
    agent_name: str = ""
    agent_version: str = ""
    model: str = ""


@dataclass(frozen=True)
class FinalMetrics:
    """The trajectory's totals; None: not known (a reader sums the steps'),
    or for ``cost_usd`` not the viewer's to see."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    extra: dict[str, int] | None = None


# -- a run's record --------------------------------------------------------


def run_steps(record: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The steps of a run: its imported transcript's conversation, else the
    tape it was recorded with; and what they were read from ("" for none)."""
    transcript = record.get("transcript")
    turns = conversation(transcript)
    if turns and isinstance(transcript, dict):
        return steps_from_turns(turns), f"its {transcript.get('format')} transcript"
    exchanges = from_record_tape(record.get("tape"))
    if exchanges:
        return steps_from_exchanges(exchanges), "its recorded tape"
    return [], ""


def agent_of(record: dict[str, Any]) -> tuple[str, str]:
    """The agent's name and version as the record names them: an ATIF
    transcript's own ``agent``, else what the import or the recorder found
    around it (``surroundings.agent``), else the transcript's format."""
    transcript = record.get("transcript")
    transcript = transcript if isinstance(transcript, dict) else {}
    for agent in (
        (transcript.get("document") or {}).get("agent")
        if isinstance(transcript.get("document"), dict)
        else None,
        (record.get("surroundings") or {}).get("agent")
        if isinstance(record.get("surroundings"), dict)
        else None,
    ):
        if isinstance(agent, dict) and isinstance(agent.get("name"), str):
            version = agent.get("version")
            return agent["name"][:200], version[:64] if isinstance(version, str) else ""
    kind = transcript.get("format")
    return (kind, "") if isinstance(kind, str) else ("", "")


def run_totals(usage: Any, *, with_money: bool) -> FinalMetrics:
    """A run's ``usage`` as the document's totals, as the run counts them
    (Anthropic's input tokens leave the cache's out: those go to ``extra``)."""
    usage = usage if isinstance(usage, dict) else {}
    cache = {
        key: count(usage.get(key))
        for key in ("cache_read_input_tokens", "cache_creation_input_tokens")
        if count(usage.get(key))
    }
    cost = usage.get("cost_usd")
    known = isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0
    return FinalMetrics(
        prompt_tokens=_known(usage.get("input_tokens")),
        completion_tokens=_known(usage.get("output_tokens")),
        cost_usd=float(cost) if with_money and known else None,
        extra=cache or None,
    )


def _known(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def tape_totals(exchanges: Sequence[Exchange], cost_usd: float | None) -> FinalMetrics:
    return FinalMetrics(
        prompt_tokens=sum(count(e.usage.get("input_tokens")) for e in exchanges),
        completion_tokens=sum(count(e.usage.get("output_tokens")) for e in exchanges),
        cost_usd=cost_usd,
    )


# -- turns -----------------------------------------------------------------


def steps_from_turns(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """A conversation's turns as steps (numbered by :func:`document`)."""
    steps: list[dict[str, Any]] = []
    reasoning: list[str] = []
    ids = _Ids()
    for turn in turns:
        if turn.role == REASONING:
            reasoning.append(turn.text)
            continue
        if reasoning and turn.role != ASSISTANT:
            steps.append(_step("agent", "", reasoning="\n\n".join(reasoning)))
            reasoning = []
        if turn.role == ASSISTANT:
            step = _step("agent", turn.text, reasoning="\n\n".join(reasoning))
            reasoning = []
            _turn_calls(step, turn, ids)
        elif turn.role == USER:
            step = _step("user", turn.text)
        elif turn.role == TOOL:
            step = _step("system", "")
            called = turn.note.removeprefix("result of ")
            result: dict[str, Any] = {"content": turn.text}
            if turn.note.startswith("result of ") and called:
                result = {"source_call_id": called, **result}
            step["observation"] = {"results": [result]}
        else:
            step = _step("system", turn.text if turn.text.strip() else turn.note)
            if turn.role != SYSTEM:
                step["extra"]["replayhub_role"] = turn.role
        if turn.note:
            step["extra"]["note"] = turn.note
        steps.append(step)
    if reasoning:
        steps.append(_step("agent", "", reasoning="\n\n".join(reasoning)))
    return steps


def _turn_calls(step: dict[str, Any], turn: Turn, ids: _Ids) -> None:
    results, failed = [], []
    for call in turn.calls:
        call_id = call.id or ids.new()
        step["tool_calls"].append(
            {
                "tool_call_id": call_id,
                "function_name": call.name,
                "arguments": arguments(call.input),
            }
        )
        if call.result is not None:
            results.append({"source_call_id": call_id, "content": call.result})
        if call.error:
            failed.append(call_id)
    if results:
        step["observation"] = {"results": results}
    if failed:
        step["extra"]["failed_calls"] = failed


def arguments(given: Any) -> dict[str, Any]:
    """A call's arguments as the object ATIF asks for: JSON text that is an
    object, as that object; anything else under ``input``."""
    if isinstance(given, str):
        try:
            parsed = boundedjson.loads(given)
        except boundedjson.Refused:
            return {"input": given}
        given = parsed
    if isinstance(given, dict):
        return given
    return {} if given is None or given == "" else {"input": given}


class _Ids:
    """Ids for calls that came without one, so a result can name its call."""

    def __init__(self) -> None:
        self.made = 0

    def new(self) -> str:
        self.made += 1
        return f"replayhub-call-{self.made}"


def _step(source: str, message: str, *, reasoning: str = "") -> dict[str, Any]:
    step: dict[str, Any] = {"source": source, "message": message, "extra": {}}
    if source == "agent":
        step["tool_calls"] = []
        if reasoning.strip():
            step["reasoning_content"] = reasoning
    return step


# -- tapes -----------------------------------------------------------------


def steps_from_exchanges(exchanges: Sequence[Exchange]) -> list[dict[str, Any]]:
    """A tape as steps: per call, what its request added to the conversation
    since the call before (a request resends its history), then its answer."""
    steps: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    ids = _Ids()
    seen = 0
    for number, exchange in enumerate(exchanges, 1):
        request = exchange.request
        if number == 1 and (prompt := system(request)):
            steps.append(_step("system", prompt))
        said = history(request)
        # A delta (an imported session's tape) is shorter than what came
        # before it: all of it is new.
        new = said[seen:] if len(said) >= seen else said
        seen = len(said)
        for message in new:
            _take(steps, calls, message, first=number == 1, ids=ids)
        step = _answer(exchange, number, ids)
        for call in step["tool_calls"]:
            calls[call["tool_call_id"]] = step
        steps.append(step)
    return steps


def _take(
    steps: list[dict[str, Any]],
    calls: dict[str, dict[str, Any]],
    said: Said,
    *,
    first: bool,
    ids: _Ids,
) -> None:
    """One history message into the steps: tool results folded into the
    step that made the call, a person's text a user step; the model's own
    earlier answers are steps already, but for those the first call resends
    (a conversation begun before the tape): agent steps no call made here."""
    orphans = []
    for call_id, name, content in said.results:
        found = _called(calls, call_id, name)
        if found is None:
            orphans.append(({"source_call_id": call_id} if call_id else {}, content))
            continue
        step, made = found
        results = step.setdefault("observation", {"results": []})["results"]
        results.append({"source_call_id": made, "content": content})
    if orphans:
        step = _step("system", "")
        step["observation"] = {
            "results": [{**named, "content": text} for named, text in orphans]
        }
        steps.append(step)
    if said.role in ("system", "developer") and said.text.strip():
        steps.append(_step("system", said.text))
    elif said.role == "user" and said.text.strip():
        steps.append(_step("user", said.text))
    elif said.role == "assistant" and first:
        step = _step("agent", said.text, reasoning=said.reasoning)
        step["tool_calls"] = _calls(said, ids)
        step["llm_call_count"] = 0
        step["extra"]["from_history"] = True
        for call in step["tool_calls"]:
            calls[call["tool_call_id"]] = step
        steps.append(step)


def _called(
    calls: dict[str, dict[str, Any]], call_id: str, name: str
) -> tuple[dict[str, Any], str] | None:
    """The step that made the call a result answers, and the call's id: by
    id, or for a result naming none (Gemini's older ones) the latest call of
    its name with no result yet."""
    if call_id:
        return (calls[call_id], call_id) if call_id in calls else None
    for made in reversed(list(calls)):
        step = calls[made]
        answered = {
            r.get("source_call_id")
            for r in (step.get("observation") or {}).get("results", [])
        }
        named = {c["tool_call_id"]: c["function_name"] for c in step["tool_calls"]}
        if name and named.get(made) == name and made not in answered:
            return step, made
    return None


def _calls(said: Said, ids: _Ids) -> list[dict[str, Any]]:
    return [
        {
            "tool_call_id": call_id or ids.new(),
            "function_name": name or "?",
            "arguments": arguments(given),
        }
        for call_id, name, given in said.calls
    ]


def _answer(exchange: Exchange, number: int, ids: _Ids) -> dict[str, Any]:
    """The call's answer as an agent step, with its usage and model."""
    said = answer(exchange.response)
    step = _step("agent", said.text, reasoning=said.reasoning)
    model = exchange.model or exchange.request.get("model")
    if isinstance(model, str) and model:
        step["model_name"] = model[:200]
    step["tool_calls"] = _calls(said, ids)
    metrics = {
        key: value
        for key, name in (
            ("prompt_tokens", "input_tokens"),
            ("completion_tokens", "output_tokens"),
        )
        if isinstance(value := exchange.usage.get(name), int)
    }
    if metrics:
        step["metrics"] = metrics
    step["llm_call_count"] = 1
    extra = step["extra"]
    extra["call"] = number
    if exchange.served:
        extra["served_from_tape"] = True
    if exchange.response is None:
        extra["answer_left_out"] = True
    if not 200 <= exchange.status < 300:
        extra["status"] = exchange.status
    if exchange.truncated:
        extra["truncated_on_tape"] = True
    return step


# -- the document ----------------------------------------------------------


def document(
    steps: list[dict[str, Any]],
    origin: Origin,
    totals: FinalMetrics,
    *,
    limit: int,
    text_chars: int = TEXT_CHARS,
) -> dict[str, Any]:
    """One ATIF trajectory of ``steps``, within ``limit`` bytes as
    :func:`encode` writes it (the first step is always kept)."""
    kept: list[dict[str, Any]] = []
    cut = 0
    size = HEAD_BYTES
    for step in steps:
        cut += _bound(step, text_chars)
        size += len(encode(step)) + 2
        if kept and size > limit:
            break
        kept.append(step)
    numbered = [_numbered(n, step) for n, step in enumerate(kept, 1)]
    model = origin.model or next(
        (s["model_name"] for s in kept if isinstance(s.get("model_name"), str)), ""
    )
    agent: dict[str, Any] = {
        "name": origin.agent_name or UNKNOWN,
        "version": origin.agent_version or UNKNOWN,
    }
    if model:
        agent["model_name"] = model
    where: dict[str, Any] = {
        "run": origin.run_id,
        "project": origin.project,
        "external_id": origin.external_id,
    }
    if origin.replay_id is not None:
        where["replay"] = origin.replay_id
    where["source"] = origin.source
    where["steps"] = len(steps)
    where["steps_kept"] = len(kept)
    where["texts_cut"] = cut
    final: dict[str, Any] = {}
    if totals.prompt_tokens is not None:
        final["total_prompt_tokens"] = totals.prompt_tokens
    if totals.completion_tokens is not None:
        final["total_completion_tokens"] = totals.completion_tokens
    if totals.cached_tokens is not None:
        final["total_cached_tokens"] = totals.cached_tokens
    if totals.cost_usd is not None:
        final["total_cost_usd"] = totals.cost_usd
    final["total_steps"] = len(steps)
    if totals.extra:
        final["extra"] = dict(totals.extra)
    trajectory = f"replayhub-run-{origin.run_id}" + (
        f"-replay-{origin.replay_id}" if origin.replay_id is not None else ""
    )
    return {
        "schema_version": VERSION,
        "session_id": origin.external_id
        if origin.replay_id is None
        else f"{origin.external_id}-replay-{origin.replay_id}",
        "trajectory_id": trajectory,
        "agent": agent,
        "steps": numbered,
        "final_metrics": final,
        "notes": _notes(origin, len(steps), len(kept), cut, limit, text_chars),
        "extra": {"replayhub": where},
    }


def _notes(
    origin: Origin,
    total: int,
    kept: int,
    cut: int,
    limit: int,
    text_chars: int,
) -> str:
    of = "" if origin.replay_id is None else f"replay {origin.replay_id} of "
    notes = [
        f"Exported by ReplayHub from {of}run {origin.run_id} (project "
        f"{origin.project}, external id {origin.external_id}), read from "
        f"{origin.source}."
    ]
    if kept < total:
        notes.append(
            f"Cut: the steps stop after {kept} of {total}, "
            f"the document being held to {limit:,} bytes."
        )
    if cut:
        notes.append(
            f"Cut: {cut} text{'s' if cut != 1 else ''} longer than "
            f"{text_chars:,} characters, each marked where it stops."
        )
    return " ".join(notes)


def _numbered(number: int, step: dict[str, Any]) -> dict[str, Any]:
    """The step with its id first and no empty calls or extra."""
    out: dict[str, Any] = {"step_id": number}
    for key, value in step.items():
        if key not in ("tool_calls", "extra") or value:
            out[key] = value
    # Its own notes last, after the format's fields.
    if "extra" in out:
        out["extra"] = out.pop("extra")
    return out


def _cut(text: str, text_chars: int) -> str:
    return text[:text_chars] + CUT_MARK.format(n=len(text))


def _bound(step: dict[str, Any], text_chars: int) -> int:
    """Texts of ``step`` past ``text_chars`` cut in place, named in its
    ``extra.cut``; how many were."""
    cut: list[str] = []
    for key in ("message", "reasoning_content"):
        text = step.get(key)
        if isinstance(text, str) and len(text) > text_chars:
            step[key] = _cut(text, text_chars)
            cut.append(key)
    for result in (step.get("observation") or {}).get("results", []):
        text = result.get("content")
        if isinstance(text, str) and len(text) > text_chars:
            result["content"] = _cut(text, text_chars)
            cut.append("observation")
    for call in step.get("tool_calls") or []:
        text = json.dumps(call["arguments"], ensure_ascii=False, default=str)
        if len(text) > text_chars:
            call["arguments"] = {"cut_arguments": _cut(text, text_chars)}
            cut.append("arguments")
    if cut:
        step["extra"]["cut"] = sorted(set(cut))
    return len(cut)


def encode(value: Any) -> bytes:
    """``value`` as UTF-8 JSON; a lone surrogate (text that was never valid
    Unicode) written as U+FFFD's stand-in "?"."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text.encode("utf-8", "replace")
