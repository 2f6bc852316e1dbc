"""A required label refused on the decision bar keeps its whole name beside
the refusal, at a laptop's width."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from reviews.models import Label
from tests.factories import make_replay

pytestmark = pytest.mark.browser

CUT = "el => el.scrollWidth > el.clientWidth"


def with_required_cause(replay):
    """``replay``, its project asking a required "Cause" (flaky or real) of
    every decision."""
    Label.objects.create(
        project=replay.project,
        name="Cause",
        kind="category",
        categories=["flaky", "real"],
        required=True,
    )
    return replay


@pytest.mark.parametrize("width, height", [(1024, 768), (1280, 800)])
def test_a_refused_required_label_keeps_its_whole_name(login, reviewer, width, height):
    replay = with_required_cause(make_replay(verdict="divergent"))
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"/replays/{replay.pk}/")
    page.locator("main").click(position={"x": 5, "y": 5})
    page.keyboard.press("c")
    label = page.locator("#labels label", has_text="Cause")
    expect(label.locator(".error")).to_contain_text("Cause")
    name = label.locator(".label-name")
    expect(name).to_have_text("Cause")
    assert not name.evaluate(CUT), width
