"""The seeds of a rollout: the conversations its replays start from. Pure.

Three kinds, after the modes of the verifiers replay taskset:

- **continue / compaction**: one seed per context restart. A restart is
  structural, never matched on a prompt's wording: a branch that forks off the
  history shared with earlier branches on a node that is not sampled, before
  the branch's first sampled node, where everything up to that first sampled
  node (the context the restarted model was launched with) is system and user
  messages. A fork carrying assistant or tool copies is a retokenization split
  of the same conversation; a branch sharing nothing is another conversation
  (a subagent); a fork equal to the task's own launch context is the task's
  start (an auxiliary branch sorted first), not a restart.
- **continue / tool-call**: the conversation through a complete tool-result
  run: every call id of the issuing assistant turn answered (sampled or a
  re-rendered copy, as the verifiers replay taskset has it).
  ``max_anchors`` of them are drawn with ``random.Random(f"{seed}:{trace_id}")``
  and kept in trajectory order; None keeps every one.
- **recheck**: the last branch, cut at the first partially answered tool run,
  trailing user turns removed, plus the verification turn.

When a record carries sandbox snapshots (``info.snapshots``), only anchors
with a snapshot are offered: resuming without the state the context claims
would not be faithful. The leading system message is dropped from a seed only
when the task has a system prompt of its own (the harness sends it again).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

from replayhub.rollouts.graph import branches
from replayhub.rollouts.trace import Node, Trace, content_text

DEFAULT_VERIFICATION_TURN = (
    "Carefully check your work above. Re-verify the reasoning and the final answer "
    "against the task; if you find any mistakes, fix them. Then state your final "
    "answer."
)


@dataclass(frozen=True)
class SeedRules:
    """A project's rollout settings, as the seed rules read them."""

    mode: str = "continue"
    anchor: str = "compaction"
    max_anchors: int | None = 1
    verification_turn: str = DEFAULT_VERIFICATION_TURN
    seed: int = 0
    max_seed_tokens: int | None = None
    min_source_reward: float | None = None
    max_source_reward: float | None = None

    @classmethod
    def of(cls, project: Any) -> SeedRules:
        return cls(
            mode=project.rollout_mode,
            anchor=project.rollout_anchor,
            max_anchors=project.max_anchors,
            verification_turn=project.verification_turn,
            seed=project.rollout_seed,
            max_seed_tokens=project.max_seed_tokens,
            min_source_reward=project.min_source_reward,
            max_source_reward=project.max_source_reward,
        )

    @property
    def min_branches(self) -> int:
        """Branches a rollout needs before it can seed: only a rollout whose
        context restarted has a compaction seed."""
        if self.mode == "continue" and self.anchor == "compaction":
            return 2
        return 1

    def reward_allowed(self, reward: float) -> bool:
        return not (
            (self.min_source_reward is not None and reward < self.min_source_reward)
            or (self.max_source_reward is not None and reward > self.max_source_reward)
        )


# The project's fields ``draw_problems`` checks.
DRAW_FIELDS = (
    "max_anchors",
    "min_source_reward",
    "max_source_reward",
    "pass_threshold",
    "verification_turn",
    "max_seed_tokens",
    "rollout_seed",
)
# A stored whole number's range (PostgreSQL's integer).
_INT_LEAST, _INT_MOST = -(2**31), 2**31 - 1


