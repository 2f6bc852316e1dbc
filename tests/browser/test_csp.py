"""Every page a reviewer, a lead and an admin reach, in a real Chromium under the
Content-Security-Policy, with not one violation, also in content htmx swaps in.

A listener installed before any page script records each
``securitypolicyviolation``; Chromium's console "Refused to …" lines and page
errors (htmx without eval would throw) are collected too. Any of them fails.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from replayhub.models import (
    Comparison,
    EgressAttempt,
    ImportJob,
    ModelCall,
    NightShare,
    Replay,
    Run,
    TestOutcome,
)
from tests.browser.watch import Watch
from tests.factories import (
    DIFF,
    make_git_project,
    make_project,
    make_replay,
    make_superuser,
)
from tests.gitrepos import project_repo
from tests.records import EXAMPLE
from tests.reviews.trends import data

pytestmark = pytest.mark.browser

# More lines than the detail page shows inline: its files load on demand.
BIG = (
    "diff --git a/src/big.py b/src/big.py\n"
    "new file mode 100644\n"
    "index 0000000..3333333\n"
    "--- /dev/null\n"
    "+++ b/src/big.py\n"
    "@@ -0,0 +1,1600 @@\n" + "".join(f"+line {n}\n" for n in range(1, 1601))
)
NOISE = (
    "diff --git a/notes.txt b/notes.txt\n"
    "index 1111111..2222222 100644\n"
    "--- a/notes.txt\n"
    "+++ b/notes.txt\n"
    "@@ -1 +1 @@\n"
    "-alpha\n"
    "+alpha  \n"
)
LAST_NIGHT = date(2026, 2, 20)


def rich_replay() -> Replay:
    """A replay with every part of the detail page: a diff too large to show
    inline, hunk badges, the per-test table, model calls and egress."""
    replay = make_replay(
        verdict="divergent",
        title="Round invoice totals half-even",
        diff=DIFF + NOISE + BIG,
        original_patch=DIFF,
        replay_patch=DIFF + NOISE,
    )
    Comparison.objects.filter(replay=replay).update(
        hunk_classes={
            "src/app.py": "substantive",
            "notes.txt": "whitespace",
            "src/big.py": "substantive",
        },
        substantive_files=2,
    )
    TestOutcome.objects.filter(replay=replay, tree="original").update(
        cases=[["t::a", "passed", 0.01, ""], ["t::b", "passed", 0.01, ""]]
    )
    TestOutcome.objects.filter(replay=replay, tree="replay").update(
        passed=False,
        tests_failed=1,
        cases=[["t::a", "passed", 0.01, ""], ["t::b", "failed", 0.02, "1 != 5"]],
    )
    ModelCall.objects.create(
        replay=replay,
        provider="acme",
        model_requested="claude-x",
        model_answered="claude-x",
        input_tokens=1200,
        output_tokens=300,
        cost_usd=Decimal("0.0081"),
        status="200",
        latency_ms=412.0,
    )
    EgressAttempt.objects.create(
        replay=replay,
        phase="agent",
        host="pypi.org",
        port=443,
        allowed=False,
        outcome="denied",
    )
    return replay


def running_replay() -> Replay:
    run = Run.objects.create(
        project=make_project(), external_id="in-flight", title="Still going"
    )
    return Replay.objects.create(
        run=run,
        project=run.project,
        status="running",
        phase="tests_replay",
        started_at=timezone.now(),
    )


def tonight_with_usage(project) -> None:
    """An open night, partly used and partly reserved: the budget bars."""
    night = data.night(project, timezone.now().date(), status="open")
    NightShare.objects.filter(night=night, tier="agentic").update(
        used_replays=40,
        reserved_replays=25,
        used_sandbox_seconds=30_000,
        reserved_sandbox_seconds=20_000,
        used_tokens=2_500_000,
        reserved_tokens=1_000_000,
        used_cost_usd=Decimal(12),
        reserved_cost_usd=Decimal(30),
    )


# The tests below run in Chromium's headless build, as every browser test
# does, and in the full browser too: the policy holds in both.
BOTH = pytest.mark.parametrize("which", ["browser", "full_browser"])


@BOTH
def test_the_watch_sees_a_violation_and_the_policy_blocks_it(
    request, live_server, which
):
    browser = request.getfixturevalue(which)
    context = browser.new_context(base_url=live_server.url)
    page = context.new_page()
    watch = Watch(page)
    watch.goto("/accounts/login/")

    page.evaluate("document.body.setAttribute('style', 'background: red')")
    page.evaluate(
        "var s = document.createElement('script');"
        " s.textContent = 'window.__ran = 1'; document.body.appendChild(s)"
    )

    found = watch.found()
    assert any(v.startswith("style-src") for v in found), found
    assert any(v.startswith("script-src") for v in found), found
    assert page.evaluate("window.__ran") is None
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") != (
        "rgb(255, 0, 0)"
    )
    context.close()


@BOTH
def test_the_login_page_and_logging_in_meet_no_violation(
    request, live_server, reviewer, which
):
    browser = request.getfixturevalue(which)
    context = browser.new_context(base_url=live_server.url)
    page = context.new_page()
    watch = Watch(page)
    watch.goto("/accounts/login/")
    page.get_by_label("Username").fill("rita")
    page.get_by_label("Password").fill("pw-rita")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Review queue")
    watch.check("after logging in")
    watch.goto("/admin/login/")
    context.close()


def test_a_reviewer_meets_no_violation_on_any_page_or_swap(login, reviewer, screenshot):
    replay = rich_replay()
    make_replay(verdict="equivalent", project=make_project("billing"), title="Other")
    running = running_replay()
    tonight_with_usage(make_project())
    page = login(reviewer)
    page.clock.install()  # the polls below are run on to, not waited for
    watch = Watch(page)

    watch.goto("/")
    rows = page.locator("#queue-rows tr.row")
    expect(rows).to_have_count(2)
    # The filter swaps the results in place.
    page.select_option("select[name=project]", "billing")
    page.wait_for_url("**project=billing**")
    expect(rows).to_have_count(1)
    watch.check("queue filtered")
    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_visible()
    page.keyboard.press("Escape")
    watch.check("keys help")

    watch.goto(f"/replays/{replay.pk}/")
    expect(page.locator("#dod .tag.hunk").first).to_be_visible()
    expect(page.locator("#per-test")).to_be_visible()
    expect(page.locator("#model-calls")).to_be_visible()
    expect(page.locator("#egress")).to_be_visible()
    # "Show N lines" loads a file's lines into place.
    loader = page.locator("#dod-2 a.load")
    expect(loader).to_have_text("Show 1601 lines")
    loader.click()
    expect(page.locator("#dod-2 table.diff tr")).to_have_count(1601)
    watch.check("a file's lines loaded")
    page.get_by_role("button", name="Claim", exact=True).click()
    expect(page.locator(".held.mine")).to_be_visible()
    watch.check("claimed")
    screenshot(page, "csp-detail")
    with page.expect_navigation():
        page.get_by_role("button", name="Confirm").click()
    page.wait_for_load_state()
    watch.check("confirmed")

    watch.goto(f"/replays/{running.pk}/")
    watch.poll("/progress/")
    watch.goto("/running/")
    watch.poll("/running/")
    watch.goto("/budgets/")
    watch.goto("/projects/")
    watch.goto(f"/projects/{replay.project.slug}/")
    # An overturn's choice, shown before it is recorded, and the undo bar.
    watch.goto(f"/replays/{replay.pk}/")
    page.keyboard.press("4")
    expect(page.locator("#overturn-preview")).to_contain_text("Overturn")
    watch.check("overturn chosen")
    assert page.goto("/trends/").status == 403
    watch.check("the 403 page")


def test_a_lead_meets_no_violation_on_the_trends_budgets_and_projects(
    login, lead, screenshot
):
    data.steady_then_bad(make_project("shop"), LAST_NIGHT)
    data.steady_then_bad(make_project("billing"), LAST_NIGHT, bad_reason="timeout")
    tonight_with_usage(make_project())
    make_replay(verdict="equivalent")
    page = login(lead)
    watch = Watch(page)

    watch.goto(f"/trends/?since=2026-01-10&until={LAST_NIGHT}")
    expect(page.locator("svg.chart").first).to_be_visible()
    page.select_option("select[name=project]", "billing")
    expect(page.locator(".trends-scope")).to_contain_text("project billing")
    watch.check("trends filtered")
    watch.goto("/trends/")  # the empty dashboard
    watch.goto("/budgets/")
    expect(page.locator("svg.bar").first).to_be_visible()
    screenshot(page, "csp-budgets-lead")
    watch.goto("/projects/")
    watch.goto("/")
    watch.goto("/running/")


def test_an_admin_meets_no_violation_in_the_app_and_the_django_admin(
    login, tmp_path, screenshot
):
    shop = make_git_project(project_repo(tmp_path))
    tonight_with_usage(shop)
    replay = make_replay(verdict="inconclusive", project=shop)
    job = ImportJob.objects.create(
        project=shop,
        filename="big.jsonl",
        size_bytes=4096,
        path=str(tmp_path / "gone.jsonl"),
        status="importing",
        lines_read=10,
        imported=8,
    )
    root = make_superuser()
    page = login(root)
    page.clock.install()  # the polls below are run on to, not waited for
    watch = Watch(page)

    # The upload: its progress, then the summary swapped in place.
    watch.goto("/runs/upload/")
    page.select_option("select[name=project]", "shop")
    page.set_input_files("input[name=file]", str(EXAMPLE))
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#summary")).to_contain_text("runs.jsonl into shop")
    watch.check("upload summary")
    screenshot(page, "csp-upload")
    watch.goto(f"/runs/upload/{job.pk}/")
    watch.poll(f"/runs/upload/{job.pk}/")

    # The status page: a check is swapped in, then polls for its answer.
    watch.goto("/status/")
    page.get_by_role("button", name="Check the worker").click()
    expect(page.locator("#checks li.check")).to_have_count(1)
    watch.check("worker check requested")
    watch.poll("/status/worker-checks/")

    # Saving a budget swaps its card, bars and all, in place.
    watch.goto("/budgets/")
    page.get_by_role("button", name="Save shop").click()
    expect(page.locator("#budget-shop .badge.ok")).to_be_visible()
    expect(page.locator("#budget-shop svg.bar")).to_have_count(4)
    watch.check("budget saved")
    screenshot(page, "csp-budgets")
    watch.goto("/projects/")
    watch.goto("/projects/shop/?verdict=inconclusive")
    watch.goto("/projects/new/")
    watch.goto("/projects/shop/edit/")
    # A refused budget swaps its errors in; the error pages are styled pages.
    watch.goto("/budgets/")
    page.locator("#budget-shop input[name=budget-shop-window_end_hour]").fill("1")
    page.get_by_role("button", name="Save shop").click()
    expect(page.locator("#budget-shop .errorlist").first).to_be_visible()
    watch.check("budget refused")
    assert page.goto("/no/such/page/").status == 404
    watch.check("the 404 page")
    watch.goto("/trends/")
    watch.goto(f"/replays/{replay.pk}/")

    for path in [
        "/admin/",
        "/admin/replayhub/",
        "/admin/replayhub/run/",
        f"/admin/replayhub/run/{replay.run_id}/change/",
        "/admin/replayhub/replay/?verdict__exact=inconclusive",
        f"/admin/replayhub/replay/{replay.pk}/change/",
        f"/admin/replayhub/project/{shop.pk}/change/",
        "/admin/replayhub/project/add/",
        # A budget's and a night's shares, one inline row per tier.
        f"/admin/replayhub/budget/{shop.budget.pk}/change/",
        f"/admin/replayhub/night/{shop.nights.get().pk}/change/",
        "/admin/replayhub/ingesttoken/",
        "/admin/auth/user/",
        "/admin/auth/user/add/",
        f"/admin/auth/user/{root.pk}/change/",
        f"/admin/auth/user/{root.pk}/password/",
        "/admin/password_change/",
    ]:
        watch.goto(path)
    # The admin's own scripts at work: the changelist's action checkboxes.
    watch.goto("/admin/replayhub/replay/")
    page.locator("#action-toggle").check()
    expect(page.locator(".action-counter")).to_contain_text("1 of 1 selected")
    watch.check("admin actions")
    # The project form's two-box selector for providers (SelectFilter2.js).
    watch.goto(f"/admin/replayhub/project/{shop.pk}/change/")
    expect(page.locator(".selector").first).to_be_visible()
    watch.check("admin selector")
    # The date and time shortcuts (calendar.js) open their popups.
    watch.goto(f"/admin/replayhub/replay/{replay.pk}/change/")
    page.locator(".datetimeshortcuts a[id^=calendarlink]").first.click()
    expect(page.locator(".calendarbox").first).to_be_visible()
    page.locator(".datetimeshortcuts a[id^=clocklink]").first.click()
    expect(page.locator(".clockbox").first).to_be_visible()
    watch.check("admin calendar and clock")
    screenshot(page, "csp-admin-replay")


def test_reviewing_together_meets_no_violation(login, reviewer, lead):
    from reviews.models import Label, ReviewPolicy
    from reviews.services import review_decide

    replay = rich_replay()
    Label.objects.create(
        project=replay.project, name="would merge", kind="yes_no", required=True
    )
    decided = make_replay(verdict="identical", queued=False, title="Decided")
    review_decide(replay=decided, reviewer=reviewer, decision="confirm")
    ReviewPolicy.objects.create(project=make_project("blind"), blind=True)
    make_replay(verdict="divergent", project=make_project("blind"))
    page = login(reviewer)
    watch = Watch(page)

    watch.goto(f"/replays/{replay.pk}/")
    # A file loaded on demand takes comments like one shown inline.
    page.locator("#dod-0 a.load").click()
    page.locator('#dod-0 [data-side="new"][data-line="2"]').click()
    # The box opens under the line, and the thread is drawn there.
    box = page.locator("#dod-0 tr.comment-row textarea")
    box.fill("A comment")
    box.press("Control+Enter")
    expect(page.locator("#dod-0 tr.thread-row article.thread")).to_have_count(1)
    watch.check("comment added")
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator("#labels .error")).to_be_visible()
    watch.check("a required label refused")
    watch.goto("/")
    watch.goto("/done/")
    watch.goto("/search/?q=Round")
    watch.goto("/bulk-confirm/?verdict=identical")
    watch.goto("/inbox/")

    page = login(lead)
    watch = Watch(page)
    watch.goto("/agreement/")
    watch.goto("/done/")
    watch.goto(f"/replays/{replay.pk}/")


def test_every_form_flow_meets_no_violation(login, tmp_path):
    """The forms themselves, each submitted in the browser, refused then
    accepted: an htmx swap must not settle a ``style`` the policy refuses."""
    shop = make_git_project(project_repo(tmp_path))
    tonight_with_usage(shop)
    make_replay(verdict="divergent", project=shop, title="First")
    make_replay(verdict="equivalent", project=shop, title="Second")
    root = make_superuser()
    page = login(root)
    watch = Watch(page, console_errors=True)

    # The upload, twice: each goes on to its summary at an address of its own.
    watch.goto("/runs/upload/")
    for n in (1, 2):
        shown = page.url
        page.select_option("select[name=project]", "shop")
        page.set_input_files("input[name=file]", str(EXAMPLE))
        page.get_by_role("button", name="Import", exact=True).click()
        expect(page).not_to_have_url(shown)
        expect(page.locator("#summary")).to_contain_text("runs.jsonl into shop")
        watch.check(f"upload {n}")

    # A budget refused, then saved, then refused and saved again.
    watch.goto("/budgets/")
    hour = page.locator("#budget-shop input[name=budget-shop-window_end_hour]")
    for n in (1, 2):
        # A style the page's own code may set (CSSOM, which the policy allows,
        # as Chromium does on a resized text box): htmx's settle copied it with
        # setAttribute, which the policy refuses.
        page.evaluate(
            "document.querySelectorAll('#budget-shop [id]')"
            ".forEach(e => { e.style.outlineOffset = '1px'; })"
        )
        kept = hour.input_value()
        hour.fill("1")
        page.get_by_role("button", name="Save shop").click()
        expect(page.locator("#budget-shop .errorlist").first).to_be_visible()
        watch.check(f"budget refused {n}")
        hour.fill(kept)
        page.get_by_role("button", name="Save shop").click()
        expect(page.locator("#budget-shop .badge.ok")).to_be_visible()
        watch.check(f"budget saved after a refusal {n}")

    # The project form: refused with every error beside its field, then saved.
    watch.goto("/projects/shop/edit/")
    page.locator("input[name=time_limit_seconds]").fill("0")
    page.locator("input[name=repo]").fill("/nonexistent/repo")
    page.get_by_role("button", name="Save shop").click()
    expect(page.locator("#project-form .has-error")).to_have_count(2)
    watch.check("project form refused")
    page.locator("input[name=time_limit_seconds]").fill("900")
    page.locator("input[name=repo]").fill(shop.repo_path)
    page.get_by_role("button", name="Save shop").click()
    page.wait_for_url("**/projects/shop/")
    watch.check("project form saved")

    # Decisions: refused, recorded, taken back.
    watch.goto("/")
    page.locator("#queue-rows tr.row td.title a").first.click()
    page.wait_for_url("**/replays/*/")
    page.get_by_role("button", name="Overturn").click()
    expect(page.locator("#decision .error")).to_be_visible()
    watch.check("decision refused")
    with page.expect_navigation():
        page.keyboard.press("c")
    expect(page.locator("#undo")).to_be_visible()
    watch.check("decision recorded")
    with page.expect_navigation():
        page.keyboard.press("z")
    watch.check("decision taken back")
