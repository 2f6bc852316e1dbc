"""A newcomer's first days on the replay page at 1024 and 1280 px: what the
keyboard reaches is never under the open "Ask for a second opinion" box, and
claiming a replay keeps the queue's filter it was opened in."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.factories import make_project, make_replay

pytestmark = pytest.mark.browser

# What the page shows at the focused element's centre: "ok" when it is the
# element (or inside it), else what covers it.
AT_FOCUS = """() => {
  const el = document.activeElement;
  const box = el.getBoundingClientRect();
  const top = document.elementFromPoint(box.left + box.width / 2,
                                        box.top + box.height / 2);
  if (top && (top === el || el.contains(top))) return "ok";
  return top ? top.outerHTML.slice(0, 80) : "nothing";
}"""


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_open_second_opinion_box_hides_no_focused_field(login, admin_user, width):
    replay = make_replay(verdict="divergent")
    page = login(admin_user)
    page.set_viewport_size({"width": width, "height": 768})
    page.goto(f"/replays/{replay.pk}/")
    summary = page.locator(".ask-second summary")
    # Tab by Tab to the summary, as a keyboard user gets there.
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('.ask-second summary')"):
            break
    expect(summary).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".ask-second")).to_have_attribute("open", "")
    note = page.locator("#decision [name=note]")
    covered = []
    for _ in range(30):
        page.keyboard.press("Tab")
        found = page.evaluate(AT_FOCUS)
        if found != "ok":
            covered.append(found)
        if page.evaluate("document.activeElement.matches('#decision [name=note]')"):
            break
    expect(note).to_be_focused()
    assert not covered, covered


def test_claiming_keeps_the_queue_filter_and_u_goes_back_to_it(login, reviewer):
    demo_env = make_project("demo-env")
    replay = make_replay(verdict="divergent", project=demo_env)
    make_replay(verdict="divergent", project=make_project("other"))
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto("/?project=demo-env&verdict=divergent")
    expect(page.locator("#queue-rows tr.row")).to_have_count(1)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    kept = re.compile(rf"/replays/{replay.pk}/\?project=demo-env&verdict=divergent$")
    page.wait_for_url(kept)

    with page.expect_navigation():
        page.get_by_role("button", name="Claim").click()
    page.wait_for_url(kept)
    expect(page.locator("#claim-mine")).to_be_visible()

    with page.expect_navigation():
        page.keyboard.press("u")
    page.wait_for_url(re.compile(r"/\?project=demo-env&verdict=divergent&at=\d+$"))
    expect(page.locator("#queue-rows tr.row")).to_have_count(1)
