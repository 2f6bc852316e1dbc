"""A run's page offers the ways to replay it side by side, as the viewer may:
Replay now (live, budget-checked), Replay from tape (the run has a tape) and
Replay as text."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from replayhub.models import Replay, Rollup, Run, Tier
from replayhub.replay.services import night_window_end
from reviews.models import AuditEvent
from reviews.trends.rollups import rollup_replay
from tests.factories import make_project, make_replay

TAPE = [{"provider_kind": "openai", "path": "/v1/models"}]


@pytest.fixture
def recorded(db) -> Run:
    """A run as ``replayhub-record`` delivers it: ready, with its tape."""
    return Run.objects.create(
        project=make_project("shop"),
        external_id="20261202T093000Z-0a1b2c3d",
        title="Add a note",
        preflight="ready",
        original_commit="a" * 40,
        raw={"tape": TAPE},
    )


def run_page(client, run: Run) -> str:
    return client.get(reverse("reviews:run_detail", args=[run.pk])).content.decode()


def buttons(html: str) -> list[str]:
    """The replay actions' labels, in the order the page shows them."""
    found = re.search(r'<div class="run-actions".*?</div>', html, re.S)
    if found is None:
        return []
    return re.findall(r">(Replay [a-z ]+)</(?:button|a)>", found.group(0))


def action_of(html: str, label: str) -> tuple[str, dict[str, str]]:
    """The form a button is in: its action and its fields, as a browser posts."""
    for form in re.findall(r"<form [^>]*>.*?</form>", html, re.S):
        if f">{label}</button>" in form:
            action = re.search(r'action="([^"]+)"', form)
            assert action is not None
            fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form))
            return action.group(1), fields
    raise AssertionError(f"no {label!r} button")


def test_an_admin_sees_replay_now_from_tape_and_as_text_side_by_side(
    client, admin_user, recorded
):
    client.force_login(admin_user)

    html = run_page(client, recorded)

    assert buttons(html) == ["Replay now", "Replay from tape", "Replay as text"]


def test_a_reader_without_the_permissions_sees_no_replay_button(client, lead, recorded):
    client.force_login(lead)

    html = run_page(client, recorded)

    assert buttons(html) == []
    assert "Replay now" not in html and "Replay from tape" not in html
    tape_url = reverse("reviews:run_tape_replay", args=[recorded.pk])
    assert client.post(tape_url).status_code == 403
    assert not Replay.objects.exists()


def test_a_reviewer_may_replay_from_tape_but_not_start_a_live_replay(
    client, reviewer, recorded
):
    client.force_login(reviewer)

    assert buttons(run_page(client, recorded)) == ["Replay from tape"]


def test_a_run_without_a_tape_offers_no_tape_replay(client, admin_user, recorded):
    recorded.raw = {}
    recorded.save(update_fields=["raw"])
    client.force_login(admin_user)

    assert buttons(run_page(client, recorded)) == ["Replay now", "Replay as text"]


def test_pressing_replay_now_queues_a_replay_and_opens_it(client, admin_user, recorded):
    client.force_login(admin_user)
    action, fields = action_of(run_page(client, recorded), "Replay now")

    response = client.post(action, fields)

    replay = Replay.objects.get(run=recorded)
    assert response["Location"] == reverse("reviews:replay_detail", args=[replay.pk])
    assert (replay.status, replay.trigger, replay.tier) == ("queued", "now", "agentic")
    assert replay.requested_by == admin_user
    # The run's page lists it.
    assert f'href="{response["Location"]}"' in run_page(client, recorded)


def test_pressing_replay_from_tape_queues_a_tape_replay_audited(
    client, reviewer, recorded
):
    client.force_login(reviewer)
    action, fields = action_of(run_page(client, recorded), "Replay from tape")

    response = client.post(action, fields)

    replay = Replay.objects.get(run=recorded)
    assert response["Location"] == reverse("reviews:replay_detail", args=[replay.pk])
    assert (replay.status, replay.tier, replay.requested_by) == (
        "queued",
        Tier.TAPE,
        reviewer,
    )
    event = AuditEvent.objects.get(action="replay.request")
    assert event.after == {
        "replay": replay.pk,
        "run": recorded.external_id,
        "tier": "tape",
    }
    trail = client.get(response["Location"]).content.decode()
    assert "started a replay from the run&#x27;s tape" in " ".join(trail.split())


def test_a_refused_replay_now_comes_back_to_the_run_page_saying_why(
    client, admin_user, recorded
):
    client.force_login(admin_user)
    action, fields = action_of(run_page(client, recorded), "Replay now")
    Run.objects.filter(pk=recorded.pk).update(
        preflight="unreproducible", preflight_reason="the base commit is missing"
    )

    response = client.post(action, fields, follow=True)

    assert response.redirect_chain[-1][0] == reverse(
        "reviews:run_detail", args=[recorded.pk]
    )
    assert "Not started: This run can never reach a verdict" in (
        response.content.decode()
    )
    assert not Replay.objects.exists()


def test_the_replays_table_names_each_reason_with_its_code(client, lead, recorded):
    make_replay(
        verdict="inconclusive",
        reason_code="base_untrusted",
        project=recorded.project,
        run=recorded,
    )
    client.force_login(lead)

    html = run_page(client, recorded)

    assert '<span class="reason-name">Base commit not trusted</span>' in html
    assert '<code class="code-tag">base_untrusted</code>' in html


def test_a_replay_from_tape_says_so_on_its_page_and_trends_still_count_it(
    client, reviewer, recorded
):
    client.force_login(reviewer)
    action, fields = action_of(run_page(client, recorded), "Replay from tape")

    opened = client.post(action, fields, follow=True)

    header = re.search(r'<p class="meta">.*?</p>', opened.content.decode(), re.S)
    assert header is not None
    assert f"Replay from tape by {reviewer.get_username()}" in header.group(0)
    assert "Replay now" not in header.group(0)
    # Started by hand: bound to no night's window, counted by the trends
    # under the night it finished in, with the other tape replays.
    replay = Replay.objects.get(run=recorded)
    assert night_window_end(replay) is None
    Replay.objects.filter(pk=replay.pk).update(
        status="finished",
        verdict="identical",
        reason_code="identical",
        reason="Same tree, same tests.",
        phase="done",
        finished_at=timezone.now(),
    )
    rollup_replay(replay.pk)
    counted = Rollup.objects.get(project=recorded.project, tier=Tier.TAPE)
    assert (counted.attempted, counted.identical) == (1, 1)
