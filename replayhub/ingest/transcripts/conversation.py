"""A stored transcript as a conversation a person can read.

Each format keeps its transcript in the record in its own shape
(``transcript.format``); this turns any of them into the same plain turns:
who spoke, what was said, the tool calls made in the turn with the result
each got, and markers for compactions and summaries. Nothing here renders or
escapes: every string is the agent's, untrusted, and goes to a template that
escapes it. No Django, no database.
"""

from __future__ import annotations

import json
import re
from typing import Any

from replayhub.ingest.transcripts import atif, gemini_cli, opencode
from replayhub.ingest.transcripts.shapes import block_text
from replayhub.ingest.transcripts.turns import (
    ASSISTANT,
    COMPACTION,
    REASONING,
    SUMMARY,
    SYSTEM,
    TOOL,
    USER,
    Call,
    Turn,
)
from replayhub.lib import boundedjson, jsonvalues


def conversation(transcript: Any) -> list[Turn]:
    """The turns of a record's ``transcript``; [] for a shape not known."""
    if not isinstance(transcript, dict):
        return []
    kind = transcript.get("format")
    read = _READERS.get(kind) if isinstance(kind, str) else None
    if read is None:
        return []
    return [t for t in read(transcript) if t.text.strip() or t.calls or t.note]


def _pretty(value: Any) -> str:
    """Call input laid out: JSON text is parsed and indented, text kept."""
    if isinstance(value, str):
        try:
            value = boundedjson.loads(value)
        except boundedjson.Refused:
            return value
        if isinstance(value, str):
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _result_text(content: Any) -> str:
    """A tool result's content: text, text blocks, or JSON laid out."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        text = block_text(content)
        if text or not content:
            return text
    if content is None:
        return ""
    return json.dumps(content, indent=2, ensure_ascii=False, default=str)


class _Calls:
    """Calls by id, so a later result finds the call it answers."""

    def __init__(self) -> None:
        self.open: dict[str, Call] = {}

    def add(self, call: Call) -> Call:
        if call.id:
            self.open[call.id] = call
        return call

    def answer(self, call_id: Any, text: str, *, error: bool = False) -> Turn | None:
        """Fold ``text`` into its call; a turn of its own when it has none."""
        call = self.open.pop(call_id, None) if isinstance(call_id, str) else None
        if call is None:
            note = f"result of {call_id}" if isinstance(call_id, str) else ""
            return Turn(TOOL, text, note=note)
        call.result, call.error = text, error
        return None


# Claude Code -------------------------------------------------------------


def _claude_code(transcript: dict[str, Any]) -> list[Turn]:
    turns: list[Turn] = []
    calls = _Calls()
    # An answer written over several lines shares one message id: one turn.
    current: tuple[str, Turn] | None = None
    lines = transcript.get("lines")
    for value in lines if isinstance(lines, list) else []:
        if not isinstance(value, dict):
            continue
        kind = value.get("type")
        message = value.get("message")
        side = "subagent" if value.get("isSidechain") else ""
        if kind == "summary":
            if isinstance(value.get("summary"), str):
                turns.append(Turn(SUMMARY, value["summary"], note="session title"))
            continue
        if kind == "system":
            if value.get("subtype") == "compact_boundary":
                turns.append(Turn(COMPACTION, note=_compaction_note(value)))
            continue
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if kind == "user":
            current = None
            if value.get("isCompactSummary"):
                turns.append(
                    Turn(SUMMARY, block_text(content), note="compaction summary")
                )
                continue
            blocks = content if isinstance(content, list) else [content]
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    text = _result_text(block.get("content"))
                    orphan = calls.answer(
                        block.get("tool_use_id"),
                        text,
                        error=block.get("is_error") is True,
                    )
                    if orphan is not None:
                        turns.append(orphan)
            text = block_text(content)
            if text.strip():
                note = "meta" if value.get("isMeta") else side
                turns.append(Turn(USER, text, note=note))
            continue
        if kind != "assistant":
            continue
        key = message.get("id")
        if current is not None and isinstance(key, str) and current[0] == key:
            turn = current[1]
        else:
            turn = Turn(ASSISTANT, note=side)
            turns.append(turn)
            current = (key, turn) if isinstance(key, str) else None
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, str):
                turn.text = _join(turn.text, block)
            elif not isinstance(block, dict):
                continue
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                turn.text = _join(turn.text, block["text"])
            elif block.get("type") == "thinking" and block.get("thinking"):
                # Shown before the answer it led to.
                where = next(i for i, t in enumerate(turns) if t is turn)
                turns.insert(where, Turn(REASONING, str(block["thinking"])))
            elif block.get("type") == "tool_use":
                turn.calls.append(
                    calls.add(
                        Call(
                            name=str(block.get("name") or "?"),
                            input=_pretty(block.get("input")),
                            id=str(block.get("id") or ""),
                        )
                    )
                )
    return turns


def _compaction_note(value: dict[str, Any]) -> str:
    meta = value.get("compactMetadata")
    if not isinstance(meta, dict):
        return "context compacted"
    parts = []
    if isinstance(meta.get("trigger"), str):
        parts.append(meta["trigger"])
    tokens = meta.get("preTokens")
    if type(tokens) is int:
        parts.append(f"{tokens:,} tokens before")
    return "context compacted" + (f" ({', '.join(parts)})" if parts else "")


def _join(text: str, more: str) -> str:
    return f"{text}\n\n{more}" if text else more


# Codex -------------------------------------------------------------------


def _codex(transcript: dict[str, Any]) -> list[Turn]:
    turns: list[Turn] = []
    calls = _Calls()
    lines = transcript.get("lines")
    for value in lines if isinstance(lines, list) else []:
        if not isinstance(value, dict):
            continue
        kind, item = value.get("type"), value.get("payload")
        if not isinstance(item, dict):
            # Older rollouts wrote response items bare.
            kind, item = "response_item", value
        if kind == "compacted":
            message = str(item.get("message") or "")
            turns.append(Turn(COMPACTION, message, note="context compacted"))
            continue
        if kind != "response_item":
            continue
        what = item.get("type")
        if what == "message" and item.get("role") in (USER, ASSISTANT):
            turns.append(Turn(item["role"], block_text(item.get("content"))))
        elif what == "reasoning":
            summary = item.get("summary")
            text = block_text(
                [
                    {"type": "text", "text": s.get("text")}
                    for s in (summary if isinstance(summary, list) else [])
                    if isinstance(s, dict)
                ]
            )
            turns.append(Turn(REASONING, text))
        elif what in ("function_call", "custom_tool_call", "local_shell_call"):
            call = calls.add(
                Call(
                    name=str(item.get("name") or what),
                    input=_pretty(
                        item.get("arguments", item.get("input", item.get("action")))
                    ),
                    id=str(item.get("call_id") or ""),
                )
            )
            if turns and turns[-1].role == ASSISTANT:
                turns[-1].calls.append(call)
            else:
                turns.append(Turn(ASSISTANT, calls=[call]))
        elif what in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            text = _codex_output(output)
            orphan = calls.answer(item.get("call_id"), text)
            if orphan is not None:
                turns.append(orphan)
    return turns


def _codex_output(output: Any) -> str:
    """Codex wraps a shell result as JSON text with ``output``: its text."""
    if isinstance(output, dict):
        output = output.get("content", output)
    if isinstance(output, str):
        try:
            parsed = boundedjson.loads(output)
        except boundedjson.Refused:
            return output
        if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
            return parsed["output"]
        return output
    return _result_text(output)


# Aider -------------------------------------------------------------------

_STARTED = re.compile(r"^# aider chat started at (.*)$")


def _aider(transcript: dict[str, Any]) -> list[Turn]:
    text = transcript.get("text")
    turns: list[Turn] = []
    for line in (text if isinstance(text, str) else "").split("\n"):
        started = _STARTED.match(line)
        if started:
            turns.append(Turn(SYSTEM, note=f"session started {started.group(1)}"))
            continue
        if line.startswith("####"):
            role, line = USER, line[4:].removeprefix(" ")
        elif line.startswith(">"):
            role, line = SYSTEM, line[1:].removeprefix(" ")
        else:
            role = ASSISTANT
        if turns and turns[-1].role == role and not turns[-1].note:
            turns[-1].text += "\n" + line
        elif role == ASSISTANT and not line.strip():
            continue
        else:
            turns.append(Turn(role, line))
    for turn in turns:
        turn.text = turn.text.strip("\n")
    return turns


# SWE-agent ---------------------------------------------------------------


def _swe_agent(transcript: dict[str, Any]) -> list[Turn]:
    document = transcript.get("document")
    steps = document.get("trajectory") if isinstance(document, dict) else None
    turns: list[Turn] = []
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            continue
        thought = step.get("thought")
        if not isinstance(thought, str) or not thought.strip():
            thought = step.get("response")
        turn = Turn(ASSISTANT, thought.strip() if isinstance(thought, str) else "")
        action = step.get("action")
        if isinstance(action, str) and action.strip():
            name = action.strip().split(None, 1)[0]
            observation = step.get("observation")
            turn.calls.append(
                Call(
                    name=name,
                    input=action.strip(),
                    result=observation if isinstance(observation, str) else None,
                )
            )
        turns.append(turn)
    info = document.get("info") if isinstance(document, dict) else None
    submission = info.get("submission") if isinstance(info, dict) else None
    if isinstance(submission, str) and submission.strip():
        turns.append(Turn(SUMMARY, submission, note="submitted patch"))
    return turns


# mini-swe-agent -------------------------------------------------------------


_MINI_ROLES = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT}
# The text-based models' action: one fenced block (``bash`` before 2.0).
_MINI_ACTION = re.compile(
    r"```(?:mswea_bash_command|bash)[ \t]*\n(.*?)\n?```", re.DOTALL
)
_MINI_RETURNCODE = re.compile(r"\s*<returncode>\s*(-?\d+)\s*</returncode>")


def _mini_swe_agent(transcript: dict[str, Any]) -> list[Turn]:
    """Its ``messages``: chat messages whose tool calls the ``tool`` messages
    answer by id, and an ``exit`` message holding what it submitted. A
    text-based model's action is the command block in its answer (the
    parsed ``extra.actions`` when kept), answered by the next user message
    that starts with a ``<returncode>``."""
    document = transcript.get("document")
    messages = document.get("messages") if isinstance(document, dict) else None
    turns: list[Turn] = []
    calls = _Calls()
    waiting: Call | None = None
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        role, text = (
            jsonvalues.text(message.get("role")),
            block_text(message.get("content")),
        )
        returned = _MINI_RETURNCODE.match(text) if role == "user" else None
        if waiting is not None and returned is not None:
            waiting.result, waiting.error = text, returned.group(1) != "0"
            waiting = None
            continue
        waiting = None
        if role == "assistant" and not message.get("tool_calls"):
            said = Turn(ASSISTANT, text)
            for command in _mini_actions(message, text):
                said.calls.append(Call(name="bash", input=command))
            waiting = said.calls[-1] if said.calls else None
            turns.append(said)
        elif role == "tool":
            turn = calls.answer(message.get("tool_call_id"), text)
            if turn is not None:
                turns.append(turn)
        elif role == "exit":
            turns.append(Turn(SUMMARY, text, note="what it submitted"))
        elif role in _MINI_ROLES:
            turn = Turn(_MINI_ROLES[role], text)
            given = message.get("tool_calls")
            for call in given if isinstance(given, list) else []:
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict):
                    continue
                made = Call(
                    name=str(function.get("name") or "?"),
                    input=_pretty(function.get("arguments")),
                    id=str(call.get("id") or ""),
                )
                turn.calls.append(calls.add(made))
            turns.append(turn)
    return turns


def _mini_actions(message: dict[str, Any], text: str) -> list[str]:
    """A text-based answer's commands: the actions mini-swe-agent parsed
    (``extra.actions``), else the one command block it would have run."""
    extra = message.get("extra")
    actions = extra.get("actions") if isinstance(extra, dict) else None
    if isinstance(actions, list):
        return [
            a["command"]
            for a in actions
            if isinstance(a, dict) and isinstance(a.get("command"), str)
        ]
    found = _MINI_ACTION.findall(text)
    return found if len(found) == 1 else []


# OpenHands ---------------------------------------------------------------


def _openhands(transcript: dict[str, Any]) -> list[Turn]:
    events = transcript.get("events")
    turns: list[Turn] = []
    calls = _Calls()
    for event in events if isinstance(events, list) else []:
        if not isinstance(event, dict):
            continue
        given = event.get("args")
        args: dict[str, Any] = given if isinstance(given, dict) else {}
        action, source = event.get("action"), event.get("source")
        if action == "message":
            text = args.get("content") or event.get("message") or ""
            role = USER if source == USER else ASSISTANT
            turns.append(Turn(role, str(text)))
        elif action == "finish":
            text = args.get("final_thought") or event.get("message") or ""
            turns.append(Turn(ASSISTANT, str(text), note="finished"))
        elif action in ("condensation", "condensation_request"):
            turns.append(Turn(COMPACTION, str(event.get("message") or "")))
        elif action == "think":
            turns.append(Turn(REASONING, str(args.get("thought") or "")))
        elif isinstance(action, str) and action not in ("system", "recall"):
            thought = args.get("thought")
            shown = {k: v for k, v in args.items() if k != "thought"}
            call = calls.add(
                Call(name=action, input=_pretty(shown), id=str(event.get("id", "")))
            )
            turns.append(
                Turn(
                    ASSISTANT,
                    thought if isinstance(thought, str) else "",
                    calls=[call],
                )
            )
        elif isinstance(event.get("observation"), str) and event["observation"] not in (
            "agent_state_changed",
            "null",
            "recall",
        ):
            extras = event.get("extras")
            failed = isinstance(extras, dict) and extras.get("exit_code") not in (
                None,
                0,
            )
            orphan = calls.answer(
                str(event.get("cause", "")),
                str(event.get("content") or ""),
                error=failed or event["observation"] == "error",
            )
            if orphan is not None:
                orphan.note = event["observation"]
                turns.append(orphan)
    return turns


# SWE-bench predictions ---------------------------------------------------


def _swebench(transcript: dict[str, Any]) -> list[Turn]:
    """The prediction's patch, after the steps of the mini-swe-agent
    trajectory its run was enriched from (``trajectory``), if any."""
    steps = []
    trajectory = transcript.get("trajectory")
    if isinstance(trajectory, dict) and trajectory.get("format") == "mini-swe-agent":
        steps = _mini_swe_agent(trajectory)
    prediction = transcript.get("prediction")
    patch = prediction.get("model_patch") if isinstance(prediction, dict) else None
    if not isinstance(patch, str) or not patch.strip():
        return [*steps, Turn(SUMMARY, note="the prediction's patch is empty")]
    return [*steps, Turn(SUMMARY, patch, note="predicted patch")]


_READERS = {
    "claude-code": _claude_code,
    "codex": _codex,
    "aider": _aider,
    "swe-agent": _swe_agent,
    "openhands": _openhands,
    "mini-swe-agent": _mini_swe_agent,
    "gemini-cli": gemini_cli.turns,
    "atif": atif.turns,
    "opencode": opencode.turns,
    "swebench": _swebench,
}
