"""The agents' own files are not the change: a replay whose agent left a chat
log, beside an original that committed another, reproduces it all the same.

Real repositories, the scripted change, the real sandbox.
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.models import Replay
from replayhub.models.projects import DEFAULT_IGNORED_PATHS
from tests.factories import make_calc_project, make_calc_run

pytestmark = pytest.mark.django_db

# The scripted agent's right answer, and the files an aider session leaves:
# its chat log and a cache directory, none of them like the original's.
AIDER = (
    "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n"
    "printf '# aider chat started at replay time\\n' > .aider.chat.history.md\n"
    "mkdir -p .aider.tags.cache.v3 && echo tags > .aider.tags.cache.v3/cache.db\n"
    "echo 'the agent is done'\n"
)


@pytest.fixture
def chatty_original(calc_repo):
    """The original run's commit: the fix, and the chat log aider committed."""
    calc_repo.checkout("main")
    sha = calc_repo.commit(
        {
            "calc.py": GOOD,
            ".aider.chat.history.md": "# aider chat started at original time\n",
        },
        "agent fix, with its chat log",
        branch="agent/aider",
    )
    calc_repo.checkout("main")
    return sha


def replay_of(project, base, original) -> Replay:
    run = make_calc_run(project, prompt="aider", original=original, base=base)
    replay = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=replay.pk)
    return Replay.objects.select_related("comparison").get(pk=replay.pk)


def test_a_chat_log_on_both_sides_is_left_out_and_the_replay_is_identical(
    calc_repo, calc_base, chatty_original, client, reviewer
):
    project = make_calc_project(calc_repo, agent_command=["sh", "-c", AIDER])
    assert project.ignored_paths == list(DEFAULT_IGNORED_PATHS)

    result = replay_of(project, calc_base, chatty_original)

    assert (result.verdict, result.reason_code) == ("identical", "same_tree")
    assert result.comparison.replay_paths == ["calc.py"]
    assert ".aider" not in result.comparison.original_patch
    assert result.evidence["ignored_paths"] == {
        "original": {"paths": [".aider.chat.history.md"], "count": 1},
        "replay": {
            "paths": [".aider.chat.history.md", ".aider.tags.cache.v3/cache.db"],
            "count": 2,
        },
    }
    client.force_login(reviewer)
    page = client.get(reverse("reviews:replay_detail", args=[result.pk])).content
    assert b"The agents' own files, left out of both trees" in page
    assert b'<code class="wrap">.aider.tags.cache.v3/cache.db</code>' in page
    shown = client.get(reverse("api_replay_detail", args=[result.pk])).json()
    assert shown["evidence"]["ignored_paths"]["replay"]["count"] == 2


def test_without_the_ignored_paths_the_chat_log_is_a_disallowed_change(
    calc_repo, calc_base, chatty_original
):
    project = make_calc_project(
        calc_repo, agent_command=["sh", "-c", AIDER], ignored_paths=[]
    )

    result = replay_of(project, calc_base, chatty_original)

    assert (result.verdict, result.reason_code) == ("divergent", "disallowed_paths")
    assert ".aider.chat.history.md" in result.reason
    assert "ignored_paths" not in result.evidence


def test_a_chat_log_the_base_tracks_is_put_back_as_the_base_has_it(
    calc_repo, chatty_original
):
    # A later run starts where the original's chat log is committed; its
    # agent appends to it, and its original deleted it.
    calc_repo.checkout("main")
    base = calc_repo.commit(
        {".aider.chat.history.md": "# an earlier session\n"}, "an earlier session"
    )
    original = calc_repo.commit(
        {"calc.py": GOOD, ".aider.chat.history.md": None}, "fix", branch="agent/b"
    )
    calc_repo.checkout("main")
    appends = AIDER.replace("' > .aider.chat", "' >> .aider.chat")
    project = make_calc_project(calc_repo, agent_command=["sh", "-c", appends])

    result = replay_of(project, base, original)

    assert (result.verdict, result.reason_code) == ("identical", "same_tree")
    left_out = result.evidence["ignored_paths"]
    assert left_out["original"]["paths"] == [".aider.chat.history.md"]
    assert ".aider.chat.history.md" in left_out["replay"]["paths"]


def test_reproduce_json_lists_the_left_out_paths_the_caps_and_the_output(
    calc_repo, calc_base, chatty_original
):
    project = make_calc_project(
        calc_repo,
        agent_command=["sh", "-c", AIDER],
        max_tokens=5000,
        max_requests=7,
        max_cost_usd="0.5000",
        max_disk_mb=64,
        max_files=1000,
    )
    run = make_calc_run(project, prompt="aider", original=chatty_original)
    out = StringIO()

    call_command("reproduce", str(run.pk), "--sync", "--json", stdout=out)

    printed = json.loads(out.getvalue())
    assert printed["verdict"] == "identical"
    assert printed["agent"]["exit_code"] == 0
    assert printed["agent"]["output_tail"].endswith("the agent is done\n")
    caps = printed["caps"]
    assert caps["time_seconds"]["limit"] == 30
    assert 0 < caps["time_seconds"]["used"] < 30
    assert caps["tokens"]["limit"] == 5000
    assert caps["requests"]["limit"] == 7
    assert caps["cost_usd"]["limit"] == "0.5000"
    assert caps["disk_mb"]["limit"] == 64 and 0 <= caps["disk_mb"]["used"] < 64
    # calc.py, test_calc.py and agent.sh: the agents' files were never captured.
    assert caps["files"] == {"limit": 1000, "used": 3}
    assert printed["ignored_paths"]["replay"]["count"] == 2
