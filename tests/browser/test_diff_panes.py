"""Diffs at a laptop's width: a long line scrolls inside its own pane, never
the page: each side of the replay page's pairs, and one file's diff opened on
a page of its own."""

from __future__ import annotations

import pytest

from tests.factories import make_replay

pytestmark = pytest.mark.browser

LONG = "x = '" + "a" * 400 + "'"


def patch(path: str, line: str) -> str:
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -1 +1 @@\n-x = 1\n+{line}\n"
    )


@pytest.mark.parametrize("width", [1024, 1280])
def test_a_long_line_scrolls_its_own_pane_not_the_page(login, reviewer, width):
    replay = make_replay(
        verdict="divergent",
        original_patch=patch("src/app.py", LONG),
        replay_patch=patch("src/app.py", "x = 2"),
        diff=patch("src/app.py", LONG),
    )
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/replays/{replay.pk}/")
    pane = page.locator(".pair .sbs > .side").first
    assert LONG in pane.inner_text()

    assert page.evaluate("document.documentElement.scrollWidth") == width
    # The pane scrolls sideways on its own, and stays inside its half.
    assert pane.evaluate("p => p.scrollWidth > p.clientWidth")
    assert pane.evaluate("p => getComputedStyle(p).overflowX") == "auto"
    box = pane.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width


@pytest.mark.parametrize("width", [1024, 1280])
@pytest.mark.parametrize("kind", ["original", "dod"])
def test_a_file_opened_alone_scrolls_in_its_pane_not_the_page(
    login, reviewer, width, kind
):
    replay = make_replay(
        verdict="divergent",
        original_patch=patch("src/app.py", LONG),
        diff=patch("src/app.py", LONG),
    )
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/replays/{replay.pk}/diff/{kind}/0/")
    pane = page.locator(".file-body")
    assert LONG in pane.inner_text()

    assert page.evaluate("document.documentElement.scrollWidth") == width
    assert pane.evaluate("p => p.scrollWidth > p.clientWidth")
    # Scrolled sideways, the pane's own bar reaches the line's end.
    pane.evaluate("p => { p.scrollLeft = p.scrollWidth }")
    assert pane.evaluate("p => p.scrollLeft") > 0
