"""A replay that looks like the original run to the agent: the workspace at
the recorded working directory, HOME at the recorded home, the base checked
out on the recorded branch, TZ and LANG as recorded; what could not be made
the same is listed with why in the replay's evidence and on its page.

Real repositories, the real sandbox, the scripted calculator's project with
an agent that writes down what it sees.
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from replayhub import services
from replayhub.models import Replay
from replayhub.replay import surroundings
from replayhub.sandbox.base import HOME, WORKSPACE
from tests.factories import make_calc_project, make_calc_run

# What an agent reads of its surroundings, one line each.
PROBE = (
    'pwd; echo "$PWD"; echo "$HOME"; '
    "git symbolic-ref -q --short HEAD || echo detached; "
    'echo "$TZ"; echo "$LANG"; date +%Z'
)
RECORDED = {
    "cwd": "/home/alice/src/calc",
    "home": "/home/alice",
    "branch": "feature/rounding",
    "tz": "Asia/Tokyo",
    "lang": "en_GB.UTF-8",
}


def replayed(project, base, original, recorded) -> Replay:
    run = make_calc_run(project, prompt="probe", original=original, base=base)
    run.raw = {"surroundings": recorded}
    run.save()
    replay = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=replay.pk)
    return Replay.objects.get(pk=replay.pk)


@pytest.mark.django_db
def test_the_agent_sees_the_originals_directory_home_branch_and_zone(
    calc_repo, calc_base, calc_good
):
    project = make_calc_project(calc_repo, agent_command=["sh", "-c", PROBE])

    replay = replayed(project, calc_base, calc_good, RECORDED)

    seen = replay.agent_output.splitlines()
    assert seen[:7] == [
        "/home/alice/src/calc",
        "/home/alice/src/calc",
        "/home/alice",
        "feature/rounding",
        "Asia/Tokyo",
        "en_GB.UTF-8",
        "JST",
    ]
    assert replay.evidence["surroundings"] == {
        "reproduced": RECORDED,
        "differences": [],
    }


@pytest.mark.django_db
def test_what_cannot_be_made_the_same_is_listed_with_why_on_the_page(
    calc_repo, calc_base, calc_good, client, reviewer
):
    project = make_calc_project(calc_repo, agent_command=["sh", "-c", PROBE])
    recorded = {
        "cwd": "/tmp/rh/<b>work</b>",
        "home": "/etc/alice",
        "branch": "bad..name",
        "tz": "Mars/Olympus_Mons",
        "lang": "en_GB.UTF-8; rm -rf /",
    }

    replay = replayed(project, calc_base, calc_good, recorded)

    seen = replay.agent_output.splitlines()
    assert seen[:4] == [WORKSPACE, WORKSPACE, HOME, "detached"]
    differences = replay.evidence["surroundings"]["differences"]
    assert [d["what"] for d in differences] == [
        "working directory",
        "HOME",
        "TZ",
        "LANG",
        "branch",
    ]
    assert differences[0] == {
        "what": "working directory",
        "original": "/tmp/rh/<b>work</b>",
        "replay": WORKSPACE,
        "why": "inside the system folder /tmp",
    }
    client.force_login(reviewer)
    page = client.get(reverse("reviews:replay_detail", args=[replay.pk]))
    html = page.content.decode()
    assert "What the agent saw differently" in html
    assert "/tmp/rh/&lt;b&gt;work&lt;/b&gt;" in html
    assert "<b>work</b>" not in html
    assert "git does not take it as a branch name here" in html


@pytest.mark.django_db
def test_a_run_without_surroundings_replays_as_before(calc_repo, calc_base, calc_good):
    project = make_calc_project(calc_repo, agent_command=["sh", "-c", PROBE])

    replay = replayed(project, calc_base, calc_good, None)

    assert replay.agent_output.splitlines()[:4] == [
        WORKSPACE,
        WORKSPACE,
        HOME,
        "detached",
    ]
    assert "surroundings" not in replay.evidence


class _Project:
    agent = "claude-code"
    agent_version = "2.1.200"


def test_the_agent_version_differs_when_the_project_installs_another():
    placement = surroundings.plan(
        {"agent": {"name": "claude", "version": "2.1.197"}},
        installed_agent=surroundings.installed_agent(_Project()),
    )
    assert placement.differences == [
        {
            "what": "agent version",
            "original": "2.1.197",
            "replay": "2.1.200",
            "why": "the project installs claude-code 2.1.200",
        }
    ]
    same = surroundings.plan(
        {"agent": {"version": "2.1.200"}}, installed_agent=("claude-code", "2.1.200")
    )
    assert same.reproduced == {"agent_version": "2.1.200"} and not same.differences


@pytest.mark.parametrize(
    "recorded",
    [
        [],
        "x",
        1,
        {"cwd": 5, "home": ["x"], "branch": 3, "tz": {}, "lang": 9, "shell": 2},
    ],
)
def test_a_malformed_surroundings_value_never_fails_the_plan(recorded):
    placement = surroundings.plan(recorded)
    assert placement.workspace_at == WORKSPACE and placement.home == HOME
    assert placement.env == {}


def test_the_system_zone_links_etc_localtime_apart_from_tz():
    placement = surroundings.plan({"tz": "Asia/Tokyo", "localtime": "Europe/Paris"})
    assert placement.env == {"TZ": "Asia/Tokyo"}
    assert placement.zone == "Europe/Paris"
    unknown = surroundings.plan({"localtime": "Nowhere/Atlantis"})
    assert unknown.zone is None
    assert unknown.differences[0]["what"] == "/etc/localtime"


def test_the_recorded_shell_is_set_when_this_host_has_it():
    placement = surroundings.plan({"shell": "/bin/sh"})
    assert placement.env == {"SHELL": "/bin/sh"}
    assert placement.reproduced == {"shell": "/bin/sh"}


def test_a_login_shell_recorded_without_shell_leaves_shell_unset():
    """Claude Code writes "Shell: unknown" when $SHELL is unset: a replay of
    a run recorded so must not set it from the password database's shell."""
    placement = surroundings.plan({"login_shell": "/bin/sh"})
    assert "SHELL" not in placement.env
    assert placement.login_shell == "/bin/sh"
    assert placement.reproduced == {"login_shell": "/bin/sh"}
    lacking = surroundings.plan({"login_shell": "/usr/bin/no-such-shell"})
    assert lacking.login_shell is None
    assert lacking.differences[0]["what"] == "login shell"


