"""Laptop and desktop widths: every link of the top bar can be clicked, the
queue and the charts fit. That no table on any page hides a column behind a
scroll bar (:data:`CLIPPED_TABLES`) is checked by the every-page sweep, on
every page, as every role, at every width."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from replayhub import roles
from replayhub.models import Comparison
from reviews.services import claim_take, review_decide
from tests.browser.test_trends import seed_nights
from tests.factories import (
    earlier_today,
    make_project,
    make_replay,
    make_superuser,
    make_user,
)

pytestmark = pytest.mark.browser

WIDTHS = [1024, 1280, 1440]

# Tables a reader cannot see whole: wider than a box that scrolls them (a
# column behind a scroll bar), or running out of a box around them (under the
# next card, or off its edge).
CLIPPED_TABLES = """() => [...document.querySelectorAll("main table")].filter(t => {
  const right = t.getBoundingClientRect().right;
  for (let box = t; box && box !== document.body; box = box.parentElement) {
    if (box.scrollWidth > box.clientWidth + 1
        && getComputedStyle(box).overflowX !== "visible") return true;
    if (box !== t && right > box.getBoundingClientRect().right + 1) return true;
  }
  return false;
}).map(t => t.id || t.className || t.outerHTML.slice(0, 60))"""


# A table's header cells drawn on more than one line, with their line counts:
# the distinct tops of the rectangles their text is drawn in.
HEADER_LINES = """(selector) => Object.fromEntries(
  [...document.querySelectorAll(selector + " thead th")].map(th => {
    const range = document.createRange();
    range.selectNodeContents(th);
    const tops = new Set([...range.getClientRects()]
      .filter(r => r.width > 0 && r.height > 0).map(r => Math.round(r.top)));
    return [th.textContent.trim(), tops.size];
  }).filter(([, lines]) => lines > 1))"""


@pytest.mark.parametrize("width", WIDTHS)
def test_every_link_of_the_top_bar_takes_a_click(login, admin_user, width):
    # Staff too: the longest bar there is, with the link to Django's admin.
    admin_user.is_staff = True
    admin_user.save(update_fields=["is_staff"])
    page = login(admin_user)
    page.set_viewport_size({"width": width, "height": 800})
    page.goto("/")
    names = page.locator(".topbar nav a").all_inner_texts()
    assert "Status" in names and "Admin" in names, names
    for name in names:
        # A link under another element fails Playwright's check that the click
        # would reach it (the hit test a trial click makes), and times out.
        page.locator(".topbar nav a", has_text=name).click(trial=True, timeout=3000)
    # And a click on the last, the one most likely crowded off, goes there.
    link = page.locator(".topbar nav a", has_text=names[-1])
    href = link.get_attribute("href")
    link.click(timeout=3000)
    page.wait_for_url(f"**{href}")
    # Two rows at most: the brand, search and user, then the links; the
    # search box shows its whole hint.
    page.goto("/")
    rows = page.evaluate(
        """() => [...document.querySelectorAll('.topbar > *, .topbar nav a')]
          .filter(e => e.tagName !== 'NAV')
          .map(e => e.getBoundingClientRect().top).sort((a, b) => a - b)
          .filter((top, i, tops) => i === 0 || top - tops[i - 1] > 12).length"""
    )
    assert rows <= 2, rows
    link_rows = page.locator(".topbar nav a").evaluate_all(
        "as => new Set(as.map(a => Math.round(a.getBoundingClientRect().top))).size"
    )
    assert link_rows == 1, "the links in one row"
    # Read in the order a Tab takes them: no part of the bar drawn above one
    # that comes before it.
    tops = page.locator(".topbar > *").evaluate_all(
        "parts => parts.map(p => Math.round(p.getBoundingClientRect().top))"
    )
    assert all(b >= a - 12 for a, b in pairwise(tops)), tops
    search = page.locator(".top-search input")
    assert search.evaluate(
        "i => { i.value = i.placeholder; return i.scrollWidth <= i.clientWidth + 1 }"
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_queue_fits_the_screen_and_never_opens_scrolled_sideways(
    login, reviewer, screenshot, width
):
    project = make_project("payments-reconciliation")
    made = [
        make_replay(
            verdict="divergent",
            project=project,
            title=f"Round invoice totals half-even in every currency, take {n}",
            model="claude-sonnet-4-5-20250929-with-a-long-variant",
        )
        for n in range(3)
    ]
    # A run replayed twice (its row says so) and a row someone holds.
    make_replay(verdict="divergent", project=project, run=made[0].run)
    claim_take(replay=made[1], reviewer=make_user("theodora", roles.REVIEWER))
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 800})
    page.goto("/")
    page.locator("#queue-rows tr.row").first.wait_for()
    expect(page.locator("#queue-rows .replays")).to_have_text("2 replays")
    page.keyboard.press("j")
    page.keyboard.press("j")
    screenshot(page, f"queue-{width}")
    overflow = "document.documentElement.scrollWidth - window.innerWidth"
    assert page.evaluate(overflow) <= 0, width
    assert page.evaluate("window.scrollX") == 0
    last = page.locator("table.queue thead th").last.bounding_box()
    assert last is not None and last["x"] + last["width"] <= width
    # Each column's name on one line: none broken onto a second or third.
    assert page.evaluate(HEADER_LINES, "table.queue") == {}, width


# How many lines each element's text is drawn on: the middles of its text's
# rectangles, one line for those within 8 px of each other (a <kbd>'s box
# sits a little higher than the words beside it).
LINES = """(elements) => elements.map(e => {
  const range = document.createRange();
  range.selectNodeContents(e);
  const middles = [...range.getClientRects()].filter(r => r.width > 0)
    .map(r => (r.top + r.bottom) / 2).sort((a, b) => a - b);
  return middles.filter((m, i) => i === 0 || m - middles[i - 1] > 8).length;
})"""


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_queue_head_and_rows_keep_to_their_lines_beside_my_progress(
    login, reviewer, width
):
    project = make_project("demo-env")
    done = make_replay(verdict="divergent", project=project, queued=True)
    review_decide(replay=done, reviewer=reviewer, decision="confirm")
    # Today's, so that the exact time is the time alone; one offset for all,
    # so that they finish in the order they are made even just after midnight.
    ago = earlier_today()
    rows = [
        make_replay(
            verdict="divergent",
            project=project,
            title=f"Implement add() with a bug (tests need greetlib) {n}",
            model="coder-small",
            queued=True,
            finished_ago=ago,
        )
        for n in range(3)
    ]
    Comparison.objects.filter(replay__in=rows).update(
        files_changed=1, insertions=1, deletions=1, substantive_files=1
    )
    claim_take(replay=rows[0], reviewer=reviewer)
    held = claim_take(replay=rows[1], reviewer=make_user("reviewer2", roles.REVIEWER))
    held.expires_at = timezone.now() + timedelta(seconds=90)
    held.save(update_fields=["expires_at"])
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 800})
    page.goto("/")
    expect(page.locator("#my-progress")).to_be_visible()
    selected = page.locator("#queue-rows tr.row.selected")
    for _ in rows:  # down to the row reviewer2 holds, its details shown
        page.keyboard.press("j")
        if "reviewer2" in selected.inner_text():
            break
    expect(selected).to_contain_text("reviewer2 · 1m left")

    def lines(selector: str) -> list[int]:
        return page.locator(selector).evaluate_all(LINES)

    assert lines(".page-head h1, #assigned-to-me, #next-form button") == [1, 1, 1]
    # The age on one line, the exact time under it on one more.
    assert lines("#queue-rows tr.row.selected td:nth-child(6) > *") == [1, 1]
    assert lines("#queue-rows tr.row .project, #queue-rows tr.row code") == [1] * 6
    assert set(lines("#queue-rows .holder")) == {1}
    holder = selected.locator(".holder").bounding_box()
    cell = selected.locator("td").last.bounding_box()
    assert (
        holder and cell and holder["x"] + holder["width"] <= cell["x"] + cell["width"]
    )
    if width >= 1280:
        # Files, lines and "substantive" on one line.
        diff = page.locator("#queue-rows tr.row:not(.selected) td.num").first
        assert (
            diff.evaluate(
                """td => new Set([...td.children].filter(e => e.offsetParent !== null
                 && getComputedStyle(e).position !== 'absolute')
               .map(e => Math.round(e.getBoundingClientRect().top))).size"""
            )
            == 1
        )


def test_the_first_tab_skips_the_top_bar_to_the_page(login, reviewer):
    page = login(reviewer)
    page.goto("/")
    skip = page.locator(".skip-link")
    assert not skip.is_visible() or skip.bounding_box()["y"] < 0

    page.keyboard.press("Tab")

    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    assert skip.bounding_box()["y"] >= 0  # shown while it has the focus
    page.keyboard.press("Enter")
    page.wait_for_function("document.activeElement.id === 'content'")
    # The next Tab goes on from the page, not from the top bar's first link.
    page.keyboard.press("Tab")
    inside = "document.getElementById('content').contains(document.activeElement)"
    assert page.evaluate(inside)


def test_the_admins_top_bar_keeps_to_one_line_at_1024_px(login):
    page = login(make_superuser())
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto("/admin/")
    name = page.locator("#site-name").bounding_box()
    tools = page.locator("#user-tools").bounding_box()
    assert name and tools
    # Side by side, the links right of the name, not stacked under it.
    assert tools["y"] < name["y"] + name["height"] <= tools["y"] + tools["height"] + 8
    assert tools["x"] > name["x"] + name["width"]
    assert page.locator("#header").bounding_box()["height"] < 60


@pytest.mark.parametrize("width", [*WIDTHS, 1920])
def test_no_trends_chart_is_drawn_smaller_than_its_own_size(login, lead, width):
    """A chart squeezed beside its table shrinks its 11 px axis text with it
    (9.7 px at 1280): each is drawn at least at its viewBox's width."""
    seed_nights()
    page = login(lead)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/trends/?since=2025-12-27&until=2026-02-20")
    page.wait_for_function("() => !document.querySelector('[hx-trigger=load]')")
    shrunk = page.locator("svg.chart").evaluate_all(
        """charts => charts
          .map(c => [c.closest('[id]')?.id, c.getBoundingClientRect().width,
                     c.viewBox.baseVal.width])
          .filter(([, drawn, own]) => own && drawn < own - 1)"""
    )
    assert page.locator("svg.chart").count() >= 5
    assert shrunk == [], shrunk


