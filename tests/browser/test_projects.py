"""Upload → runs → replays in Chromium: the project page, Replay now, the form."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub.models import Project, Replay, Run
from tests.browser.test_wide_screens import HEADER_LINES
from tests.browser.watch import Watch
from tests.factories import (
    make_git_project,
    make_project,
    make_replay,
    make_superuser,
)
from tests.gitrepos import project_repo
from tests.records import EXAMPLE

pytestmark = pytest.mark.browser


def test_an_admin_goes_from_an_upload_to_its_runs_and_replays_one_now(
    login, tmp_path, screenshot
):
    shop = make_git_project(project_repo(tmp_path))
    root = make_superuser()
    page = login(root)
    errors: list = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto("/runs/upload/")
    page.select_option("select[name=project]", "shop")
    page.set_input_files("input[name=file]", str(EXAMPLE))
    page.get_by_role("button", name="Import", exact=True).click()
    link = page.locator("#imported-runs a")
    expect(link).to_contain_text("imported run")
    link.click()
    page.wait_for_url(re.compile(r".*/projects/shop/\?imported_after=.*"))
    rows = page.locator("#runs tbody tr")
    expect(rows).to_have_count(Run.objects.filter(project=shop).count())
    screenshot(page, "project-runs")

    # The example's commits are not in this repository: its runs can never
    # reach a verdict, and offer no "Replay now".
    expect(page.get_by_role("button", name="Replay now")).to_have_count(0)
    first = Run.objects.create(
        project=shop, external_id="ready-one", title="Ready", preflight="ready"
    )
    page.goto("/projects/shop/")
    row = rows.filter(has_text=first.external_id)
    with page.expect_navigation(url=re.compile(r".*/replays/\d+/$")):
        row.get_by_role("button", name="Replay now").click()
    expect(page.locator(".messages")).to_contain_text(f"of {first.external_id} queued")
    replay = Replay.objects.get(run=first)
    assert replay.trigger == "now"
    expect(page.locator("#audit-trail")).to_contain_text("root started a replay now")

    # Back on the project page the run links to its replay; filters narrow it.
    page.goto("/projects/shop/")
    expect(row.locator(f'a[href="/replays/{replay.pk}/"]')).to_be_visible()
    page.select_option("select[name=status]", "never")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**status=never**")
    expect(rows.filter(has_text="ready-one")).to_have_count(0)
    expect(rows).to_have_count(Run.objects.filter(project=shop).count() - 1)
    assert errors == []


def test_an_admin_registers_a_project_and_a_mistake_is_shown_beside_its_field(
    login, tmp_path, screenshot
):
    repo = project_repo(tmp_path).path
    root = make_superuser()
    page = login(root)
    watch = Watch(page, console_errors=True)
    watch.goto("/projects/")
    page.get_by_role("link", name="Register a project").click()
    page.get_by_label("Slug").fill("cart")
    page.get_by_label("Repository", exact=True).fill(str(tmp_path / "nowhere"))
    page.get_by_label("Test command").fill("python -m pytest -q")
    page.get_by_label("Agent command").fill("./agent.sh")
    page.get_by_label("Agent time limit (s)").fill("0")
    page.get_by_label("Allowed paths").fill("[z-a].py")
    page.get_by_role("button", name="Register").click()
    # Every mistake at once, each beside its own field, in the form's words.
    errors = page.locator(".field.has-error")
    expect(errors).to_have_count(3)
    expect(errors.filter(has=page.locator("input[name=repo]"))).to_contain_text(
        "is not a git repository"
    )
    expect(
        errors.filter(has=page.locator("input[name=time_limit_seconds]"))
    ).to_contain_text("At least 1 s.")
    expect(
        errors.filter(has=page.locator("input[name=allowed_paths]"))
    ).to_contain_text("is not a valid")
    assert "--" not in " ".join(errors.all_inner_texts())
    # Told at once: the problems listed at the top, focused, each a link to
    # its field; the first of them takes the reader there.
    summary = page.locator("#form-problems")
    expect(summary).to_be_focused()
    expect(summary).to_be_in_viewport()
    expect(summary.locator("li")).to_have_count(3)
    summary.get_by_role("link", name="Agent time limit (s)").click()
    expect(page.get_by_label("Agent time limit (s)")).to_be_in_viewport()
    expect(page.get_by_label("Test command")).to_have_value("python -m pytest -q")
    watch.check("project form refused")
    screenshot(page, "project-form-error")
    assert not Project.objects.filter(slug="cart").exists()

    page.get_by_label("Repository", exact=True).fill(str(repo))
    page.get_by_label("Agent time limit (s)").fill("900")
    page.get_by_label("Allowed paths").fill("src/**")
    page.get_by_role("button", name="Register").click()
    # (The browser keeps the field's #fragment through the redirect.)
    page.wait_for_url(re.compile(r"/projects/cart/(#.*)?$"))
    watch.check("project registered")
    expect(page.locator(".messages")).to_contain_text("Registered project cart.")
    assert Project.objects.get(slug="cart").test_command == [
        "python",
        "-m",
        "pytest",
        "-q",
    ]


def test_a_reviewer_sees_runs_but_no_replay_button(login, reviewer):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.goto("/projects/")
    page.get_by_role("link", name="shop").click()
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    expect(page.get_by_role("button", name="Replay now")).to_have_count(0)
    expect(page.get_by_role("link", name="Register a project")).to_have_count(0)
    page.locator(f'#runs a[href="/replays/{replay.pk}/"]').click()
    page.wait_for_url(f"**/replays/{replay.pk}/")


@pytest.mark.parametrize("width", [1024, 1280])
def test_an_admin_removes_a_project_with_runs_by_typing_its_name(login, width):
    replay = make_replay(verdict="divergent")
    page = login(make_superuser())
    page.set_viewport_size({"width": width, "height": 900})
    watch = Watch(page, console_errors=True)
    watch.goto("/projects/shop/edit/")
    section = page.locator("#remove-project")
    expect(section).to_contain_text("It holds 1 run, 1 replay and 0 decisions")
    button = section.get_by_role("button", name="Remove project shop and its runs")

    # The browser asks for the name and the box before anything is sent.
    section.get_by_label("Yes, remove project shop").check()
    button.click()
    expect(page).to_have_url(re.compile(r"/projects/shop/edit/$"))
    assert Project.objects.filter(slug="shop").exists()

    name = section.get_by_label("Type shop, the project's name")
    name.fill("shop")
    box = name.bounding_box()
    assert box and box["x"] + box["width"] <= width
    button.click()

    page.wait_for_url("**/projects/")
    expect(page.locator(".messages")).to_contain_text(
        "Removed project shop with its 1 run, 1 replay and 0 decisions."
    )
    watch.check("project removed with its runs")
    assert not Project.objects.exists() and not Run.objects.exists()
    assert not Replay.objects.filter(pk=replay.pk).exists()


# The words of the cells under ``selector`` (split at spaces) drawn on more
# than one line: a command, a glob or a name broken mid-word.
BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()]
          .filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_projects_list_breaks_commands_at_spaces_never_mid_word(login, width):
    for n in range(2):
        project = Project.objects.create(
            slug=f"calc-{n}",
            repo_path=f"/home/reviewer/replayhub/var/demo/calc-env-865{n}",
            test_command=["python3", "-m", "pytest", "-q", "test_*.py", "-v"],
            agent_command=["sh", "agent.sh"],
            allowed_paths=["calc.py", "test_*.py"],
        )
        Run.objects.create(
            project=project,
            external_id=f"big-311{n}",
            model="claude-sonnet-4-5",
            original_commit="a" * 40,
            preflight="unreproducible",
            preflight_reason=(
                "base commit " + "b" * 40 + " is not in the project's repository:"
                " fetch it, or import the run with a base its history holds"
            ),
        )
    page = login(make_superuser())
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/projects/")
    expect(page.locator("table.projects tbody tr")).to_have_count(2)
    assert page.evaluate(BROKEN_WORDS, "table.projects tbody td") == []
    assert page.evaluate(HEADER_LINES, "table.projects") == {}, width

    # A run's page: the whole reason a run can never reach a verdict, and its
    # id and model each on one line.
    page.goto("/projects/calc-0/")
    expect(page.locator("#runs tbody")).to_contain_text(
        "import the run with a base its history holds"
    )
    assert page.evaluate(BROKEN_WORDS, "#runs tbody td code") == []


def test_a_gold_rate_out_of_range_is_refused_in_the_forms_words_and_focused(login):
    """No browser bubble stops the save first: the form's own message is
    beside the field, and the summary at the form's top has the focus."""
    make_project("shop")
    page = login(make_superuser())

    page.goto("/projects/shop/review/")
    page.get_by_label("Gold rate (%)").fill("150")
    page.get_by_role("button", name="Save policy").click()

    summary = page.locator("#form-problems")
    expect(summary).to_be_focused()
    expect(summary).to_contain_text("Gold rate (%): At most 100")
    rate = page.get_by_label("Gold rate (%)")
    expect(rate).to_have_value("150")
    expect(rate).to_have_accessible_description(re.compile("At most 100"))
