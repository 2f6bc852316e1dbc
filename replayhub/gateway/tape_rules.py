"""Declared normalisation rules: what a tape replay sets aside when it matches
an agent's request against the tape's. Pure; no Django, no I/O.

Two runs of the same conversation differ in parts the model's answer does not
depend on: ids a client makes per run, the date, the working directory's path.
Matching never guesses which parts those are. Each is a ``Rule`` declared by
the wire (``WIRE``: always on), by the agent's profile
(``replayhub.agents.rules``) or by the replay (the original's paths mapped to
the replay's, ``path_rules``), applied to both the recorded and the actual
request, and every rule that changed something is named in the replay's
evidence, so a reviewer sees exactly what was set aside.

A rule's ``where`` is a path into the request's JSON: keys joined by dots,
``[*]`` for every item of a list, ``[N]`` for one (``input[*].id``,
``messages[0].content[*].text``); empty, the whole request. ``drop`` removes
the member the path ends in. ``sub`` replaces the regex ``pattern`` by
``replacement`` in every string at or under the path (JSON strings that hold
JSON, such as header-like metadata fields, included, as their text).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

DROP = "drop"
SUB = "sub"
# A path that is not a plain absolute one of a few characters at least is not
# mapped: replacing "/" or "/w" everywhere would rewrite unrelated text.
MIN_PATH_CHARS = 4
# A path ends where no path character follows it ("/work/a" is not "/work/ab").
_PATH_END = r"(?![A-Za-z0-9_.\-])"
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\*|\d+)\]")


@dataclass(frozen=True)
class Rule:
    """One declared normalisation; ``name`` is what the evidence lists."""

    name: str
    action: str
    where: str = ""
    pattern: str = ""
    replacement: str = ""

    def __post_init__(self) -> None:
        if self.action not in (DROP, SUB):
            raise ValueError(f"a rule's action is drop or sub, not {self.action!r}")
        if self.action == DROP and not self.where:
            raise ValueError(f"the drop rule {self.name!r} names no path")
        if self.action == SUB:
            _compiled(self.pattern)


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@functools.lru_cache(maxsize=512)
def _steps(where: str) -> tuple[str | int, ...]:
    """``where`` as keys (str), indexes (int) and ``-1`` for ``[*]``."""
    steps: list[str | int] = []
    for part in where.split("."):
        for key, index in _SEGMENT.findall(part):
            if key:
                steps.append(key)
            else:
                steps.append(-1 if index == "*" else int(index))
    return tuple(steps)


def _at(root: Any, steps: Sequence[str | int]) -> list[tuple[Any, Any]]:
    """The (container, key) pairs ``steps`` lead to from ``root``."""
    found: list[tuple[Any, Any]] = [(None, root)]
    places: list[tuple[Any, Any]] = []
    for depth, step in enumerate(steps):
        nxt: list[tuple[Any, Any]] = []
        last = depth == len(steps) - 1
        for _, value in found:
            pairs: list[tuple[Any, Any]]
            if isinstance(step, str) and isinstance(value, dict) and step in value:
                pairs = [(value, step)]
            elif step == -1 and isinstance(value, list):
                pairs = [(value, i) for i in range(len(value))]
            elif isinstance(step, int) and isinstance(value, list):
                pairs = [(value, step)] if 0 <= step < len(value) else []
            else:
                pairs = []
            if last:
                places.extend(pairs)
            else:
                nxt.extend((c, c[k]) for c, k in pairs)
        found = nxt
    return places


def _strings_under(container: Any, key: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) holding a string at or under ``container[key]``,
    walked without recursion."""
    out: list[tuple[Any, Any]] = []
    stack = [(container, key)]
    while stack:
        holder, name = stack.pop()
        value = holder[name]
        if isinstance(value, str):
            out.append((holder, name))
        elif isinstance(value, dict):
            stack.extend((value, k) for k in value)
        elif isinstance(value, list):
            stack.extend((value, i) for i in range(len(value)))
    return out


