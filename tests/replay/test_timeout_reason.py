"""A replay whose agent kept trying a host outside the allowlist and then
timed out says so in its reason: the host, how many times, not allowed.

The real sandbox and egress proxy; the agent is a script standing in for a
CLI that ignores the base URL it is given and goes for the real API.
"""

from __future__ import annotations

import pytest

from replayhub import services
from replayhub.models import Replay
from replayhub.replay.stops import timeout_detail
from tests.factories import make_calc_project, make_calc_run

# Three refused connections to the real API through the proxy, then a wait
# past the time limit, as Codex does when it ignores OPENAI_BASE_URL.
STUBBORN = """
import time, urllib.request
for _ in range(3):
    try:
        urllib.request.urlopen("https://api.openai.com/v1/responses", timeout=2)
    except Exception:
        pass
time.sleep(60)
"""


@pytest.mark.django_db
def test_a_timeout_names_the_host_the_agent_kept_trying(
    calc_repo, calc_base, calc_good
):
    project = make_calc_project(
        calc_repo,
        agent_command=["python3", "-c", STUBBORN],
        egress_agent=["pypi.org:443"],
        time_limit_seconds=4,
    )
    run = make_calc_run(project, prompt="stubborn", original=calc_good, base=calc_base)
    replay = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=replay.pk)
    replay = Replay.objects.get(pk=replay.pk)

    assert replay.reason_code == "timeout"
    assert replay.reason == (
        "The replay hit its time limit before producing a change: "
        "the agent timed out after 4 s; it tried to reach api.openai.com:443 "
        "3 times (not allowed)."
    )


def row(host: str, count: int, *, allowed: bool = False, phase: str = "agent"):
    return {
        "phase": phase,
        "host": host,
        "port": 443,
        "allowed": allowed,
        "outcome": "ok" if allowed else "denied",
        "count": count,
    }


def test_only_the_agent_phases_refused_attempts_count_most_first():
    rows = [
        row("pypi.org", 40, allowed=True),
        row("files.example", 9, phase="setup"),
        row("api.openai.com", 27),
        row("ab.chatgpt.com", 2),
        row("chatgpt.com", 1),
    ]
    assert timeout_detail("the agent", 90, rows) == (
        "the agent timed out after 90 s; it tried to reach api.openai.com:443 "
        "27 times and 2 other hosts 3 times (not allowed)"
    )
    assert timeout_detail("the agent", 90, [row("x.example", 1)]) == (
        "the agent timed out after 90 s; it tried to reach x.example:443 "
        "1 time (not allowed)"
    )
    assert timeout_detail("the agent", 1.5, []) == "the agent timed out after 1.5 s"