@pytest.mark.parametrize(
    "shell", ["/usr/bin/no-such-shell", "bash", "/bin/../bin/sh", "/bin/sh; rm -rf /"]
)
def test_a_shell_this_host_lacks_or_that_is_not_a_path_is_listed(shell):
    placement = surroundings.plan({"shell": shell})
    assert "SHELL" not in placement.env
    (difference,) = placement.differences
    assert difference["what"] == "SHELL" and difference["why"] == "no such shell here"


def test_home_holding_the_workspace_stays_the_sandbox_home():
    placement = surroundings.plan({"cwd": "/home/alice", "home": "/home/alice"})
    assert placement.workspace_at == "/home/alice"
    assert placement.home == HOME
    assert placement.differences[0]["what"] == "HOME"


def test_another_model_asked_of_anthropic_is_listed():
    recorded = {"anthropic": {"model": "claude-opus-4-8", "beta": ["context-1m"]}}
    other = surroundings.plan(recorded)
    other.asked("claude-sonnet-4-5")
    assert other.differences == [
        {
            "what": "model asked",
            "original": "claude-opus-4-8",
            "replay": "claude-sonnet-4-5",
            "why": "the agent asked for another model (its --model or settings)",
        }
    ]
    same = surroundings.plan(recorded)
    same.asked("claude-opus-4-8")
    assert same.reproduced == {"anthropic_model": "claude-opus-4-8"}
    none = surroundings.plan(recorded)
    none.asked(None)  # no Anthropic call in the replay: nothing to compare
    assert none.differences == [] and none.reproduced == {}


@pytest.mark.django_db
def test_reproduce_json_prints_the_surroundings(calc_repo, calc_base, calc_good):
    project = make_calc_project(calc_repo, agent_command=["sh", "-c", PROBE])
    run = make_calc_run(project, prompt="probe", original=calc_good, base=calc_base)
    run.raw = {"surroundings": {"cwd": "/proc/1", "tz": "Asia/Tokyo"}}
    run.save()
    out = StringIO()

    call_command("reproduce", str(run.pk), "--sync", "--json", stdout=out)

    printed = json.loads(out.getvalue())["surroundings"]
    assert printed["reproduced"] == {"tz": "Asia/Tokyo"}
    assert printed["differences"][0]["what"] == "working directory"


def test_a_profile_without_a_version_of_its_own_installs_its_pinned_one():
    class Pinned:
        agent = "codex"
        agent_version = ""

    class Custom:
        agent = "custom"
        agent_version = ""

    installed = surroundings.installed_agent(Pinned())
    assert installed is not None and installed[0] == "codex" and installed[1]
    assert surroundings.installed_agent(Custom()) is None


def test_under_docker_the_images_localtime_is_listed():
    placement = surroundings.plan({"tz": "Asia/Tokyo"})
    placement.ran_under("bwrap")
    assert placement.differences == []
    placement.ran_under("docker")
    assert placement.differences[0]["what"] == "/etc/localtime"
    assert placement.differences[0]["original"] == "Asia/Tokyo"
