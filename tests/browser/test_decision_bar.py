"""The sticky decision bar on a replay page whose project has labels: it
stays a thin strip at the top of the screen, and an element reached by Tab is
never left hidden under it."""

from __future__ import annotations

import pytest

from reviews.models import Label
from tests.factories import make_replay

pytestmark = pytest.mark.browser

# The focused element when the bar covers part of it (and it is not in it).
UNDER_THE_BAR = """() => {
  const el = document.activeElement;
  const bar = document.getElementById('decision');
  if (!el || bar.contains(el)) return null;
  const box = el.getBoundingClientRect();
  const cover = bar.getBoundingClientRect();
  if (box.top >= cover.bottom || box.bottom <= cover.top) return null;
  return el.id || el.outerHTML.slice(0, 80);
}"""


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_decision_bar_stays_thin_and_hides_no_focused_element(
    login, reviewer, width
):
    replay = make_replay(verdict="divergent")
    Label.objects.create(
        project=replay.project,
        name="root cause",
        kind="category",
        categories=["harness", "agent", "task"],
        required=True,
    )
    Label.objects.create(project=replay.project, name="would merge", kind="yes_no")
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 480})
    page.goto(f"/replays/{replay.pk}/")
    bar = page.locator("#decision")

    height = bar.bounding_box()["height"]
    assert height <= 110, height  # was 158 px: a fifth of the screen

    # From the foot of the page back up, Shift+Tab after Shift+Tab: each
    # element the focus lands on shows whole, not under the bar (an element
    # above the screen is scrolled to its top edge, where the bar sits).
    page.evaluate(
        "[...document.querySelectorAll('main a[href], main button')].pop().focus()"
    )
    hidden = []
    for _ in range(25):
        page.keyboard.press("Shift+Tab")
        found = page.evaluate(UNDER_THE_BAR)
        if found:
            hidden.append(found)
    assert not hidden, hidden
