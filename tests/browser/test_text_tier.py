"""The text tier in a real Chromium: the run page's button, a real worker's
answer appearing in place, and the side-by-side view."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from replayhub.demo.model_api import StandInProvider
from replayhub.models import Provider, TextReplay, TextSuite
from tests.browser.watch import Watch
from tests.conftest import DEMO_KEY_ENV, TEXT_PRICES
from tests.factories import make_text_run

pytestmark = pytest.mark.browser


@pytest.fixture
def standin():
    with StandInProvider(key=os.environ[DEMO_KEY_ENV]) as server:
        yield server


def test_an_admin_replays_a_run_as_text_and_reads_it_side_by_side(
    login, admin_user, celery_worker, standin, screenshot
):
    Provider.objects.create(
        name="gpt",
        kind="openai",
        base_url=standin.base_url + "/v1",
        key_env=DEMO_KEY_ENV,
        prices=TEXT_PRICES,
    )
    Provider.objects.create(
        name="claude", kind="anthropic", base_url=standin.base_url, key_env=DEMO_KEY_ENV
    )
    standin.replies = [
        "add a retry to the sender <b>now</b>",
        '{"score": 8, "rationale": "Both add the retry; <i>same</i> place."}',
    ]
    run = make_text_run(title="Retry webhooks")
    page = login(admin_user)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(f"/runs/{run.pk}/")
    expect(page.get_by_role("heading", name="Text tier")).to_contain_text(
        "not a reproduction"
    )
    page.get_by_label("Provider", exact=True).select_option("gpt")
    page.get_by_label("Model", exact=True).fill("gpt-test")
    page.get_by_label("Judge provider").select_option("claude")
    page.get_by_label("Judge model").fill("claude-test")
    page.get_by_role("button", name="Replay as text").click()

    # The worker answers; the list updates itself, without a reload.
    row = page.locator("tr.text-replay-row").first
    expect(row.locator(".similarity")).to_have_text("0.667", timeout=30_000)
    expect(row).to_contain_text("8/10")
    expect(row).to_contain_text("gpt:gpt-test")
    assert page.url.endswith(f"/runs/{run.pk}/")
    screenshot(page, "text-tier-run-page")

    row.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(
        "text tier · not a reproduction"
    )
    expect(page.locator("#similarity")).to_have_text("0.667")
    expect(page.locator("#score")).to_have_text("8/10")
    expect(page.locator("#rationale")).to_have_text(
        "Both add the retry; <i>same</i> place."
    )
    expect(page.locator("#original-output")).to_have_text(
        "add a retry to the webhook sender"
    )
    expect(page.locator("#replayed-output")).to_have_text(
        "add a retry to the sender <b>now</b>"
    )
    assert page.locator("#replayed-output b").count() == 0
    assert standin.key not in page.content()
    screenshot(page, "text-tier-side-by-side")
    assert errors == []
    assert TextReplay.objects.get().requested_by == admin_user


def test_an_admin_runs_a_suite_again_and_a_worker_finishes_it(
    login, admin_user, celery_worker, standin
):
    Provider.objects.create(
        name="gpt",
        kind="openai",
        base_url=standin.base_url + "/v1",
        key_env=DEMO_KEY_ENV,
        prices=TEXT_PRICES,
    )
    run = make_text_run(title="Retry webhooks")
    make_text_run(external_id="no-output", output="")
    first = TextSuite.objects.create(
        project=run.project,
        target="gpt:gpt-test",
        total=1,
        replayed=1,
        mean_similarity=0.25,
        finished_at=run.imported_at,
    )
    standin.replies = ["add a retry to the sender"]
    page = login(admin_user)
    watch = Watch(page, console_errors=True)
    watch.goto("/text-suites/")

    page.get_by_role("button", name=f"Run now (suite #{first.pk} again)").click()

    again = TextSuite.objects.exclude(pk=first.pk).get()
    expect(page.locator("ul.messages")).to_contain_text(f"Suite #{again.pk} queued")
    # The worker selects the suite's runs, answers the one with output and
    # writes the summary; the page says how it ended.
    row = page.locator("#suites tbody tr", has_text=f"#{again.pk}")
    for _ in range(60):
        page.reload()
        if "running" not in row.inner_text() and "queued" not in row.inner_text():
            break
        page.wait_for_timeout(500)
    cells = row.locator("td").all_inner_texts()
    assert cells[4:9] == ["2", "1", "1", "0", "0.857"], cells
    assert TextReplay.objects.get(suite=again).run == run
    watch.check("suite run again")


def test_replay_as_text_pressed_twice_quickly_queues_one_and_says_so(
    login, admin_user, standin, monkeypatch
):
    # What is under test is the page and the request while the replay waits:
    # the queued task is kept here, so that a worker of the session (one may
    # run on this test worker) cannot answer it before the second press.
    sent = []
    monkeypatch.setattr(
        "replayhub.texttier.services.enqueue", lambda *task: sent.append(task)
    )
    Provider.objects.create(
        name="gpt",
        kind="openai",
        base_url=standin.base_url + "/v1",
        key_env=DEMO_KEY_ENV,
    )
    run = make_text_run(title="Retry webhooks")
    page = login(admin_user)
    watch = Watch(page, console_errors=True)
    watch.goto(f"/runs/{run.pk}/")
    page.get_by_label("Provider", exact=True).select_option("gpt")
    page.get_by_label("Model", exact=True).fill("gpt-test")
    button = page.get_by_role("button", name="Replay as text")

    # Two presses in the same instant, the answer held back: the button is
    # disabled while the request is on its way.
    held = []
    page.route(f"**/runs/{run.pk}/text/", lambda route: held.append(route))
    button.evaluate("b => { b.click(); b.click(); }")
    expect(button).to_be_disabled()
    # The route's handler runs while Playwright waits: give the first request
    # time to arrive, and a second one, had the button let it through.
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(50)
    page.wait_for_timeout(300)
    assert len(held) == 1
    held[0].continue_()
    page.unroute(f"**/runs/{run.pk}/text/")

    status = page.get_by_role("status").filter(has_text="Text replay #")
    expect(status).to_contain_text("asking gpt:gpt-test is queued")
    expect(status).to_contain_text("This line and the list update by themselves.")
    expect(page.locator("tr.text-replay-row")).to_have_count(1)
    expect(page.get_by_role("alert")).to_have_count(0)
    row = TextReplay.objects.get()
    assert row.status == "queued"

    # Pressed again while it waits: refused in one line, nothing queued.
    page.get_by_label("Model", exact=True).fill("gpt-test")
    button.click()
    expect(page.get_by_role("alert")).to_have_text(
        f"Not queued again: text replay #{row.pk} already asks gpt:gpt-test "
        "and is queued; its result appears below."
    )
    expect(status).to_contain_text("is queued")
    assert TextReplay.objects.count() == 1
    assert len(sent) == 1

    # A worker takes it: the line follows without a reload.
    TextReplay.objects.claim(row.pk)
    expect(status).to_contain_text("asking gpt:gpt-test is running")
    watch.check("text replay pressed twice")


def test_a_refused_replay_as_text_focuses_its_problems_each_beside_its_field(
    login, admin_user, standin
):
    Provider.objects.create(
        name="gpt", kind="openai", base_url=standin.base_url, key_env=DEMO_KEY_ENV
    )
    run = make_text_run(title="Retry webhooks")
    page = login(admin_user)
    watch = Watch(page, console_errors=True)
    watch.goto(f"/runs/{run.pk}/")
    page.get_by_label("Model", exact=True).fill("gpt-test")
    page.get_by_label("Judge provider").select_option("gpt")
    page.get_by_role("button", name="Replay as text").click()

    problems = page.locator("#form-problems")
    expect(problems).to_be_focused()
    said = "Give both a judge provider and a judge model, or neither."
    expect(problems).to_contain_text(f"Judge model: {said}")
    expect(page.get_by_label("Judge model")).to_have_accessible_description(said)
    # The message goes below its input: the inputs stay in one line.
    tops = {
        round(page.get_by_label(name, exact=True).bounding_box()["y"])
        for name in ("Model", "Judge model")
    }
    assert len(tops) == 1, tops
    problems.get_by_role("link", name="Judge model").click()
    expect(page.get_by_label("Judge model")).to_be_focused()
    assert TextReplay.objects.count() == 0
    watch.check("replay as text refused")
