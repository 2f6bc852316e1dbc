"""A reviewer's queue in a real Chromium: keyboard triage, claims, roles, escaping."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from replayhub.models import Replay
from reviews.models import AuditEvent, Claim, Review
from reviews.replay_page import views
from tests.factories import make_project, make_replay, make_user

pytestmark = pytest.mark.browser

DETAIL = re.compile(r".*/replays/(\d+)/$")
SCRIPT = "<script>window.__pwned=1</script>"
ONERROR = '<img src=x onerror="window.__pwned=1">'


def opened(page) -> int:
    return int(DETAIL.match(page.url).group(1))


def watch_errors(page) -> list:
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


def test_a_reviewer_triages_three_items_with_the_keyboard_only(
    login, reviewer, screenshot
):
    billing = make_project("billing")
    equivalent = make_replay(
        verdict="equivalent",
        title="Let checkout accept two coupons",
        finished_ago=timedelta(minutes=4),
    )
    divergent = make_replay(
        verdict="divergent",
        title="Round invoice totals half-even",
        project=billing,
        finished_ago=timedelta(minutes=2),
    )
    exhausted = make_replay(
        verdict="inconclusive",
        title="Retry webhook deliveries",
        finished_ago=timedelta(minutes=1),
    )
    make_replay(verdict="identical", title="Rename a helper")
    page = login(reviewer)
    errors = watch_errors(page)

    page.goto("/")
    rows = page.locator("#queue-rows tr.row")
    assert rows.count() == 3
    assert "selected" in rows.nth(0).get_attribute("class")
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert "selected" in rows.nth(2).get_attribute("class")
    page.keyboard.press("k")
    assert "selected" in rows.nth(1).get_attribute("class")
    page.keyboard.press("?")
    assert page.locator("#keys-help").is_visible()
    page.keyboard.press("Escape")
    assert not page.locator("#keys-help").is_visible()
    screenshot(page, "queue")

    # Enter opens the selected row (the divergent one); k-then-Enter the first.
    page.keyboard.press("k")
    expect(rows.nth(0)).to_have_class(re.compile(r"\bselected\b"))
    with page.expect_navigation(url=DETAIL):
        page.keyboard.press("Enter")
    assert opened(page) == equivalent.pk
    screenshot(page, "detail")

    with page.expect_navigation(url=DETAIL):
        page.keyboard.press("c")
    assert opened(page) == divergent.pk
    assert page.get_by_text("You hold this until").is_visible()

    page.keyboard.press("o")
    assert page.evaluate("document.activeElement.name") == "verdict_after"
    page.keyboard.press("4")  # each corrected verdict has its own digit
    assert page.evaluate("document.activeElement.value") == "inconclusive"
    with page.expect_navigation(url=DETAIL):
        page.keyboard.press("Enter")
    assert opened(page) == exhausted.pk

    page.keyboard.press("r")  # a rerun asks first
    with page.expect_navigation(url=re.compile(r".*/$")):
        page.keyboard.press("r")
    assert page.get_by_text("The queue is empty.").is_visible()
    assert page.locator("#queue-rows tr.row").count() == 0

    decisions = list(
        Review.objects.order_by("created_at").values_list(
            "replay_id", "decision", "verdict_after"
        )
    )
    assert decisions == [
        (equivalent.pk, "confirm", "equivalent"),
        (divergent.pk, "overturn", "inconclusive"),
        (exhausted.pk, "rerun", ""),
    ]
    assert Replay.objects.filter(trigger="rerun", run=exhausted.run).exists()

    # The audit trail on each page says who did what.
    for replay, action in [
        (equivalent, "review.confirm"),
        (divergent, "review.overturn"),
        (exhausted, "review.rerun"),
    ]:
        page.goto(f"/replays/{replay.pk}/")
        trail = page.locator("#audit-trail")
        row = trail.locator(f"li[data-action='{action}']")
        assert row.count() == 1
        assert row.inner_text().split(" ", 2)[2].startswith("rita ")
    assert errors == []


def test_two_reviewers_pressing_next_together_get_different_items(
    login, reviewer, screenshot
):
    first = make_replay(verdict="equivalent")
    second = make_replay(verdict="divergent")
    other = make_user("remy", "reviewer")
    pages = [login(reviewer), login(other)]
    for page in pages:
        page.goto("/")

    # Both presses are scheduled for the same instant in both browsers, so the
    # two POSTs reach the server together rather than one after the other.
    at = time.time() * 1000 + 500
    for page in pages:
        page.evaluate(
            """(at) => setTimeout(() => document.dispatchEvent(
                new KeyboardEvent("keydown", {key: "n", bubbles: true})),
                at - Date.now())""",
            at,
        )
    for page in pages:
        page.wait_for_url(DETAIL)

    got = {opened(page) for page in pages}
    assert got == {first.pk, second.pk}
    holders = dict(Claim.objects.values_list("replay_id", "reviewer__username"))
    assert holders[opened(pages[0])] == "rita"
    assert holders[opened(pages[1])] == "remy"
    # The queue says who holds what: the other reviewer by name, "you" for
    # the reader's own.
    pages[0].goto("/")
    claims = pages[0].locator("#queue-rows .holder").all_inner_texts()
    assert sorted(text.split(" · ")[0] for text in claims) == ["remy", "you"]
    screenshot(pages[0], "queue-claimed")


def test_a_lead_sees_no_decision_buttons_and_a_forged_post_is_refused(login, lead):
    replay = make_replay(verdict="equivalent")
    page = login(lead)
    errors = watch_errors(page)

    page.goto(f"/replays/{replay.pk}/")

    assert page.locator("button[name=decision]").count() == 0
    assert page.locator("#next-form").count() == 0
    assert page.get_by_text("Read only").is_visible()
    page.keyboard.press("c")
    page.keyboard.press("n")
    # A hand-made POST with a valid CSRF token is refused by permission.
    statuses = page.evaluate(
        """async (id) => {
            const headers = JSON.parse(document.body.getAttribute("hx-headers"));
            const post = (url, body) => fetch(url, {
                method: "POST", headers, body, redirect: "manual"});
            const decide = new URLSearchParams({decision: "confirm"});
            return [
                (await post(`/replays/${id}/decide/`, decide)).status,
                (await post("/next/", new URLSearchParams())).status,
            ];
        }""",
        replay.pk,
    )
    assert statuses == [403, 403]
    assert not Review.objects.exists()
    assert not Claim.objects.exists()
    assert not AuditEvent.objects.exists()
    assert Replay.objects.get(pk=replay.pk).review_band == 1
    assert errors == []


def test_planted_markup_renders_as_text_and_never_runs(
    login, reviewer, screenshot, monkeypatch
):
    payload = SCRIPT + ONERROR
    diff = (
        "diff --git a/page.html b/page.html\n--- a/page.html\n+++ b/page.html\n"
        f"@@ -0,0 +1,2 @@\n+{SCRIPT}\n+{ONERROR}\n"
    )
    replay = make_replay(
        title="Task " + payload,
        prompt="Please " + payload,
        diff=diff,
        original_patch=diff,
        replay_patch=diff,
        test_output="FAILED " + payload,
        agent_output="agent says " + payload,
    )
    # Every diff loads on demand, so htmx-inserted lines are covered too.
    monkeypatch.setattr(views, "INLINE_DIFF_LINES", 0)
    page = login(reviewer)
    errors = watch_errors(page)

    page.goto("/")
    assert page.get_by_text("Task " + SCRIPT, exact=False).is_visible()
    page.goto(f"/replays/{replay.pk}/")
    lazy = page.locator("a.load")
    for left in reversed(range(lazy.count())):
        lazy.first.click()
        page.wait_for_function(
            "n => document.querySelectorAll('a.load').length === n", arg=left
        )
    page.locator("#tests summary").first.click()

    assert page.evaluate("window.__pwned") is None
    assert page.locator("#prompt pre").inner_text() == "Please " + payload
    assert page.locator("#agent-output pre").inner_text() == "agent says " + payload
    assert page.locator("#tests pre").first.inner_text() == "FAILED " + payload
    assert page.locator("#tests pre").first.is_visible()
    code = page.locator("#dod table.diff tr.l-add td.code")
    assert code.nth(0).inner_text() == "+" + SCRIPT
    assert code.nth(1).inner_text() == "+" + ONERROR
    assert page.locator("#changes table.diff").count() == 2
    assert page.locator("script", has_text="__pwned").count() == 0
    assert page.locator("img[onerror]").count() == 0
    screenshot(page, "detail-untrusted")
    assert errors == []


def test_the_running_list_polls_until_the_replay_finishes(login, reviewer, screenshot):
    done = make_replay(verdict="divergent")
    busy = Replay.objects.create(
        run=done.run,
        project=done.project,
        status="running",
        phase="agent",
        started_at=done.finished_at,
    )
    page = login(reviewer)
    polls = []
    page.on(
        "response",
        lambda r: polls.append(r.status) if r.url.endswith("/running/") else None,
    )

    page.goto("/running/")
    assert page.locator("#running td.phase").inner_text() == "Agent"
    Replay.objects.filter(pk=busy.pk).update(phase="tests_replay")
    page.wait_for_function(
        "() => document.querySelector('#running td.phase')?.textContent"
        " === 'Tests on replay'"
    )
    screenshot(page, "running")
    Replay.objects.filter(pk=busy.pk).update(
        status="finished", phase="done", verdict="divergent", reason="Replay fails."
    )
    page.get_by_text("Nothing is waiting for a worker or running").wait_for()

    count = len(polls)
    page.wait_for_timeout(2500)
    assert len(polls) == count  # 286 stopped the polling
    assert polls[-1] == 286


def test_finished_ago_keeps_counting_on_an_open_replay_page(login, reviewer):
    replay = make_replay(verdict="divergent", finished_ago=timedelta(seconds=1))
    page = login(reviewer)
    page.goto(f"/replays/{replay.pk}/")
    ago = page.locator("#finished-ago")
    first = ago.inner_text()
    assert re.fullmatch(r"\d+s", first), first

    # Counted on as the page stays open, not frozen at what it first said.
    expect(ago).not_to_have_text(first, timeout=5000)
    later = int(ago.inner_text().removesuffix("s"))
    assert later > int(first.removesuffix("s"))
    expect(ago.locator("xpath=..")).to_have_text(re.compile(r"^finished \d+s ago$"))