def _apply(rule: Rule, request: dict[str, Any]) -> bool:
    """Applies ``rule`` to ``request`` in place; whether it changed anything."""
    if rule.action == DROP:
        changed = False
        # Removed from the end, so list indexes stay right.
        for container, key in reversed(_at(request, _steps(rule.where))):
            if isinstance(container, dict):
                del container[key]
            else:
                container.pop(key)
            changed = True
        return changed
    pattern = _compiled(rule.pattern)
    holder: dict[str, Any] = {"": request}
    places = _at(request, _steps(rule.where)) if rule.where else [(holder, "")]
    changed = False
    for container, key in places:
        for owner, name in _strings_under(container, key):
            text = owner[name]
            new = pattern.sub(rule.replacement, text)
            if new != text:
                owner[name] = new
                changed = True
    return changed


def normalise_with(
    rules: Iterable[Rule], request: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """``request`` after ``rules`` in order (a copy; ``request`` is left as it
    was), and the names of the rules that changed something."""
    rules = tuple(rules)
    if not rules:
        return request, []
    copy = json.loads(json.dumps(request))
    applied = [rule.name for rule in rules if _apply(rule, copy)]
    return copy, applied


# -- the wires' own rules ---------------------------------------------------

WIRE: dict[tuple[str, str], tuple[Rule, ...]] = {
    ("openai", "/responses"): (
        Rule(
            "Responses: client_metadata (per-run ids, the working directory, "
            "the turn's start time)",
            DROP,
            "client_metadata",
        ),
        Rule("Responses: prompt_cache_key (the session id)", DROP, "prompt_cache_key"),
        Rule("Responses: input item ids (made per run)", DROP, "input[*].id"),
    ),
    ("anthropic", "/v1/messages"): (
        Rule(
            "Anthropic: metadata.user_id (device and session ids)",
            DROP,
            "metadata.user_id",
        ),
    ),
}


def for_wire(kind: str, endpoint: str) -> tuple[Rule, ...]:
    return WIRE.get((kind, endpoint), ())


# -- a replay's paths -------------------------------------------------------


def _plain_path(path: object) -> str:
    if not isinstance(path, str):
        return ""
    path = path.rstrip("/")
    if not path.startswith("/") or len(path) < MIN_PATH_CHARS or "\n" in path:
        return ""
    return path


def dashed(path: str) -> str:
    """A path as Claude Code names its project folder under ``~/.claude``:
    every character but a letter or digit made a dash."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def path_rules(original: dict[str, Any], replay: dict[str, Any]) -> tuple[Rule, ...]:
    """Rules that read the original's working directory and HOME as the
    replay's, in the forms agents write them: the path itself, Claude Code's
    dashed project folder, Gemini CLI's lowercased folder name. Applied to
    both requests, so a replay that already runs at the original's path
    matches too. ``original`` and ``replay`` hold ``cwd`` and ``home`` (either
    may be missing or unusable: that path is not mapped)."""
    rules: list[Rule] = []
    cwd, to_cwd = _plain_path(original.get("cwd")), _plain_path(replay.get("cwd"))
    if cwd and to_cwd and cwd != to_cwd:
        rules.append(
            Rule(
                f"path: the working directory {cwd} read as {to_cwd}",
                SUB,
                "",
                re.escape(cwd) + _PATH_END,
                to_cwd.replace("\\", "\\\\"),
            )
        )
        rules.append(
            Rule(
                f"path: {dashed(cwd)} (the working directory as a folder name) "
                f"read as {dashed(to_cwd)}",
                SUB,
                "",
                re.escape(dashed(cwd)) + _PATH_END,
                dashed(to_cwd),
            )
        )
        name, to_name = _folder(cwd), _folder(to_cwd)
        if name and to_name and name != to_name:
            rules.append(
                Rule(
                    f"path: .gemini/tmp/{name} read as .gemini/tmp/{to_name}",
                    SUB,
                    "",
                    r"(\.gemini/(?:tmp|history)/)" + re.escape(name) + _PATH_END,
                    r"\g<1>" + to_name.replace("\\", "\\\\"),
                )
            )
    home, to_home = _plain_path(original.get("home")), _plain_path(replay.get("home"))
    if home and to_home and home != to_home:
        rules.append(
            Rule(
                f"path: HOME {home} read as {to_home}",
                SUB,
                "",
                re.escape(home) + _PATH_END,
                to_home.replace("\\", "\\\\"),
            )
        )
    return tuple(rules)


def _folder(path: str) -> str:
    return path.rsplit("/", 1)[-1].lower()
