"""ATIF trajectories: the Agent Trajectory Interchange Format that Harbor
writes as ``agent/trajectory.json`` for the agents it runs (its own
Terminus, and others' files converted, Claude Code's and mini-swe-agent's
among them), and that other harnesses export too.

One JSON object per trajectory, versions ``ATIF-v1.0`` to ``ATIF-v1.7``:
``schema_version``, ``session_id`` (optional since 1.7, where
``trajectory_id`` names the document), ``agent`` (``name``, ``version``,
``model_name``, ``tool_definitions``, ``extra``), ``steps``, ``notes``,
``final_metrics`` (``total_prompt_tokens`` — cached ones included —,
``total_completion_tokens``, ``total_cached_tokens``, ``total_cost_usd``,
``total_steps``), ``continued_trajectory_ref`` and ``extra``.

A step has ``step_id``, ``timestamp`` (ISO 8601, a zone not required),
``source`` (``system``, ``user`` or ``agent``), ``message`` (text, or from
1.6 a list of ``text``/``image`` parts) and, on agent steps only,
``model_name``, ``reasoning_content``, ``tool_calls`` (``tool_call_id``,
``function_name``, ``arguments``) and ``metrics`` (``prompt_tokens``,
``completion_tokens``, ``cached_tokens``, ``cost_usd``). ``observation``
holds ``results`` (``source_call_id``: a call of the same step, and
``content``); from 1.2 a system step may carry one too. 1.3 and 1.4 added
token ids, 1.5 ``is_copied_context`` (steps repeated from an earlier
trajectory), 1.7 ``llm_call_count`` (0: a step no model call made) and
embedded ``subagent_trajectories``. A later 1.x is read as 1.7 with a note;
another major version is refused.

The format names no commit. Harbor's Claude Code conversion names the
branches the session was on (``agent.extra.git_branches``): one branch, with
the steps' times, is searched for a base and an original; otherwise the run
has no original commit.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from replayhub.ingest.lines import RecordLine
from replayhub.ingest.transcripts.documents import dig, document_or_refusal
from replayhub.ingest.transcripts.shapes import (
    LineError,
    Parsed,
    RecordDraft,
    Search,
    block_text,
    cost_usd,
    count,
    first_line,
    iso,
    moment,
    shown,
)
from replayhub.ingest.transcripts.turns import (
    ASSISTANT,
    REASONING,
    SYSTEM,
    TOOL,
    USER,
    Call,
    Turn,
)
from replayhub.lib import jsonvalues

FORMAT = "atif"
# The last minor version whose fields this reader was written against.
KNOWN_MINOR = 7
_VERSION = re.compile(r"ATIF-v(\d{1,4})\.(\d{1,4})")


def parse(
    lines: Iterable[RecordLine],
    *,
    name: str = "",
    limit: int,
    file_time: datetime | None = None,
) -> Iterator[Parsed]:
    found = yield from document_or_refusal(lines, limit, what="the ATIF trajectory")
    if found is None:
        return
    raw, value = found
    problem, minor = _problem(value)
    if problem:
        yield LineError(1, problem)
        return
    steps = [step for step in value["steps"] if isinstance(step, dict)]
    prompt = next((_text(s) for s in steps if _said(s, "user")), "")
    if not prompt:
        yield LineError(1, "the trajectory has no user message: no task")
        return
    agent = value["agent"]
    record: dict[str, Any] = {
        "external_id": _external_id(value, raw),
        "title": first_line(prompt),
        "prompt": prompt,
        "usage": _usage(value.get("final_metrics"), steps),
        "transcript": {"format": FORMAT, "document": value},
    }
    model = next(
        (
            m
            for m in [agent.get("model_name")] + [s.get("model_name") for s in steps]
            if isinstance(m, str) and m
        ),
        "",
    )
    if model:
        record["model"] = model
    output = next((_text(s) for s in reversed(steps) if _said(s, "agent")), "")
    if output:
        record["output"] = output
    draft = RecordDraft(1, record)
    if minor > KNOWN_MINOR:
        draft.notes.append(
            f"{value['schema_version']} is newer than this reader: read as "
            f"ATIF-v1.{KNOWN_MINOR}, fields added since are kept but not read"
        )
    ref = value.get("continued_trajectory_ref")
    if isinstance(ref, str) and ref:
        draft.notes.append(
            f"the run goes on in another trajectory ({shown(ref)}): "
            "this one holds only its beginning"
        )
    _search(draft, agent, steps, file_time)
    yield draft


def _problem(value: Any) -> tuple[str, int]:
    """Why ``value`` is not an ATIF trajectory this reader takes, or "", and
    the minor version it names."""
    if not isinstance(value, dict):
        return "not an ATIF trajectory: not a JSON object", 0
    version = value.get("schema_version")
    found = _VERSION.fullmatch(version) if isinstance(version, str) else None
    if found is None:
        return (
            'not an ATIF trajectory: no schema_version "ATIF-v1.x" '
            f"(schema_version is {shown(version)})"
        ), 0
    if found.group(1) != "1":
        return (
            f"{version} is not a version this reader knows "
            f"(ATIF-v1.0 to ATIF-v1.{KNOWN_MINOR})"
        ), 0
    if not isinstance(value.get("agent"), dict):
        return "not an ATIF trajectory: no agent object", 0
    if not isinstance(value.get("steps"), list) or not value["steps"]:
        return "the ATIF trajectory has no steps", 0
    return "", int(found.group(2))


def _said(step: dict[str, Any], source: str) -> bool:
    return step.get("source") == source and bool(_text(step).strip())


def _text(step: dict[str, Any]) -> str:
    """A step's message: its text, or the text parts of a multimodal one."""
    return block_text(step.get("message"))


