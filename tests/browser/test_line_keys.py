"""Line comments from the keyboard alone, in a real Chromium: every line
number of a diff is reached with the arrows, Esc in a box gives the focus back
to its line, and the first comment written there clears "No comments yet"."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from reviews.together.comments import comment_add
from tests.browser.test_every_page import COVERS, OBSCURED
from tests.factories import DIFF, make_replay

pytestmark = pytest.mark.browser

NEW_FILE = """\
diff --git a/src/new.py b/src/new.py
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/src/new.py
@@ -0,0 +1,2 @@
+a = 1
+b = 2
"""

FOCUSED = """() => {
  const el = document.activeElement;
  return el === document.body ? 'body' : el.getAttribute('aria-label');
}"""


def tab_to_the_line_numbers(page, table: str) -> None:
    """Tab from the top of the page to the first line number of ``table``."""
    for _ in range(150):
        page.keyboard.press("Tab")
        if page.evaluate(
            f"!!document.activeElement.closest('[data-target={table}]')"
            " && document.activeElement.hasAttribute('data-line')"
        ):
            return
    raise AssertionError(f"Tab never reached the line numbers of {table}")


def test_a_new_line_beside_old_ones_is_reached_and_commented(login, reviewer):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/replays/{replay.pk}/")
    tab_to_the_line_numbers(page, "replay")
    assert page.evaluate(FOCUSED) == "Comment on line 1 (old)"

    # Right goes across to the new side, down along it, left back across
    # to the nearest old line; up and down never left the old side before.
    page.keyboard.press("ArrowRight")
    assert page.evaluate(FOCUSED) == "Comment on line 1 (new)"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.evaluate(FOCUSED) == "Comment on line 3 (new)"
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(FOCUSED) == "Comment on line 3 (old)"
    page.keyboard.press("ArrowRight")
    assert page.evaluate(FOCUSED) == "Comment on line 4 (new)"

    page.keyboard.press("Enter")
    box = page.locator('#changes table[data-target="replay"] tr.comment-row')
    expect(box.locator(".anchor")).to_have_text("src/app.py (new), line 4")
    expect(box.locator("textarea")).to_be_focused()
    page.keyboard.type("print stays")
    page.keyboard.press("Control+Enter")
    thread = page.locator('#changes table[data-target="replay"] article.thread')
    expect(thread.locator(".body")).to_have_text("print stays")


def test_a_new_file_has_only_new_lines_and_each_is_reached(login, reviewer):
    replay = make_replay(verdict="divergent", replay_patch=NEW_FILE)
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/replays/{replay.pk}/")
    tab_to_the_line_numbers(page, "replay")
    assert page.evaluate(FOCUSED) == "Comment on line 1 (new)"
    page.keyboard.press("ArrowLeft")  # no old side: the focus stays
    assert page.evaluate(FOCUSED) == "Comment on line 1 (new)"
    page.keyboard.press("ArrowDown")
    assert page.evaluate(FOCUSED) == "Comment on line 2 (new)"
    page.keyboard.press("Enter")
    box = page.locator('#changes table[data-target="replay"] tr.comment-row')
    expect(box.locator(".anchor")).to_have_text("src/new.py (new), line 2")


def test_esc_in_a_box_gives_the_focus_back_to_its_line(login, reviewer):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/replays/{replay.pk}/")
    tab_to_the_line_numbers(page, "replay")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    box = page.locator("tr.comment-row textarea")
    expect(box).to_be_focused()
    page.keyboard.type("not now")
    page.keyboard.press("Escape")

    expect(page.locator("tr.comment-row")).to_have_count(0)
    # On the line number, not the page's body, where the next letter typed
    # was a page key: n went to the next replay, r asked for a rerun.
    assert page.evaluate(FOCUSED) == "Comment on line 2 (old)"
    page.keyboard.press("Enter")
    expect(box).to_be_focused()


def test_the_first_comment_clears_no_comments_yet(login, reviewer):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/replays/{replay.pk}/")
    section = page.locator("#comments")
    expect(section).to_contain_text("No comments yet", use_inner_text=True)

    tab_to_the_line_numbers(page, "replay")
    page.keyboard.press("Enter")
    expect(page.locator("tr.comment-row textarea")).to_be_focused()
    page.keyboard.type("the first")
    page.keyboard.press("Control+Enter")

    expect(page.locator("#comments-open")).to_have_text("1 unresolved")
    expect(section).not_to_contain_text("No comments yet", use_inner_text=True)


def test_a_page_with_a_thread_starts_at_the_top_and_a_sent_comment_keeps_its_line(
    login, reviewer
):
    replay = make_replay(verdict="divergent")
    comment_add(
        replay=replay,
        author=reviewer,
        data={
            "target": "replay",
            "path": "src/app.py",
            "side": "new",
            "line_start": 2,
            "body": "is this meant?",
        },
    )
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/replays/{replay.pk}/")
    thread = page.locator('#changes table[data-target="replay"] article.thread')
    expect(thread).to_be_visible()

    # Nothing was done yet: the first Tab is the page's first stop.
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    assert page.evaluate("window.scrollY") == 0

    # A comment sent from its box gives the focus back to its line.
    table = page.locator('#changes table[data-target="replay"]')
    table.locator('[data-side="new"][data-line="3"]').click()
    box = table.locator("tr.comment-row textarea")
    expect(box).to_be_focused()
    page.keyboard.type("and this one?")
    page.keyboard.press("Control+Enter")
    expect(thread).to_have_count(2)
    expect(table.get_by_label("Comment on line 3 (new)")).to_be_focused()


# Where the focused line number is: off the screen, under a sticky element
# (the decision bar), or null when it is in plain view.
OUT_OF_VIEW = f"""() => {{
  const box = document.activeElement.getBoundingClientRect();
  if (box.top < -1 || box.bottom > innerHeight + 1) return "off screen at " + box.top;
  return ({OBSCURED})(({COVERS})());
}}"""

# Whether the browser was left to scroll the page for each arrow key (its
# scroll is smooth, so it lands after the key's answer has been read).
HEARD = """() => {
  window.__scrolls = [];
  window.addEventListener("keydown", (event) => {
    if (event.key.startsWith("Arrow")) window.__scrolls.push(!event.defaultPrevented);
  });
}"""


def test_the_arrows_go_from_file_to_file_and_keep_the_line_in_view(login, reviewer):
    replay = make_replay(verdict="divergent", diff=DIFF + NEW_FILE)
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/replays/{replay.pk}/")
    files = page.locator('#dod table[data-target="dod"]')
    expect(files).to_have_count(2)

    # Down from the last line of the first file goes on to the next file.
    end = files.first.get_by_label("Comment on line 4 (new)")
    end.focus()
    end.evaluate("(el) => el.scrollIntoView({block: 'end'})")
    page.keyboard.press("ArrowDown")
    expect(files.last.get_by_label("Comment on line 1 (new)")).to_be_focused()
    assert page.evaluate(OUT_OF_VIEW) is None
    page.keyboard.press("ArrowUp")
    expect(files.first.get_by_label("Comment on line 4 (new)")).to_be_focused()

    # Past the last line of the last file the focus stays, and the page
    # does not scroll it away under the sticky decision bar.
    last = files.last.get_by_label("Comment on line 2 (new)")
    last.focus()
    last.evaluate("(el) => el.scrollIntoView({block: 'start'})")
    assert page.evaluate(OUT_OF_VIEW) is None
    page.evaluate(HEARD)
    for _ in range(3):
        page.keyboard.press("ArrowDown")
    expect(last).to_be_focused()
    assert page.evaluate(OUT_OF_VIEW) is None
    assert page.evaluate("window.__scrolls.splice(0)") == [False] * 3

    first = files.first.get_by_label("Comment on line 1 (old)")
    first.focus()
    first.evaluate("(el) => el.scrollIntoView({block: 'end'})")
    for _ in range(3):
        page.keyboard.press("ArrowUp")
    expect(first).to_be_focused()
    assert page.evaluate(OUT_OF_VIEW) is None
    assert page.evaluate("window.__scrolls.splice(0)") == [False] * 3
