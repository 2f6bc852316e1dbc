"""Phones, tablets and small laptops: nothing falls off the top bar, and the
queue, the replay page and the projects page fit their width (long values
wrap; wide tables scroll inside their own box)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from replayhub.models import Project
from tests.factories import make_project, make_replay

pytestmark = pytest.mark.browser

OVERFLOW = "document.documentElement.scrollWidth - window.innerWidth"


def inside(page, locator, width: int) -> None:
    box = locator.bounding_box()
    assert box is not None, locator
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (locator, box)


@pytest.mark.parametrize("width", [420, 768])
def test_the_top_bar_and_the_pages_fit_the_screen(login, reviewer, screenshot, width):
    replay = make_replay(
        verdict="divergent",
        title="Round invoice totals half-even in every currency the shop sells",
    )
    page = login(reviewer)
    page.set_viewport_size({"width": width, "height": 900})
    for path in ["/", f"/replays/{replay.pk}/", "/projects/", "/budgets/"]:
        page.goto(path)
        assert page.evaluate(OVERFLOW) <= 0, (path, width)
        inside(page, page.locator(".topbar .who span"), width)
        inside(page, page.locator(".topbar [data-keys-help]"), width)
        inside(page, page.locator(".topbar nav a").last, width)
        screenshot(page, f"w{width}{path.replace('/', '-')}")

    page.goto(f"/replays/{replay.pk}/")
    for name in ("Confirm", "Overturn", "Rerun"):
        button = page.get_by_role("button", name=name)
        expect(button).to_be_visible()
        inside(page, button, width)
    page.goto("/")
    row = page.locator("#queue-rows tr.row").first
    expect(row.locator("a")).to_be_visible()
    # The task's title is on the screen, not scrolled off the table's edge.
    inside(page, row.locator("td.title a"), width)
    # The queue's table scrolls inside its box; the page itself does not.
    assert page.evaluate(OVERFLOW) <= 0


def realistic_project() -> Project:
    """A project as teams register them: long globs and a long test command."""
    project = make_project("payments")
    project.repo_path = "/srv/git/payments-reconciliation-service.git"
    project.test_command = [
        "python",
        "-m",
        "pytest",
        "-q",
        "tests/payments/reconciliation/test_ledger_reconciliation_rounding.py",
    ]
    project.agent_command = [
        "sh",
        "-c",
        "exec ./agent.sh --task-file /work/task.json --max-steps 40",
    ]
    project.allowed_paths = [
        "src/payments/reconciliation/**/*.py",
        "tests/payments/**/*.py",
        "docs/payments/**",
    ]
    project.save()
    return project


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_projects_page_fits_with_long_commands_and_paths(
    login, lead, screenshot, width
):
    realistic_project()
    page = login(lead)
    page.set_viewport_size({"width": width, "height": 768})
    page.goto("/projects/")
    assert page.evaluate(OVERFLOW) <= 0, width
    # What does not fit scrolls inside its own box, which the keyboard reaches.
    table = page.get_by_role("region", name="Projects")
    expect(table).to_have_attribute("tabindex", "0")
    expect(table.locator("code", has_text="docs/payments/**")).to_be_visible()
    screenshot(page, f"w{width}-projects")


def test_agent_output_wider_than_its_box_scrolls_from_the_keyboard(login, reviewer):
    replay = make_replay(
        verdict="equivalent",
        agent_output="ran: " + " ".join(f"--flag-{n}=value" for n in range(60)),
    )
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"/replays/{replay.pk}/")
    log = page.get_by_role("region", name="Agent output")
    assert log.evaluate("el => el.scrollWidth > el.clientWidth")
    assert page.evaluate(OVERFLOW) <= 0

    log.focus()  # a Tab stop of its own
    expect(log).to_have_attribute("tabindex", "0")
    page.keyboard.press("End")
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('#agent-output pre').scrollLeft > 0"
    )


@pytest.mark.parametrize("width, height", [(1024, 768), (1280, 800)])
def test_one_long_command_leaves_every_projects_columns_on_the_screen(
    login, lead, width, height
):
    realistic_project()
    long = make_project("long")
    long.agent_command = ["./agent", "--option=" + "o" * 200]
    long.test_command = ["pytest", *(f"tests/test_part_{n}.py" for n in range(60))]
    long.save()
    page = login(lead)
    page.set_viewport_size({"width": width, "height": height})
    page.goto("/projects/")
    table = page.locator("table.projects")
    # No column behind the box's scroll bar: the table is as wide as its box.
    assert (
        table.evaluate("t => t.parentElement.scrollWidth - t.parentElement.clientWidth")
        <= 0
    )
    inside(page, table.locator("th", has_text="Last import"), width)
    # A command is shown in two lines at most, whole in its title.
    row = table.locator("tr", has=page.get_by_role("link", name="long", exact=True))
    command = row.locator("code", has_text="--option=")
    expect(command).to_have_attribute("title", "./agent --option=" + "o" * 200)
    line = command.evaluate("c => parseFloat(getComputedStyle(c).lineHeight)")
    for code in row.locator("code.clamp").all():
        assert code.bounding_box()["height"] <= 2 * line + 1
    assert page.evaluate(OVERFLOW) <= 0
