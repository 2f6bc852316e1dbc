"""The upload page in a real Chromium: progress while the file goes up and is
imported, then the summary at its own address (Back returns to the form), a
refused file explained in place."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from replayhub.models import Run
from tests.browser.watch import Watch
from tests.factories import make_git_project
from tests.gitrepos import project_repo
from tests.records import EXAMPLE, jsonl, record

pytestmark = pytest.mark.browser

# Each state the page shows, in order, as the request goes; kept in the tab's
# session storage, which outlives the move to the summary's address.
RECORD_STATES = """
sessionStorage.setItem("states", "[]");
document.addEventListener("htmx:xhr:progress", function () {
  var state = document.querySelector("[data-upload-state]");
  if (!state) return;
  var states = JSON.parse(sessionStorage.getItem("states"));
  states.push(state.textContent);
  sessionStorage.setItem("states", JSON.stringify(states));
});
"""


def submit(page, path):
    """Upload ``path`` into "shop" through the form on the page."""
    page.select_option("select[name=project]", "shop")
    page.set_input_files("input[name=file]", str(path))
    page.get_by_role("button", name="Import", exact=True).click()


@pytest.fixture
def shop(tmp_path):
    return make_git_project(project_repo(tmp_path))


def test_an_upload_shows_its_progress_then_the_summary(
    login, admin_user, shop, tmp_path, screenshot
):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(EXAMPLE.read_bytes() + jsonl(record(99, prompt="x" * 200_000)))
    page = login(admin_user)
    watch = Watch(page, console_errors=True)
    watch.goto("/runs/upload/")
    page.evaluate(RECORD_STATES)

    submit(page, path)

    summary = page.locator("#summary")
    expect(summary).to_contain_text("runs.jsonl into shop")
    expect(summary.locator("tr", has_text="Imported")).to_contain_text("5")
    # The reader is taken to what happened, not left on the form above it.
    expect(summary).to_be_focused()
    expect(summary).to_be_in_viewport()
    states = page.evaluate("JSON.parse(sessionStorage.getItem('states'))")
    assert any(state.startswith("Importing") for state in states), states
    # A fresh form, ready for the next file.
    expect(page.get_by_role("button", name="Import", exact=True)).to_be_enabled()
    expect(page.locator("[data-upload-state]")).to_have_text("")
    assert Run.objects.filter(project=shop).count() == 5
    watch.check("upload summary")
    screenshot(page, "upload-summary")


def test_back_after_an_upload_returns_to_the_form_as_it_was_left(
    login, admin_user, shop, tmp_path
):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(EXAMPLE.read_bytes())
    page = login(admin_user)
    page.goto("/")
    page.goto("/runs/upload/")
    page.select_option("select[name=format]", "native")
    submit(page, path)
    summary = page.locator("#summary")
    expect(summary).to_contain_text("runs.jsonl into shop")

    page.go_back()

    expect(page).to_have_url(re.compile(r".*/runs/upload/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Upload runs")
    expect(page.locator("#summary")).to_have_count(0)
    expect(page.locator("select[name=project]")).to_have_value("shop")
    expect(page.get_by_role("button", name="Import", exact=True)).to_be_enabled()
    expect(page.locator("[data-upload-state]")).to_have_text("")
    # Forward and a reload show the summary again; neither imports the file
    # again (a second import would count its four runs as duplicates).
    page.go_forward()
    expect(summary.locator("tr", has_text="Imported")).to_contain_text("4")
    page.reload()
    expect(summary.locator("tr", has_text="Imported")).to_contain_text("4")
    expect(summary.locator("tr", has_text="Duplicates")).to_contain_text("0")
    assert Run.objects.filter(project=shop).count() == 4


def test_a_file_above_the_limit_is_explained_in_place(
    login, admin_user, shop, tmp_path, settings
):
    settings.REPLAYHUB_UPLOAD_MAX_BYTES = 1024
    path = tmp_path / "big.jsonl"
    path.write_bytes(jsonl(*(record(n) for n in range(1, 40))))
    page = login(admin_user)
    page.goto("/runs/upload/")
    submit(page, path)

    said = page.locator("#id_file_error")
    expect(said).to_contain_text("larger than the limit of 1.0")
    expect(page.get_by_role("button", name="Import", exact=True)).to_be_enabled()
    assert not Run.objects.exists()


def test_a_refused_upload_takes_the_reader_to_its_problems(
    login, admin_user, shop, tmp_path
):
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(b"{}\n")
    page = login(admin_user)
    watch = Watch(page, console_errors=True)
    watch.goto("/runs/upload/")
    page.select_option("select[name=format]", "verifiers")
    submit(page, path)

    problems = page.locator("#form-problems")
    expect(problems).to_be_focused()
    expect(problems).to_be_in_viewport()
    expect(problems).to_contain_text("Project: Project shop has no rollout settings")
    problems.get_by_role("link", name="Project").click()
    expect(page.locator("#id_project")).to_be_focused()
    assert not Run.objects.exists()
    watch.check("upload refused")


def test_a_large_file_goes_to_a_worker_and_its_page_follows_it_to_the_summary(
    login, admin_user, shop, tmp_path, settings, celery_worker
):
    settings.REPLAYHUB_UPLOAD_INLINE_MAX_BYTES = 1024
    path = tmp_path / "big.jsonl"
    path.write_bytes(jsonl(*(record(n) for n in range(1, 31))))
    page = login(admin_user)
    page.goto("/runs/upload/")
    submit(page, path)

    expect(page).to_have_url(re.compile(r".*/runs/upload/\d+/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(
        "Import of big.jsonl into shop"
    )
    summary = page.locator("#summary")
    expect(summary.locator("tr", has_text="Imported")).to_contain_text(
        "30", timeout=60_000
    )
    assert Run.objects.filter(project=shop).count() == 30