def test_the_checks_take_the_pages_width_at_1024_px(login, reviewer):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 800})
    page.goto(f"/replays/{replay.pk}/")
    checks = page.locator("#checks").bounding_box()
    main = page.locator("main").bounding_box()
    assert checks and main
    assert checks["width"] >= main["width"] * 0.85, (checks, main)
    # A check's sentence on a line or two, not a word or two a line.
    heights = page.locator("#checks td.detail").evaluate_all(
        "cells => cells.map(c => c.getBoundingClientRect().height)"
    )
    assert heights and max(heights) <= 60, heights


def test_the_replay_head_at_1024_after_a_decision(login, reviewer):
    replay = make_replay(verdict="divergent", queued=True)
    review_decide(
        replay=replay, reviewer=make_user("cole", "reviewer"), decision="confirm"
    )
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 800})
    page.goto(f"/replays/{replay.pk}/")
    # The corrected verdict's placeholder whole in its box, arrow beside it.
    select = page.locator("#id_verdict_after")
    room, text = select.evaluate(
        """s => { const probe = document.createElement('span');
          probe.style.font = getComputedStyle(s).font;
          probe.style.whiteSpace = 'pre';
          probe.textContent = s.options[s.selectedIndex].text;
          document.body.append(probe);
          const text = probe.getBoundingClientRect().width;
          probe.remove();
          return [s.clientWidth, text] }"""
    )
    assert room >= text + 20, (room, text)
    # Its words whole: a placeholder ending in "…" reads as one cut off.
    expect(select.locator("option:checked")).to_have_text("Choose a corrected verdict")
    bar = page.locator("#decision > button, #id_verdict_after, .overturn > button")
    middles = bar.evaluate_all(
        "es => es.map(e => { const r = e.getBoundingClientRect();"
        " return (r.top + r.bottom) / 2 })"
    )
    # Confirm, the select, Overturn and Rerun on one line.
    assert len(middles) == 4 and max(middles) - min(middles) < 8, middles
    summary = page.locator(".ask-second summary")
    assert summary.evaluate_all(LINES) == [1]
    # Opened, its form drops over the page: the title stays where it was.
    title = page.locator(".replay-head h1").bounding_box()
    summary.click()
    expect(page.locator(".ask-second input[name=note]")).to_be_visible()
    assert page.locator(".replay-head h1").bounding_box() == title
    # The comment box under a line: its buttons in the page's type, not the diff's.
    page.locator('[data-side="new"][data-line]').first.click()
    buttons = page.locator(".comment-row button")
    expect(buttons.first).to_be_visible()
    fonts = buttons.evaluate_all("bs => bs.map(b => getComputedStyle(b).fontFamily)")
    assert fonts and not any("monospace" in font for font in fonts), fonts
