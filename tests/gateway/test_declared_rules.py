"""Declared normalisation rules: the engine (drop a key path, substitute in
the strings under one), and each agent's rules against what its real CLI sent
in two runs that differed in folder, HOME, branch and time zone
(tests/fixtures/agents/<agent>/cap-C and cap-D): after the wire's, the
agent's and the replay's path rules, run D's requests match run C's tape, and
the rules that set something aside are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayhub.agents.rules import RULES
from replayhub.gateway import tape, tape_rules
from replayhub.gateway.tape import Exchange
from replayhub.gateway.tape_rules import Rule

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def test_drop_removes_a_key_path_through_every_list_item():
    request: dict = {"input": [{"id": "a", "text": "x"}, {"text": "y"}, "plain"]}
    rule = Rule("ids", "drop", "input[*].id")

    out, applied = tape_rules.normalise_with([rule], request)

    assert out == {"input": [{"text": "x"}, {"text": "y"}, "plain"]}
    assert applied == ["ids"]
    assert request["input"][0]["id"] == "a"  # the request itself is left alone


def test_sub_rewrites_strings_under_its_path_only_and_names_only_what_changed():
    request = {
        "messages": [{"content": [{"text": "Today's date is 2026-12-02."}]}],
        "system": "Today's date is 2026-12-02.",
    }
    date = Rule(
        "date",
        "sub",
        "messages[*].content[*].text",
        r"\d{4}-\d{2}-\d{2}",
        "<date>",
    )
    idle = Rule("never", "drop", "nothing.here")

    out, applied = tape_rules.normalise_with([date, idle], request)

    assert out["messages"][0]["content"][0]["text"] == "Today's date is <date>."
    assert out["system"] == "Today's date is 2026-12-02."
    assert applied == ["date"]


def test_a_json_string_field_is_rewritten_as_text():
    request = {"meta": {"x-turn": json.dumps({"cwd": "/home/dev/shop"})}}
    rules = tape_rules.path_rules({"cwd": "/home/dev/shop"}, {"cwd": "/workspace"})

    out, _ = tape_rules.normalise_with(rules, request)

    assert json.loads(out["meta"]["x-turn"]) == {"cwd": "/workspace"}


def test_a_path_is_mapped_whole_and_never_a_longer_one_that_starts_alike():
    rules = tape_rules.path_rules(
        {"cwd": "/home/dev/shop", "home": "/home/dev"},
        {"cwd": "/workspace", "home": "/home/sandbox"},
    )
    text = (
        "/home/dev/shop/calc.py /home/dev/shop-old /home/dev/.codex "
        "~/.claude/projects/-home-dev-shop/memory /home/developer"
    )

    out, applied = tape_rules.normalise_with(rules, {"t": text})

    assert out["t"] == (
        "/workspace/calc.py /home/sandbox/shop-old /home/sandbox/.codex "
        "~/.claude/projects/-workspace/memory /home/developer"
    )
    assert len(applied) == 3


@pytest.mark.parametrize("path", ["", "/", "/a", "relative/dir", None, 7])
def test_a_path_too_short_or_not_absolute_is_not_mapped(path):
    assert tape_rules.path_rules({"cwd": path}, {"cwd": "/workspace"}) == ()


def test_a_rule_of_no_known_action_is_refused():
    with pytest.raises(ValueError):
        Rule("x", "fuzzy", "a")


# -- the real agents' requests ---------------------------------------------

RUNS = "/work/notes/agents-cache/runs"
PLACES = {
    "codex": lambda r: (f"{RUNS}/codex-{r}/work-{r}", f"{RUNS}/codex-{r}/home"),
    "claude-code": lambda r: (
        f"/tmp/rh-agents/claude-{r}/work-{r}",
        f"/tmp/rh-agents/claude-{r}/home",
    ),
    "opencode": lambda r: (
        f"{RUNS}/opencode-{r}/work-{r}",
        f"{RUNS}/opencode-{r}/home",
    ),
    "gemini-cli": lambda r: (f"{RUNS}/gemini-{r}/work-{r}", f"{RUNS}/gemini-{r}/home"),
}
WIRES = {
    "codex": ("openai", "/responses"),
    "claude-code": ("anthropic", "/v1/messages"),
    "opencode": ("openai", "/chat/completions"),
    "gemini-cli": ("gemini", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
}


def requests_of(agent: str, run: str) -> list[dict]:
    kind, endpoint = WIRES[agent]
    files = sorted((AGENTS / agent / f"cap-{run}").glob("*-POST-*.json"))
    bodies = [json.loads(f.read_text())["body"] for f in files]
    if agent == "claude-code" and run == "D":
        # The replay checks the base out under the original's branch name
        # (run D was on feature/x), so the branch is not a tape rule.
        bodies = json.loads(
            json.dumps(bodies).replace(
                "Current branch: feature/x", "Current branch: main"
            )
        )
    return [tape.normalise(kind, endpoint, b) for b in bodies]


def surroundings(agent: str, run: str) -> dict[str, str]:
    cwd, home = PLACES[agent](run)
    return {"cwd": cwd, "home": home}


@pytest.mark.parametrize("agent", sorted(WIRES))
def test_another_run_of_a_real_agent_matches_its_tape_after_the_declared_rules(
    agent,
):
    recorded = [
        Exchange(r, {"answer": n}) for n, r in enumerate(requests_of(agent, "C"))
    ]
    rules = (
        *tape_rules.path_rules(surroundings(agent, "C"), surroundings(agent, "D")),
        *RULES[agent],
    )
    applied: set[str] = set()

    for index, actual in enumerate(requests_of(agent, "D")):
        divergence, names = tape.match(
            recorded, index, actual, stream=False, rules=rules
        )
        assert divergence is None, divergence.diff if divergence else ""
        applied.update(names)

    agent_names = {rule.name for rule in RULES[agent]}
    assert agent_names & applied, "the agent's own rules set something aside"
    assert any(name.startswith("path: the working directory") for name in applied)


@pytest.mark.parametrize("agent", sorted(WIRES))
def test_without_the_agents_rules_another_run_differs_at_call_1(agent):
    recorded = [Exchange(r, {}) for r in requests_of(agent, "C")]
    paths = tape_rules.path_rules(surroundings(agent, "C"), surroundings(agent, "D"))

    divergence, _ = tape.match(
        recorded, 0, requests_of(agent, "D")[0], stream=False, rules=paths
    )

    assert divergence is not None and divergence.why == "differs"
