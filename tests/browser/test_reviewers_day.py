"""A reviewer's day, end to end in Chromium at three laptop widths: claim,
read, comment at a line, label by key, decide, undo, ask a second opinion,
and the notice that brought them there cleared; not one console error or
CSP report on the way."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub import roles
from reviews.models import Claim, Label, Notice, Review, SecondOpinion
from reviews.together import comments
from tests.browser.watch import Watch
from tests.factories import make_replay, make_user

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1024, 1280, 1440])
def test_a_reviewers_day(login, reviewer, width, screenshot):
    sam = make_user("sam", roles.REVIEWER)
    replay = make_replay(verdict="divergent", title="Round totals half-even")
    Label.objects.create(
        project=replay.project,
        name="root cause",
        kind="category",
        categories=["harness", "agent"],
    )
    comments.comment_add(
        replay=replay,
        author=sam,
        data={
            "target": "dod",
            "path": "src/app.py",
            "side": "new",
            "line_start": 2,
            "line_end": 2,
            "body": "@rita is x = 2 intended?",
        },
    )
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 900})
    errors: list[str] = []
    page.on(
        "console",
        lambda message: (
            errors.append(message.text) if message.type == "error" else None
        ),
    )
    watch = Watch(page)

    watch.goto("/")
    expect(page.locator("#inbox-badge")).to_have_text("1")
    # Claim: n takes the next item and opens it.
    with page.expect_navigation():
        page.keyboard.press("n")
    expect(page).to_have_url(re.compile(rf"/replays/{replay.pk}/$"))
    assert Claim.objects.get().reviewer == reviewer
    # The notice is read with the page, and sam's thread sits at its line.
    expect(page.locator("#inbox-badge")).to_have_count(0)
    assert not Notice.objects.filter(user=reviewer, read_at__isnull=True).exists()
    expect(page.locator("#dod tr.thread-row article.thread")).to_contain_text(
        "is x = 2 intended?"
    )

    # Comment at a line.
    page.locator('#dod [data-side="new"][data-line="3"]').click()
    page.locator("#dod tr.comment-row textarea").fill("y is new; harmless.")
    page.locator("#dod tr.comment-row textarea").press("Control+Enter")
    expect(page.locator("#dod tr.thread-row article.thread")).to_have_count(2)
    watch.check("after commenting at a line")

    # Label by key, then decide.
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("a")
    expect(page.locator("#labels select")).to_have_value("harness")
    with page.expect_navigation():
        page.keyboard.press("c")
    watch.check("after deciding")
    assert Review.objects.get().decision == "confirm"

    # Undo from the bar.
    expect(page.locator("#undo")).to_be_visible()
    with page.expect_navigation():
        page.keyboard.press("z")
    assert Review.objects.get().undone_at is not None
    watch.check("after undoing")

    # Ask for a second opinion on it.
    watch.goto(f"/replays/{replay.pk}/")
    page.locator(".ask-second summary").click()
    page.locator(".ask-second input[name=note]").fill("not sure about y")
    page.locator(".ask-second").get_by_role("button", name="Ask").click()
    expect(page.locator("#opinion-open")).to_be_visible()
    assert SecondOpinion.objects.count() == 1
    screenshot(page, f"reviewers-day-{width}")
    watch.check("after asking a second opinion")
    assert errors == []