def _external_id(value: dict[str, Any], raw: bytes) -> str:
    """The run's session, else the document's id (1.7), else its bytes'
    SHA-256."""
    for key in ("session_id", "trajectory_id"):
        given = value.get(key)
        if isinstance(given, str) and given.strip():
            return given
    return f"{FORMAT}-{hashlib.sha256(raw).hexdigest()[:32]}"


def _usage(final: Any, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Tokens and cost as ``final_metrics`` totals them, each one it leaves
    out summed over the steps' metrics; a turn per agent step that called the
    model in this trajectory."""
    final = final if isinstance(final, dict) else {}
    own = [
        s
        for s in steps
        if s.get("source") == "agent"
        and s.get("is_copied_context") is not True
        and s.get("llm_call_count") != 0
    ]
    metrics = [m for s in own if isinstance(m := s.get("metrics"), dict)]

    def total(final_key: str, step_key: str) -> int | None:
        """The total, None when neither the final metrics nor a step gives
        one (a trajectory without token counts says nothing of them)."""
        given = final.get(final_key)
        if type(given) is int and given >= 0:
            return given
        if not any(step_key in m for m in metrics):
            return None
        return sum(count(m.get(step_key)) for m in metrics)

    usage: dict[str, Any] = {"turns": len(own)}
    for key, final_key, step_key in (
        ("input_tokens", "total_prompt_tokens", "prompt_tokens"),
        ("output_tokens", "total_completion_tokens", "completion_tokens"),
    ):
        if (found := total(final_key, step_key)) is not None:
            usage[key] = found
    cost = cost_usd(final.get("total_cost_usd"))
    if cost is None:
        costs = [c for m in metrics if (c := cost_usd(m.get("cost_usd"))) is not None]
        cost = sum(costs) if costs else None
    if cost is not None:
        usage["cost_usd"] = cost
    return usage


def _search(
    draft: RecordDraft,
    agent: dict[str, Any],
    steps: list[Any],
    file_time: datetime | None,
) -> None:
    """``started_at`` from the steps' times (else the file's, else the base
    commit's), and the search for the base and the original when the
    trajectory names the one branch it ran on."""
    times = [t for s in steps if (t := moment(s.get("timestamp")))]
    if times:
        draft.record["started_at"] = iso(min(times))
    else:
        timed = any(isinstance(s.get("timestamp"), str) for s in steps)
        why = (
            "the steps' times carry no zone"
            if timed
            else "the trajectory records no times"
        )
        if file_time is not None:
            draft.infer("started_at", iso(file_time), f"{why}; this is the file's")
        else:
            draft.notes.append(f"{why}: the run has no start time of its own")
            draft.search.time_from_base = True
    given = dig(agent, "extra", "git_branches")
    branches = sorted(
        {b for b in given if isinstance(b, str) and b.strip()}
        if isinstance(given, list)
        else set()
    )
    if len(branches) > 1:
        draft.notes.append(
            f"the trajectory names {len(branches)} branches "
            f"({shown(', '.join(branches))}): the run has no original commit"
        )
    elif not branches:
        draft.notes.append(
            "the trajectory names no branch or commit: the run has no original commit"
        )
    elif not times:
        draft.record["original_branch"] = branches[0]
        draft.notes.append(
            "the trajectory names its branch but no zoned time to search it by: "
            "the run has no original commit"
        )
    else:
        draft.record["original_branch"] = branches[0]
        draft.search = Search(
            branch=branches[0],
            start=min(times),
            end=max(times),
            find_base=True,
            find_original=True,
        )


# The stored trajectory as conversation turns -------------------------------


def turns(transcript: dict[str, Any]) -> list[Turn]:
    """The steps in order: system and user messages, the agent's reasoning
    and answers with each tool call folded with the observation result that
    names it (or, in a step of one call, the one result naming none), and
    other results as turns of their own: Terminus answers a step's several
    keystroke calls with one terminal output."""
    document = transcript.get("document")
    steps = document.get("steps") if isinstance(document, dict) else None
    roles = {
        "system": SYSTEM,
        "user": USER,
        "agent": ASSISTANT,
    }
    found: list[Turn] = []
    for step in steps if isinstance(steps, list) else []:
        if (
            not isinstance(step, dict)
            or jsonvalues.text(step.get("source")) not in roles
        ):
            continue
        copied = step.get("is_copied_context") is True
        reasoning = step.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning.strip():
            found.append(Turn(REASONING, reasoning))
        calls = _calls(step.get("tool_calls"), Call)
        turn = Turn(
            roles[step["source"]],
            _text(step),
            calls=calls,
            note="copied from an earlier trajectory" if copied else "",
        )
        found.append(turn)
        by_id = {call.id: call for call in calls if call.id}
        results = dig(step, "observation", "results")
        for result in results if isinstance(results, list) else []:
            if not isinstance(result, dict):
                continue
            text = _content(result.get("content"))
            call_id = result.get("source_call_id")
            call = by_id.get(call_id) if isinstance(call_id, str) else None
            if call_id is None and len(calls) == 1 and calls[0].result is None:
                # Harbor's own agents leave the id out when the step made one
                # call: the result can only be that call's.
                call = calls[0]
            if call is not None and call.result is None:
                call.result = text
            elif call is not None and call.result is not None:
                call.result += "\n" + text
            else:
                note = f"result of {call_id}" if isinstance(call_id, str) else ""
                found.append(Turn(TOOL, text, note=note))
    return [t for t in found if t.text.strip() or t.calls or t.note]


def _calls(given: Any, make: type[Call]) -> list[Call]:
    calls = []
    for call in given if isinstance(given, list) else []:
        if not isinstance(call, dict):
            continue
        name = call.get("function_name")
        call_id = call.get("tool_call_id")
        calls.append(
            make(
                name=name if isinstance(name, str) and name else "?",
                input=json.dumps(
                    call.get("arguments"), indent=2, ensure_ascii=False, default=str
                ),
                id=call_id if isinstance(call_id, str) else "",
            )
        )
    return calls


def _content(content: Any) -> str:
    """An observation result's content: text, or the text of its parts."""
    if isinstance(content, str):
        return content
    text = block_text(content)
    if text or not isinstance(content, list) or not content:
        return text
    # Only images: say so rather than show nothing.
    return "(content with no text)"
