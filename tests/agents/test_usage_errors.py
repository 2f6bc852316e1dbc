"""An agent that fails before its first model call (a usage error, a CLI that
is not installed) ends ``agent_failed`` with the line of its output that says
why, not only its exit status."""

from __future__ import annotations

import pytest

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.models import Replay
from replayhub.replay.execute import failure_line
from tests.factories import make_calc_project, make_calc_run
from tests.scripted import original_commit

# What the real CLIs print for a flag they do not know, as they print it.
OUTPUTS = {
    "claude-code": ("error: unknown option '--bogus'\n", "error: unknown option"),
    "codex": (
        "WARNING: proceeding, even though we could not create PATH aliases\n"
        "error: unexpected argument '--full-auto' found\n\n"
        "  tip: to pass '--full-auto' as a value, use '-- --full-auto'\n\n"
        "Usage: codex exec [OPTIONS] [PROMPT]\n\n"
        "For more information, try '--help'.\n",
        "error: unexpected argument '--full-auto' found",
    ),
    "aider": (
        "usage: aider [-h] [--model MODEL] [--openai-api-key OPENAI_API_KEY]\n"
        "             [FILE ...]\n"
        "aider: error: unrecognized arguments: --bogus\n",
        "aider: error: unrecognized arguments: --bogus",
    ),
    "mini-swe-agent": (
        "This is mini-swe-agent version 2.4.6.\n"
        "Usage: mini [OPTIONS]\n"
        "Try 'mini --help' for help.\n"
        "\u256d\u2500 Error \u2500\u2500\u2500\u2500\u256e\n"
        "\u2502 No such option: --bogus          \u2502\n"
        "\u2570\u2500\u2500\u2500\u2500\u2500\u2500\u256f\n",
        "No such option: --bogus",
    ),
    "missing": (
        "sh: 1: exec: /replayhub-env/agent/bin/aider: not found\n",
        "sh: 1: exec: /replayhub-env/agent/bin/aider: not found",
    ),
}


@pytest.mark.parametrize("cli", list(OUTPUTS))
def test_the_line_that_says_why_is_found(cli):
    output, expected = OUTPUTS[cli]
    assert failure_line(output).startswith(expected)


def test_no_output_and_a_very_long_line_are_said_briefly():
    assert failure_line("\n  \n") == "it printed nothing"
    assert len(failure_line("error: " + "x" * 5000)) == 300


def replayed(run) -> Replay:
    created = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=created.pk)
    return Replay.objects.get(pk=created.pk)


@pytest.mark.django_db
def test_an_agent_that_exits_at_once_with_a_usage_error_says_why(calc_repo):
    base = calc_repo.rev("main")
    good = original_commit(calc_repo, GOOD, branch="agent/good")
    # The README's old Codex command, as the new Codex answers it.
    usage_error = (
        "echo \"error: unexpected argument '--full-auto' found\" >&2; "
        "echo 'Usage: codex exec [OPTIONS] [PROMPT]' >&2; exit 2"
    )
    project = make_calc_project(calc_repo, agent_command=["sh", "-c", usage_error])
    run = make_calc_run(project, prompt="anything", original=good, base=base)

    replay = replayed(run)

    assert (replay.verdict, replay.reason_code) == ("inconclusive", "agent_failed")
    assert replay.reason == (
        "The agent command failed before its first model call: exit status 2: "
        "error: unexpected argument '--full-auto' found."
    )


@pytest.mark.django_db
def test_an_agent_that_ends_well_and_changes_nothing_is_said_so(calc_repo):
    base = calc_repo.rev("main")
    good = original_commit(calc_repo, GOOD, branch="agent/good")
    project = make_calc_project(calc_repo, agent_command=["true"])
    run = make_calc_run(project, prompt="anything", original=good, base=base)

    replay = replayed(run)

    assert replay.reason_code == "no_change"
    assert replay.reason.endswith(": the agent left the checkout unchanged.")
