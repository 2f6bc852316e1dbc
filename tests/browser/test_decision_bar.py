"""The sticky decision bar on a replay page whose project has labels: it
stays a thin strip at the top of the screen, and an element reached by Tab is
never left hidden under it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from reviews.models import Label
from reviews.services import review_decide
from reviews.together import comments
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


# The bar's height, or None once it no longer stays at the top of the screen.
BAR_HEIGHT = """() => {
  const bar = document.getElementById('decision');
  if (getComputedStyle(bar).position !== 'sticky') return null;
  return bar.getBoundingClientRect().height;
}"""


def _labelled_replay():
    replay = make_replay(verdict="divergent")
    cause = Label.objects.create(
        project=replay.project,
        name="root cause",
        kind="category",
        categories=["harness", "agent", "task"],
        required=True,
    )
    Label.objects.create(project=replay.project, name="would merge", kind="yes_no")
    return replay, cause


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_bar_keeps_to_a_sixth_of_the_screen_in_every_state(login, reviewer, width):
    replay, cause = _labelled_replay()
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 768})
    bound = 768 / 6
    heights = {}
    page.goto(f"/replays/{replay.pk}/")
    heights["undecided"] = page.evaluate(BAR_HEIGHT)
    page.locator("#id_note").focus()
    heights["note focused"] = page.evaluate(BAR_HEIGHT)
    page.locator("#id_note").fill("a first line\nand a second")
    heights["note written"] = page.evaluate(BAR_HEIGHT)
    page.keyboard.press("Escape")

    # Confirm without the required label: refused in place, the reason in
    # the bar.
    page.locator("#id_note").fill("")
    page.locator("body").click(position={"x": 5, "y": 700})
    page.keyboard.press("c")
    expect(page.locator("#decision .error").first).to_be_visible()
    heights["refused"] = page.evaluate(BAR_HEIGHT)
    page.locator("#id_note").focus()
    heights["refused, note focused"] = page.evaluate(BAR_HEIGHT)

    review_decide(
        replay=replay, reviewer=reviewer, decision="confirm", labels={cause.pk: "agent"}
    )
    page.goto(f"/replays/{replay.pk}/")
    expect(page.locator("#decision")).to_contain_text("Already decided")
    heights["decided"] = page.evaluate(BAR_HEIGHT)
    page.locator("#id_note").focus()
    heights["decided, note focused"] = page.evaluate(BAR_HEIGHT)

    # At 1024 px it was 139 px once decided, 174 with the note focused too.
    tall = {state: h for state, h in heights.items() if h is None or h > bound}
    assert not tall, heights


def test_a_link_to_a_thread_lands_below_the_bar(login, reviewer):
    # Decided already: the bar was at its tallest there, 139 px.
    replay, cause = _labelled_replay()
    review_decide(
        replay=replay, reviewer=reviewer, decision="confirm", labels={cause.pk: "agent"}
    )
    thread = comments.comment_add(
        replay=replay,
        author=reviewer,
        data={
            "target": "dod",
            "path": "src/app.py",
            "side": "new",
            "line_start": 2,
            "line_end": 3,
            # A long thread: centred on the screen, its top was under the bar.
            "body": "Is y right here? " * 150,
        },
    )
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/replays/{replay.pk}/#thread-{thread.pk}")
    target = page.locator(f"#thread-{thread.pk}")
    expect(target).to_be_in_viewport()
    top = target.bounding_box()["y"]
    bar = page.locator("#decision").bounding_box()
    assert top >= bar["y"] + bar["height"], (top, bar)