def draw_problems(
    *,
    max_anchors: int | None,
    min_source_reward: float | None,
    max_source_reward: float | None,
    pass_threshold: float | None,
    verification_turn: str | None,
    max_seed_tokens: int | None,
    rollout_seed: int | None,
) -> dict[str, str]:
    """Why a project's draw and judging settings cannot be kept, by the
    project's field name, in a sentence; empty when they can. The one check
    of ``project_add``/``project_edit``, the project form and the model's
    ``clean``; a value not given (None) is not checked here."""
    problems: dict[str, str] = {}
    for name, count, least in (
        ("max_anchors", max_anchors, (1, "Draw at least one anchor.")),
        ("max_seed_tokens", max_seed_tokens, (1, "A seed holds at least one token.")),
        ("rollout_seed", rollout_seed, (_INT_LEAST, f"At least {_INT_LEAST:,}.")),
    ):
        if count is not None and count < least[0]:
            problems[name] = least[1]
        elif count is not None and count > _INT_MOST:
            problems[name] = f"At most {_INT_MOST:,}."
    for name, number in (
        ("min_source_reward", min_source_reward),
        ("max_source_reward", max_source_reward),
        ("pass_threshold", pass_threshold),
    ):
        if number is not None and not math.isfinite(number):
            problems[name] = "Give a finite number."
    if (
        not problems.keys() & {"min_source_reward", "max_source_reward"}
        and min_source_reward is not None
        and max_source_reward is not None
        and min_source_reward > max_source_reward
    ):
        problems["max_source_reward"] = (
            "The minimum source reward is above the maximum."
        )
    if verification_turn is not None and not verification_turn.strip():
        problems["verification_turn"] = "The verification turn is empty."
    return problems


@dataclass
class SeedDraft:
    """A seed before it is stored (:class:`replayhub.models.Seed`)."""

    key: str
    kind: str
    anchor: str
    anchor_node: int
    branch: int
    messages: list[dict[str, Any]]
    token_count: int
    snapshot: str = ""
    continuation: list[dict[str, Any]] = field(default_factory=list)
    original_completion: str = ""
    number: int = 0


def derive(trace: Trace, rules: SeedRules) -> tuple[list[SeedDraft], int]:
    """The seeds of ``trace`` under ``rules``, numbered from 1 in trajectory
    order, and how many were dropped for being longer than ``max_seed_tokens``."""
    if rules.mode == "recheck":
        one = recheck_seed(trace, rules.verification_turn)
        drafts = [one] if one is not None else []
    elif rules.anchor == "tool-call":
        # Not for secrecy: the same draw as the verifiers replay taskset, so
        # every reader of the records agrees on the anchors.
        rng = random.Random(f"{rules.seed}:{trace.id}")  # noqa: S311
        drafts = tool_call_seeds(trace, rng, rules.max_anchors)
    else:
        drafts = compaction_seeds(trace)
    kept = [
        d
        for d in drafts
        if rules.max_seed_tokens is None or d.token_count <= rules.max_seed_tokens
    ]
    for number, draft in enumerate(kept, start=1):
        draft.number = number
    return kept, len(drafts) - len(kept)


def compaction_seeds(trace: Trace) -> list[SeedDraft]:
    nodes = trace.nodes
    paths = branches(nodes)
    if len(paths) < 2:
        return []
    launch = _launch_contexts(trace, paths)
    seeds = []
    seen = set(paths[0])
    for number, path in enumerate(paths[1:], start=1):
        fork = next((i for i, n in enumerate(path) if n not in seen), None)
        seen.update(path)
        first_sampled = next(
            (i for i, n in enumerate(path) if nodes[n].sampled), len(path)
        )
        # fork 0: the branch shares nothing (another conversation).
        if fork is None or not 1 <= fork < first_sampled:
            continue
        anchor = path[fork]
        ref = trace.snapshots.get(anchor)
        if trace.snapshots and ref is None:
            continue
        context = path[:first_sampled]
        if any(nodes[n].role not in ("system", "user") for n in context):
            continue  # assistant or tool copies: a retokenization split
        if _conversation(nodes, context) in launch:
            continue
        seeds.append(
            SeedDraft(
                key=f"{trace.id}:continue:compaction@{anchor}",
                kind="continue",
                anchor="compaction",
                anchor_node=anchor,
                branch=number,
                messages=_seed_messages(trace, context),
                token_count=_tokens([nodes[n] for n in context]),
                snapshot=ref or "",
                continuation=[nodes[n].message for n in path[first_sampled:]],
                original_completion=_last_answer(nodes, path[first_sampled:]),
            )
        )
    return seeds


