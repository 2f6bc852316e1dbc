"""Each agent's tape rules: the parts of its requests that change from one run
of the same conversation to the next although the model is asked the same
thing (the date it writes into its prompt, a tool's wall time, the commits it
lists), declared so a tape replay sets them aside by name
(``replayhub.gateway.tape_rules`` applies them and the evidence lists them).

Keyed by profile name. Measured on the real CLIs at their pinned versions,
two runs in different folders, HOMEs, branches and time zones
(docs: the agents' wires). What varies with the working directory and HOME
is mapped per replay (``tape_rules.path_rules``), not here; what the wire
itself varies (ids, ``client_metadata``) is the wire's (``tape_rules.WIRE``).
"""

from __future__ import annotations

from replayhub.gateway.tape_rules import SUB, Rule

# A short commit hash at a line's start, followed by its subject: a run and
# its replay sit on commits made at different times, so their hashes differ.
# At least one digit, so a word such as "defaced" is never taken for one.
_COMMIT_LINE = r"(?m)^(?=[0-9a-f]{0,39}[0-9])[0-9a-f]{7,40}(?= )"

RULES: dict[str, tuple[Rule, ...]] = {
    "claude-code": (
        Rule(
            "Claude Code: the date line (Today's date is YYYY-MM-DD.)",
            SUB,
            "messages[*].content[*].text",
            r"Today's date is \d{4}-\d{2}-\d{2}\.",
            "Today's date is <date>.",
        ),
        Rule(
            "Claude Code: gitStatus's commit hashes (Recent commits:)",
            SUB,
            "system[*].text",
            _COMMIT_LINE,
            "<commit>",
        ),
    ),
    "codex": (
        Rule(
            "Codex: <current_date>",
            SUB,
            "input[*].content[*].text",
            r"<current_date>\d{4}-\d{2}-\d{2}</current_date>",
            "<current_date><date></current_date>",
        ),
        Rule(
            "Codex: a tool's Wall time: N seconds",
            SUB,
            "input[*].output",
            r"Wall time: \d+(?:\.\d+)? seconds",
            "Wall time: <n> seconds",
        ),
        Rule(
            "Codex: a tool output's Chunk ID",
            SUB,
            "input[*].output",
            r"(?m)^Chunk ID: [0-9a-f]{1,32}$",
            "Chunk ID: <id>",
        ),
    ),
    "gemini-cli": (
        Rule(
            "Gemini CLI: the date sentence (Today's date is …)",
            SUB,
            "contents[*].parts[*].text",
            r"Today's date is [^\n(]{1,80}\(formatted according to the user's "
            r"locale\)\.",
            "Today's date is <date>.",
        ),
        Rule(
            # Its built-in skills are listed by file: where npm put the CLI on
            # the developer's machine is not where a replay installs it.
            "Gemini CLI: where it is installed (…/node_modules/@google/gemini-cli)",
            SUB,
            "",
            r"(?:/[A-Za-z0-9_.@+~-]{1,255}){1,64}/node_modules/@google/gemini-cli"
            r"(?=/)",
            "<gemini-cli>",
        ),
        Rule(
            "Gemini CLI: tool call ids it made (<tool>_<epoch ms>_<n>)",
            SUB,
            "contents[*].parts[*]",
            r"^[A-Za-z][A-Za-z0-9_]{0,80}_\d{13}_\d+$",
            "<call id>",
        ),
    ),
    "opencode": (
        Rule(
            "OpenCode: the date line (Today's date: Www Mmm DD YYYY)",
            SUB,
            "messages[*].content",
            r"Today's date: [A-Z][a-z]{2} [A-Z][a-z]{2} \d{2} \d{4}",
            "Today's date: <date>",
        ),
    ),
    # Aider sends nothing that varies from run to run; mini-swe-agent only the
    # host's uname, which a replay on another host should show.
    "aider": (),
    "mini-swe-agent": (),
}


def for_agent(name: str) -> tuple[Rule, ...]:
    """The tape rules of profile ``name``; none for a custom agent command."""
    return RULES.get(name, ())
