"""The Done tab in a real Chromium: a select applies as it changes, as on the
queue, with one history entry that Back leaves; the Model box on Enter, kept
for Back."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from reviews.services import review_decide
from tests.factories import make_replay

pytestmark = pytest.mark.browser


def test_a_select_applies_as_it_changes(login, reviewer):
    for title, decision in (("Round totals", "confirm"), ("Parse dates", "rerun")):
        review_decide(
            replay=make_replay(verdict="divergent", title=title),
            reviewer=reviewer,
            decision=decision,
        )
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto("/done/")
    rows = page.locator("#done-rows tr.row")
    expect(rows).to_have_count(2)
    start = page.evaluate("history.length")

    page.locator("form.filters select[name=decision]").select_option("rerun")

    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("Parse dates")
    assert "decision=rerun" in page.url
    assert page.evaluate("history.length") == start + 1
    page.go_back()
    expect(rows).to_have_count(2)


def test_the_model_box_applies_on_enter_and_back_keeps_it(login, reviewer):
    for title, model in (("Round totals", "Coder-Small"), ("Parse dates", "gpt-5")):
        review_decide(
            replay=make_replay(verdict="divergent", title=title, model=model),
            reviewer=reviewer,
            decision="confirm",
        )
    page = login(reviewer)
    page.goto("/done/")
    rows = page.locator("#done-rows tr.row")
    expect(rows).to_have_count(2)

    box = page.get_by_label("Model")
    box.fill("coder")
    box.press("Enter")

    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("Round totals")
    assert "model=coder" in page.url
    page.goto("/done/")
    expect(rows).to_have_count(2)
    page.go_back()
    expect(rows).to_have_count(1)
    expect(page.get_by_label("Model")).to_have_value("coder")