def tool_call_seeds(
    trace: Trace, rng: random.Random, max_anchors: int | None = 1
) -> list[SeedDraft]:
    nodes = trace.nodes
    candidates: list[tuple[int, list[int], int]] = []
    seen: set[int] = set()
    for number, path in enumerate(branches(nodes)):
        for end, index in enumerate(path):
            node = nodes[index]
            if node.role != "tool" or index in seen:
                continue
            seen.add(index)
            if trace.snapshots and index not in trace.snapshots:
                continue
            if end + 1 < len(path) and nodes[path[end + 1]].role == "tool":
                continue  # not the end of the tool-result run
            start = end
            while start > 0 and nodes[path[start - 1]].role == "tool":
                start -= 1
            if start == 0:
                continue
            issuer = nodes[path[start - 1]]
            calls = (
                issuer.message.get("tool_calls") if issuer.role == "assistant" else None
            )
            # Any assistant turn with calls issues them, sampled or not: the
            # model's own turn is copied unsampled into a later context when
            # it is rendered again (re-tokenized, or its reasoning stripped
            # from the history), and the replay taskset anchors there too.
            if not calls:
                continue
            answered = {
                nodes[path[i]].message.get("tool_call_id")
                for i in range(start, end + 1)
            }
            if {call["id"] for call in calls} != answered:
                continue
            candidates.append((number, path, end))
    if max_anchors is not None and max_anchors < len(candidates):
        keep = sorted(rng.sample(range(len(candidates)), max_anchors))
        candidates = [candidates[i] for i in keep]
    seeds = []
    for number, path, end in candidates:
        anchor = path[end]
        prefix = path[: end + 1]
        seeds.append(
            SeedDraft(
                key=f"{trace.id}:continue:tool-call@{anchor}",
                kind="continue",
                anchor="tool-call",
                anchor_node=anchor,
                branch=number,
                messages=_seed_messages(trace, prefix),
                token_count=_tokens([nodes[n] for n in prefix]),
                snapshot=trace.snapshots.get(anchor, ""),
                continuation=[nodes[n].message for n in path[end + 1 :]],
                original_completion=_last_answer(nodes, path[end + 1 :]),
            )
        )
    return seeds


def recheck_seed(trace: Trace, verification_turn: str) -> SeedDraft | None:
    nodes = trace.nodes
    paths = branches(nodes)
    if not paths:
        return None
    path = paths[-1]
    anchor = path[-1]
    ref = trace.snapshots.get(anchor)
    if trace.snapshots and ref is None:
        return None
    kept = list(path)
    for i, index in enumerate(kept):
        calls = nodes[index].message.get("tool_calls")
        if nodes[index].role != "assistant" or not calls:
            continue
        run = i + 1
        while run < len(kept) and nodes[kept[run]].role == "tool":
            run += 1
        answered = {
            nodes[kept[j]].message.get("tool_call_id") for j in range(i + 1, run)
        }
        if {call["id"] for call in calls} != answered:
            # Dangling calls would make the seed a malformed conversation.
            kept = kept[:i]
            break
    while kept and nodes[kept[-1]].role == "user":
        kept.pop()
    if not any(nodes[n].sampled and nodes[n].role == "assistant" for n in kept):
        return None
    turn = {"role": "user", "content": verification_turn}
    return SeedDraft(
        key=f"{trace.id}:recheck:final@{anchor}",
        kind="recheck",
        anchor="final",
        anchor_node=anchor,
        branch=len(paths) - 1,
        messages=[*_seed_messages(trace, kept), turn],
        token_count=_tokens([nodes[n] for n in kept]) + len(verification_turn) // 4,
        snapshot=ref or "",
        original_completion=_last_answer(nodes, kept),
    )


