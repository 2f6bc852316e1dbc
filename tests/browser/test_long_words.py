"""A long word a user typed, said back on the page (a search, a model
filter, a refused time zone), wraps where it is shown instead of widening
the page at 1024 px: no sideways scroll, no column pushed off the edge."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from replayhub.models import Budget
from tests.browser.test_trends import seed_nights
from tests.factories import make_project, make_superuser

pytestmark = pytest.mark.browser

SIDEWAYS = "document.documentElement.scrollWidth - window.innerWidth"


def narrow(page):
    page.set_viewport_size({"width": 1024, "height": 768})
    return page


def test_a_search_for_one_long_word_wraps_in_the_empty_table(login, reviewer):
    page = narrow(login(reviewer))
    page.goto("/search/?q=" + "z" * 200)
    expect(page.locator("#search-empty")).to_contain_text("Nothing matches")
    assert page.evaluate(SIDEWAYS) == 0
    right = page.locator("main table th").last.evaluate(
        "th => th.getBoundingClientRect().right"
    )
    assert right <= 1024


def test_a_long_model_filter_wraps_in_the_trends_heading(login, lead):
    seed_nights()
    page = narrow(login(lead))
    page.goto("/trends/?since=2025-12-27&until=2026-02-20&model=" + "m" * 120)
    expect(page.locator("#trends-narrowed-out h2")).to_contain_text("model matching")
    assert page.evaluate(SIDEWAYS) == 0


def test_a_refused_long_time_zone_is_said_without_widening_the_budgets_page(
    login,
):
    Budget.objects.create(project=make_project("shop"))
    page = login(make_superuser())
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/budgets/")
    card = page.locator("#budget-shop")
    card.locator("input[name$='-timezone']").fill("Z" * 64)
    card.get_by_role("button", name="Save shop").click()
    expect(card.locator(".form-problems")).to_contain_text("not a known time zone")
    assert page.evaluate(SIDEWAYS) == 0


def test_a_long_second_opinion_note_and_label_fit_the_replay_page(login, reviewer):
    from replayhub.models import Replay
    from reviews.models import Label
    from reviews.together import opinions
    from tests.factories import make_replay

    replay = make_replay(verdict="divergent")
    Label.objects.create(
        project=replay.project,
        name="L" * 80,
        kind="category",
        categories=["c" * 60, "short"],
        required=True,
    )
    opinions.second_opinion_ask(
        replay=Replay.objects.get(pk=replay.pk), user=reviewer, note="w" * 150
    )
    page = narrow(login(reviewer))
    page.goto(f"/replays/{replay.pk}/")
    expect(page.locator("#audit-trail")).to_contain_text("w" * 20)
    assert page.evaluate(SIDEWAYS) == 0
    # The label's select in the decision bar, and the queue's label filter.
    page.goto("/")
    assert page.evaluate(SIDEWAYS) == 0
    page = narrow(login(make_superuser()))
    page.goto(f"/projects/{replay.project.slug}/review/")
    expect(page.locator("#labels-table")).to_contain_text("L" * 20)
    assert page.evaluate(SIDEWAYS) == 0


def test_a_long_provider_name_and_address_fit_its_pages(login):
    from replayhub.models import Provider

    Provider.objects.create(
        name="p" * 64,
        kind="openai",
        base_url="https://example.com/" + "v" * 400,
        key_env="K" * 128,
    )
    page = narrow(login(make_superuser()))
    page.goto("/providers/")
    assert page.evaluate(SIDEWAYS) == 0
    page.goto(f"/providers/{'p' * 64}/edit/")
    assert page.evaluate(SIDEWAYS) == 0


def test_one_long_word_in_a_runs_title_id_model_and_project_fits_every_page(
    login, reviewer
):
    """Data as users name it: a project's name at its 64-character limit, a
    run's title, id and model each one word of 100 or more characters."""
    from replayhub.models import Run
    from tests.factories import make_replay

    project = make_project("p" * 64)
    Budget.objects.create(project=project)
    run = Run.objects.create(
        project=project,
        external_id="E" * 100,
        title="T" * 120,
        prompt="P" * 300,
        model="M" * 100,
        original_commit="a" * 40,
    )
    replay = make_replay(verdict="divergent", project=project, run=run)
    # A label at its 80-character limit: the queue's and done's label filter.
    from reviews.models import Label

    Label.objects.create(project=project, name="L" * 80, kind="yes_no")
    pages = [
        "/",
        f"/replays/{replay.pk}/",
        f"/runs/{run.pk}/",
        "/search/?q=" + "T" * 120,
        "/done/",
    ]
    for user, paths in (
        (reviewer, pages),
        (make_superuser(), [f"/projects/{project.slug}/", "/budgets/"]),
    ):
        page = login(user)
        for width, height in ((1024, 768), (1280, 800)):
            page.set_viewport_size({"width": width, "height": height})
            for path in paths:
                page.goto(path)
                assert page.evaluate(SIDEWAYS) == 0, (width, path)
    # Broken, not cut: the whole title is still there to read.
    page.goto(f"/replays/{replay.pk}/")
    assert "T" * 120 in page.locator("h1").inner_text().replace("\n", "")


def test_a_tape_with_long_lines_fits_the_run_page(login, reviewer):
    """A model call's text, tool input and system prompt as one long line
    each (a minified file, a base64 blob) wrap inside the conversation."""
    from replayhub.models import Run

    call = {
        "provider_kind": "anthropic",
        "path": "/v1/messages",
        "status": 200,
        "request": {
            "model": "claude-sonnet-4-5",
            "system": "S" * 3000,
            "messages": [{"role": "user", "content": "U" * 5000}],
        },
        "response": {
            "content": [
                {"type": "text", "text": "A" * 5000},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "bash",
                    "input": {"c": "x" * 5000},
                },
            ],
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
    }
    run = Run.objects.create(
        project=make_project("shop"),
        external_id="long-tape",
        title="Long lines",
        preflight="ready",
        original_commit="a" * 40,
        raw={"tape": [call]},
    )
    page = login(reviewer)
    for width, height in ((1024, 768), (1280, 800)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"/runs/{run.pk}/")
        expect(page.locator("#tape-call-1")).to_contain_text("U" * 100)
        page.locator("#tape-call-1 details").first.evaluate("d => d.open = true")
        assert page.evaluate(SIDEWAYS) == 0, width