def is_replay_output(trace: Trace, verification_turn: str) -> bool:
    """Whether ``trace`` is the output of a replay rather than a source rollout.

    ReplayHub marks its own (``info.replayhub``). A record written by a
    replay without that mark is known by its launch context having a seed's
    shape: a task prompt that is a message list ending in a tool result (a
    tool-call continue) or in a verification turn after an assistant turn (a
    recheck). The task's name alone is never the evidence: a real task may
    be called ``recheck:…``. But the replay taskset's own continue from a
    compaction launches a plain prompt (the restart's summary) under a name
    of its own, ``continue:<trace id prefix>:compaction<N>``: that name with
    a prompt of that shape (a string, or system and user messages only) is
    replay output.
    """
    if trace.replay_mark is not None:
        return True
    prompt = trace.prompt
    if _COMPACTION_CONTINUE.fullmatch(trace.task_name or "") and (
        (isinstance(prompt, str) and bool(prompt.strip()))
        or (
            isinstance(prompt, list)
            and bool(prompt)
            and all(
                isinstance(m, dict) and m.get("role") in ("system", "user")
                for m in prompt
            )
        )
    ):
        return True
    if not isinstance(prompt, list) or not prompt:
        return False
    last = prompt[-1]
    if not isinstance(last, dict):
        return False
    if last.get("role") == "tool":
        return True
    roles = [m.get("role") for m in prompt if isinstance(m, dict)]
    return (
        last.get("role") == "user"
        and content_text(last.get("content"))
        in (verification_turn, DEFAULT_VERIFICATION_TURN)
        and "assistant" in roles
    )


# The name the verifiers replay taskset gives a continue from a compaction.
_COMPACTION_CONTINUE = re.compile(r"continue:[^:\s]{1,64}:compaction[0-9]+")


def _seed_messages(trace: Trace, path: list[int]) -> list[dict[str, Any]]:
    messages = [trace.nodes[n].message for n in path]
    if messages and messages[0]["role"] == "system" and trace.system_prompt:
        return messages[1:]
    return messages


def _conversation(nodes: list[Node], path: list[int]) -> tuple:
    """A context compared by what was said, system messages aside."""
    return tuple(
        (nodes[n].role, _hashable(nodes[n].message.get("content")))
        for n in path
        if nodes[n].role != "system"
    )


def _launch_contexts(trace: Trace, paths: list[list[int]]) -> set[tuple]:
    """The contexts the task itself launches with: its prompt when it has one,
    and the unsampled opening of the conversation the rollout began with (the
    branch holding its first sampled node). A null prompt stays null: the
    conversation was opened by the user side, and its opening is the launch."""
    nodes = trace.nodes
    found: set[tuple] = set()
    prompt = trace.prompt
    if isinstance(prompt, str):
        found.add((("user", prompt),))
    elif isinstance(prompt, list):
        found.add(
            tuple(
                (m.get("role"), _hashable(m.get("content")))
                for m in prompt
                if isinstance(m, dict) and m.get("role") != "system"
            )
        )
    first = next((i for i, node in enumerate(nodes) if node.sampled), None)
    if first is not None:
        path = next(p for p in paths if first in p)
        opening = path[: path.index(first)]
        found.add(_conversation(nodes, opening))
    return found


def _hashable(value: Any) -> Any:
    # It recurses: a trace's line was read within boundedjson's depth.
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def _last_answer(nodes: list[Node], path: list[int]) -> str:
    """The text of the last model-written assistant turn on ``path``."""
    for index in reversed(path):
        node = nodes[index]
        if node.sampled and node.role == "assistant":
            return content_text(node.message.get("content"))
    return ""


def _tokens(path: list[Node]) -> int:
    """The recorded token count of the nodes, else characters / 4."""
    recorded = sum(node.tokens for node in path)
    if recorded:
        return recorded
    chars = 0
    for node in path:
        message = node.message
        chars += len(content_text(message.get("content")))
        chars += len(message.get("reasoning_content") or "")
        for call in message.get("tool_calls") or ():
            chars += len(call["name"]) + len(call["arguments"])
    return chars // 4
