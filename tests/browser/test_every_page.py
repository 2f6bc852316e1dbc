"""Every page of the app, as a reviewer, a lead and an admin, in a real Chromium:
axe-core finds no critical, serious or moderate violation on any of them, none
logs a console error, and none scrolls sideways or clips a table's column at
1024, 1280, 1440 or 1920 px. As the admin, the one with the most controls, the
same load of each page is walked with Tab down from its top and Shift+Tab up
from its foot: no focused element is hidden under a sticky or fixed one.

The pages are opened with real content (a replay of each verdict, a running
one, runs, nights, a text suite, an upload…) built by ``seed_pages``, which
names every page a person opens; ``test_the_sweep_opens_every_page`` fails
when the URLconf grows a page it does not name. Django's admin is not the
app's own pages and is left out.

axe-core comes from npm, fetched once by ``./dev test`` into ``var/axe/``
(REPLAYHUB_AXE_JS may name another ``axe.min.js``); the tests reach no
registry. It is evaluated through the DevTools protocol, which the page's
Content-Security-Policy does not govern, so the pages are checked under their
real policy.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.urls import resolve
from django.utils import timezone

from replayhub.gateway import tape
from replayhub.ingest.tokens import token_issue
from replayhub.models import (
    Budget,
    Delivery,
    Forge,
    ImportJob,
    Provider,
    Replay,
    Tape,
    TextReplay,
    TextStatus,
    TextSuite,
    Webhook,
    WorkerCheck,
)
from reviews.models import Label
from reviews.services import review_decide, review_undo
from reviews.together.comments import comment_add
from tests.browser.test_csp import rich_replay, running_replay, tonight_with_usage
from tests.browser.test_trends import seed_nights
from tests.browser.test_wide_screens import CLIPPED_TABLES, HEADER_LINES
from tests.browser.watch import Watch
from tests.conftest import REQUIRE_SERVICES, ROOT
from tests.factories import (
    make_project,
    make_replay,
    make_rollout,
    make_text_run,
    make_user,
)
from tests.harness import hostile_seed
from tests.reviews.blindwalk import patterns
from tests.reviews.replay_page.test_tape import RECORDED
from tests.reviews.views.test_runs import imported_session

pytestmark = pytest.mark.browser

# Where ./dev test fetches it; REPLAYHUB_AXE_JS names another.
AXE_JS = ROOT / "var/axe/node_modules/axe-core/axe.min.js"
ROLES = ["reviewer", "lead", "admin_user"]
WIDTHS = [1024, 1280, 1440, 1920]
HEIGHT = 600
GATED = ["critical", "serious", "moderate"]

# URL names that are no page a person opens: forms' POST targets, fragments
# htmx swaps into a page, exports, redirects and the JSON API.
NOT_PAGES = {
    "favicon": "a redirect to the icon",
    "logout": "POST only",
    "healthz": "JSON for the load balancer",
    "reviews:next": "a redirect to the next replay",
    "reviews:replay_claim": "POST only",
    "reviews:replay_progress": "a fragment the replay page polls",
    "reviews:replay_release": "POST only",
    "reviews:replay_decide": "POST, or a redirect to the replay's page",
    "reviews:replay_tape": "POST only",
    "reviews:replay_rollout_record": "a download",
    "reviews:replay_diff_file": "a fragment the replay page loads",
    "reviews:review_undo": "POST only",
    "reviews:run_text_replay": "POST only",
    "reviews:run_tape_replay": "POST only",
    "reviews:text_suite_run": "POST only",
    "reviews:text_suite_new": "POST only",
    "reviews:trends_export_csv": "a download",
    "reviews:trends_export_json": "a download",
    "reviews:budget_edit": "POST only",
    "reviews:budget_night_start": "POST only",
    "reviews:provider_remove": "POST only",
    "reviews:project_remove": "POST only",
    "reviews:run_replay_now": "a confirmation fragment and its POST",
    "reviews:worker_check_create": "POST only",
    "reviews:worker_check_detail": "a fragment the status page polls",
    "reviews:comment_create": "POST only",
    "reviews:comment_new": "a fragment: the box under a diff's line",
    "reviews:comment_people": "a fragment: the @mention suggestions",
    "reviews:second_opinion": "POST only",
    "reviews:gold_toggle": "POST only",
    "reviews:claim_assign": "POST only",
    "reviews:comment_reply": "POST only",
    "reviews:comment_resolve": "POST only",
    "reviews:inbox_read": "POST only",
    "recorder_download": "a download",
}

AXE_RUN = """async (gated) => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations
    .filter(v => gated.includes(v.impact))
    .map(v => ({
      id: v.id,
      impact: v.impact,
      targets: v.nodes.slice(0, 3).map(n => n.target.join(" ")),
    }));
}"""
SIDEWAYS = "document.documentElement.scrollWidth - window.innerWidth"
# What the sweep measures at each width, asked of the page in one call.
LAYOUT = (
    f"() => [{SIDEWAYS}, ({CLIPPED_TABLES})(), ({HEADER_LINES})('main table.queue')]"
)


def every_evidence_class(replay: Replay) -> Replay:
    """``replay`` with a check of each class of evidence, each its own chip."""
    for name, kind in [
        ("egress_observed", "independently_observed"),
        ("agent_exit", "executor_supplied"),
        ("judge", "agentically_inferred"),
        ("reference_tests", "unavailable"),
    ]:
        replay.evidence["checks"].append(
            {"name": name, "outcome": "skip", "evidence_class": kind, "detail": ""}
        )
    # A test id is one long word: the table must wrap it, not run off its card.
    replay.evidence["checks"].append(
        {
            "name": "test ids",
            "outcome": "fail",
            "evidence_class": "independently_executed",
            "detail": "Passed on the original, failed on the judging run: "
            "tests/integration/test_refunds.py::TestRefundFlow::"
            "test_a_partial_refund_of_a_multi_currency_order_rounds_half_even.",
        }
    )
    replay.save(update_fields=["evidence"])
    return replay


def rollout_replay(project) -> Replay:
    """A rollout's replay: its seed's messages and both continuations."""
    answer = [{"role": "assistant", "content": "Used ROUND_HALF_UP"}]
    run = make_rollout(
        project,
        external_id="5c1f0e9a",
        reward=1.0,
        seeds=[(hostile_seed(answer="ok", reward=1.0), answer, "")],
    )
    replay = make_replay(verdict="equivalent", project=project, run=run)
    replay.seed = run.seeds.get()
    replay.evidence["rollout"] = {
        "original_reward": 1.0,
        "replay_reward": 1.0,
        "similarity": 0.9,
        "completion": answer,
    }
    replay.save(update_fields=["seed", "evidence"])
    return replay


def sometimes_right(project) -> Replay:
    """A run sampled under a replicate policy that sometimes diverges: its
    strip and rate on its page, the queue's band, the trends' rates."""
    Budget.objects.update_or_create(
        project=project,
        defaults={
            "replicate_threshold": 0.8,
            "replicate_confidence": 0.9,
            "replicate_most": 10,
        },
    )
    first = make_replay(verdict="identical", project=project, title="Sometimes right")
    made = [
        make_replay(verdict=verdict, project=project, run=first.run)
        for verdict in ["divergent", "identical", "equivalent", "inconclusive"]
    ]
    tape = make_replay(verdict="divergent", project=project, run=first.run)
    Replay.objects.filter(pk__in=[r.pk for r in made]).update(replicate=True)
    Replay.objects.filter(pk=tape.pk).update(replicate=True, tier="tape")
    Replay.objects.band_sometimes_divergent(first.run_id)
    return first


def tape_replay(project) -> Replay:
    """A tape replay that left its tape at call 2 and went on live: its
    conversation, the divergence's diff and the live notice."""
    replay = make_replay(
        verdict="inconclusive", project=project, reason_code="tape_diverged"
    )
    replay.run.raw = {"tape": RECORDED}
    replay.run.save(update_fields=["raw"])
    row = Tape.of(tape.from_record_tape(RECORDED), truncated=False)
    row.replay = replay
    row.save()
    replay.tier = "tape"
    replay.evidence["tape"] = {
        "source": "the run's record",
        "live_from": 2,
        "divergence": {
            "call": 2,
            "why": "differs",
            "detail": "call 2's request differs from the tape's",
            "diff": "--- recorded call 2\n+++ replay call 2\n-ls\n+ls -la\n",
        },
    }
    replay.save(update_fields=["tier", "evidence"])
    return replay


# One transaction, as for seed_nights: a commit a row doubled its time.
@transaction.atomic
def seed_pages(viewer, tmp_path: Path) -> list[str]:
    """A world with something on every page, and the address of each page."""
    seed_nights()  # twelve weeks of shop, billing and search
    shop = make_project("shop")
    tonight_with_usage(shop)
    label = Label.objects.create(project=shop, name="would merge", kind="yes_no")
    colleague = make_user("cole", "reviewer")
    divergent = rich_replay()
    comment_add(
        replay=divergent,
        author=colleague,
        data={
            "target": "dod",
            "path": "src/app.py",
            "side": "new",
            "line_start": 2,
            "body": f"@{viewer.username} is y = 3 meant?",
        },
    )
    replays = [
        divergent,
        make_replay(verdict="identical", project=shop, title="Same tree"),
        # An agent whose log lines are wider than their box.
        make_replay(
            verdict="equivalent",
            project=shop,
            title="Both pass",
            agent_output="ran: " + " ".join(f"--flag-{n}=value" for n in range(60)),
            # A prompt taller than its box: the box scrolls, from the keyboard too.
            prompt="\n".join(
                f"Step {n}: keep the checkout test green." for n in range(80)
            ),
        ),
        every_evidence_class(
            make_replay(verdict="inconclusive", project=shop, title="Flaky")
        ),
        running_replay(),
    ]
    replays.append(rollout_replay(shop))
    replays.append(tape_replay(shop))
    sampled = sometimes_right(shop)
    decided = make_replay(verdict="equivalent", title="Decided", queued=True)
    # A decision taken back, still in the history, before the one that stands.
    review_undo(
        review=review_decide(
            replay=decided,
            reviewer=colleague,
            decision="overturn",
            verdict_after="divergent",
            note="the totals differ",
        ),
        reviewer=colleague,
    )
    review_decide(replay=decided, reviewer=colleague, decision="confirm")
    # A decision that stands overturned: the automated verdict struck beside it.
    overturned = make_replay(verdict="divergent", title="Overturned", queued=True)
    review_decide(
        replay=overturned,
        reviewer=colleague,
        decision="overturn",
        verdict_after="equivalent",
        note="same behaviour, other words",
    )
    transcript = imported_session(tmp_path, shop, 3)
    text_run = make_text_run(shop, external_id="text-1", title="Retry webhooks")
    shop.providers.add(
        Provider.objects.create(
            name="acme",
            kind="anthropic",
            base_url="https://models.example",
            key_env="ACME_API_KEY",
            prices={"claude-x": {"input": "3", "output": "15"}},
        )
    )
    suite = TextSuite.objects.create(
        project=shop, target="gpt:gpt-test", total=1, replayed=1
    )
    text_replay = TextReplay.objects.create(
        run=text_run,
        project=shop,
        suite=suite,
        target_provider="gpt",
        target_model="gpt-test",
        status=TextStatus.FINISHED,
        finished_at=timezone.now(),
        output="add a retry to the sender",
        similarity=0.8,
    )
    job = ImportJob.objects.create(
        project=shop,
        filename="runs.jsonl",
        size_bytes=4096,
        path="/nonexistent",
        status="done",
        lines_read=10,
        imported=8,
    )
    Delivery.objects.create(
        project=shop,
        target="forge",
        event="commit.status",
        key="k1",
        commit="a" * 40,
        summary=f"{'a' * 12} failure (replay {divergent.pk})",
        status="failed",
        attempts=2,
        http_status=422,
        answer="Validation Failed",
    )
    WorkerCheck.objects.create(
        requested_at=timezone.now() - timedelta(minutes=1), answered_at=timezone.now()
    )
    # The connections page's tables: a revoked token and a working one.
    token_issue(project=shop)[0].revoke()
    token_issue(project=shop)
    Forge.objects.create(
        project=shop,
        kind="github",
        api_url="https://api.github.com",
        repo="acme/shop",
        token_env="REPLAYHUB_REPO_TOKEN_SHOP",
    )
    Webhook.objects.create(
        project=shop,
        url="https://hooks.example/services/T0/B0/x",
        events=["replay.finished", "review.decided", "night.closed"],
        secret_env="REPLAYHUB_REPO_TOKEN_HOOK",
    )
    return [
        "/",
        "/running/",
        *(f"/replays/{replay.pk}/" for replay in [*replays, decided, overturned]),
        f"/runs/{divergent.run_id}/",
        f"/runs/{sampled.run_id}/",
        f"/runs/{text_run.pk}/",
        f"/runs/{transcript.pk}/",
        f"/text-replays/{text_replay.pk}/",
        "/text-suites/",
        f"/text-suites/{suite.pk}/",
        "/trends/?since=2025-12-27&until=2026-02-20",
        "/trends/",  # the last weeks: no nights yet
        # The parts the trends page loads, opened by their own address.
        "/trends/labels/?since=2025-12-27&until=2026-02-20",
        "/trends/reproducibility/",
        "/budgets/",
        "/projects/",
        "/projects/new/",
        "/projects/shop/",
        "/projects/shop/edit/",
        "/projects/shop/review/",
        "/projects/shop/connections/",
        f"/projects/shop/review/labels/{label.pk}/",
        f"/projects/shop/review/labels/{label.pk}/remove/",
        "/providers/",
        "/providers/acme/edit/",
        "/status/",
        "/done/",
        "/search/?q=Round",
        "/search/?q=nothing-is-called-this",
        "/bulk-confirm/?verdict=identical",
        "/agreement/",
        "/inbox/",
        "/runs/upload/",
        f"/runs/upload/{job.pk}/",
        "/accounts/login/",
        "/no/such/page/",
    ]


def test_the_sweep_opens_every_page(reviewer, tmp_path):
    opened = {
        resolve(path.split("?")[0]).view_name
        for path in seed_pages(reviewer, tmp_path)
        if path != "/no/such/page/"
    }
    named = {p.name for p in patterns() if p.name and not p.name.startswith("admin:")}
    # The JSON API's, under api/v1/, are for scripts.
    pages = {name for name in named if "api_" not in name}
    assert pages - opened - NOT_PAGES.keys() == set(), "open it in seed_pages"
    assert opened & NOT_PAGES.keys() == set()
    assert NOT_PAGES.keys() <= named, "a name the URLconf no longer has"


@pytest.fixture(scope="session")
def axe_js() -> str | None:
    path = Path(os.environ.get("REPLAYHUB_AXE_JS") or AXE_JS)
    if not path.is_file():
        if REQUIRE_SERVICES:
            pytest.fail(
                f"axe-core is required (REPLAYHUB_REQUIRE_SERVICES=1): no {path}"
                " (./dev test fetches it into var/axe/)"
            )
        return None
    return path.read_text()


def _press_help(page) -> None:
    page.keyboard.press("?")


def _click_a_line(page) -> None:
    page.locator(LINE).first.click()


def _refuse_a_budget(page) -> None:
    page.locator(f"#budget-shop {END_HOUR}").fill("1")
    page.get_by_role("button", name="Save shop").click()


def _refuse_a_project(page) -> None:
    # Past the browser's own checks, to the server's errors beside each field.
    page.evaluate("document.getElementById('project-form').noValidate = true")
    page.locator("#project-form [type=submit]").click()


LINE = '[data-side="new"][data-line]'
END_HOUR = "input[name=budget-shop-window_end_hour]"
# What a person opens on a page, checked open too, once: (on the first page
# that has it, what opens it, what shows it open). Everyone has the first two.
OPENED = [
    ("#keys-help", _press_help, "#keys-help[open]"),
    (LINE, _click_a_line, ".comment-row textarea"),
    (f"#budget-shop {END_HOUR}", _refuse_a_budget, "#budget-shop .errorlist"),
    ("#project-form", _refuse_a_project, "#project-form .has-error"),
]


# The focused element, when a sticky or fixed element it is not part of
# covers any of it (WCAG 2.2's focus-not-obscured, at its stricter reading).
OBSCURED = """(covers) => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const box = el.getBoundingClientRect();
  if (!box.width || !box.height) return null;
  for (const cover of covers) {
    if (cover.contains(el) || el.contains(cover)) continue;
    const r = cover.getBoundingClientRect();
    const x = Math.min(box.right, r.right) - Math.max(box.left, r.left);
    const y = Math.min(box.bottom, r.bottom) - Math.max(box.top, r.top);
    if (x > 1 && y > 1) {
      const name = (e) => e.id ? "#" + e.id : e.tagName.toLowerCase() +
        (e.className ? "." + String(e.className).split(" ")[0] : "");
      return name(el) + " " + (el.textContent || "").trim().slice(0, 30) +
        " under " + name(cover);
    }
  }
  return null;
}"""
# Tab stops walked on each page, down from its top and up from its foot.
TAB_STOPS = 25
# The page's sticky and fixed elements.
COVERS = """() => [...document.querySelectorAll("body *")].filter((e) => {
  const position = getComputedStyle(e).position;
  return position === "sticky" || position === "fixed";
})"""
# OBSCURED at each Tab's keyup: the browser has moved the focus and scrolled
# it into view by then, and the walk reads all of a walk's answers at once
# rather than asking the page after every key. The covers are looked for on
# the first key and again after any key that changed the page's elements or
# their attributes (a class, a style), not on every key.
AT_EACH_TAB = f"""() => {{
  window.__obscured = [];
  const obscured = {OBSCURED};
  const covers = {COVERS};
  const changes = new MutationObserver(() => {{}});
  changes.observe(document, {{subtree: true, childList: true, attributes: true}});
  let found = null;
  const heard = (event) => {{
    if (event.key !== "Tab") return;
    if (found === null || changes.takeRecords().length) found = covers();
    window.__obscured.push(obscured(found));
  }};
  window.addEventListener("keyup", heard, true);
  window.__walked = () => {{
    changes.disconnect();
    window.removeEventListener("keyup", heard, true);
  }};
}}"""
# Down from the first element, or up from the page's last one.
WALKS = [("Tab", "body"), ("Shift+Tab", "main a[href], main button")]


def focus_walk(page, path: str) -> list[str]:
    """Each Tab stop of the walks down and up ``page`` whose focused element a
    sticky or fixed one covers; the page is left unfocused at its top."""
    page.evaluate(AT_EACH_TAB)
    hidden = []
    for key, start in WALKS:
        page.evaluate(f"[...document.querySelectorAll('{start}')].pop().focus()")
        for _ in range(TAB_STOPS):
            page.keyboard.press(key)
        found = page.evaluate("window.__obscured.splice(0)")
        assert len(found) == TAB_STOPS, f"{path}: {key} not heard {found}"
        hidden.extend(f"{path}: {each}" for each in found if each)
    page.evaluate("window.__walked(); document.activeElement.blur(); scrollTo(0, 0)")
    return hidden


@pytest.mark.parametrize("role", ROLES)
def test_every_page_passes_axe_and_fits_every_width(
    request, login, axe_js, tmp_path, role
):
    user = request.getfixturevalue(role)
    if role == "admin_user":
        # Staff too: the longest top bar there is, with the link to the admin.
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    paths = seed_pages(user, tmp_path)
    page = login(user, own_context=True)
    if axe_js:
        page.context.add_init_script(axe_js)
    watch = Watch(page, console_errors=True)
    violations, layout, logged, refused, opened = [], [], [], 0, set()
    # The focus walk, as the admin: the most controls and the longest bars.
    hidden: list[str] = []

    def check(where: str) -> None:
        if axe_js:
            for v in page.evaluate(AXE_RUN, GATED):
                violations.append(f"{where}: {v['id']} ({v['impact']}) {v['targets']}")
        # The page's own 403 or 404, which Chromium logs, is the answer asked for.
        own = f"status of {answer.status} " if answer.status >= 400 else "\0"
        logged.extend(f"{where}: {line}" for line in watch.found() if own not in line)
        watch.console.clear()
        watch.errors.clear()

    for path in paths:
        # Loaded at the narrowest and a short screen, where parts crowd each
        # other most and a sticky bar covers the most.
        page.set_viewport_size({"width": WIDTHS[0], "height": HEIGHT})
        answer = page.goto(path)
        assert answer is not None
        # The pages a role may not open all answer with the same 403 page.
        refused += answer.status == 403
        if answer.status == 403 and refused > 1:
            watch.console.clear()  # the 403 Chromium logs, seen on the first
            continue
        # What the page loads after itself (the trends' labels) is the page too.
        page.wait_for_function("() => !document.querySelector('[hx-trigger=load]')")
        if role == "admin_user":
            hidden.extend(focus_walk(page, path))
        # Folded parts (a long tool result, deferred runs) checked open.
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = 1)")
        check(path)
        for width in WIDTHS:
            if width != WIDTHS[0]:
                page.set_viewport_size({"width": width, "height": HEIGHT})
            sideways, clipped, broken = page.evaluate(LAYOUT)
            if sideways > 0 or clipped:
                layout.append(f"{path} at {width} px: {sideways} px sideways {clipped}")
            # The queue's column names on one line, from the narrowest up.
            if broken:
                layout.append(f"{path} at {width} px: header cells wrap {broken}")
        for present, action, shown in OPENED:
            if present not in opened and page.locator(present).count():
                opened.add(present)
                action(page)
                page.locator(shown).first.wait_for()
                check(f"{path} with {shown} open")
    everything = {present for present, _, _ in OPENED}
    assert opened == everything if role == "admin_user" else opened >= {LINE}
    assert violations == [], f"axe as {role}:\n" + "\n".join(violations)
    assert logged == [], f"console as {role}:\n" + "\n".join(logged)
    assert layout == [], f"layout as {role}:\n" + "\n".join(layout)
    assert hidden == [], "focus hidden under a sticky element:\n" + "\n".join(hidden)
    if not axe_js:
        pytest.skip("layout checked; no axe-core (./dev test fetches it)")


@pytest.mark.parametrize("width", WIDTHS[:3])
def test_the_sometimes_band_and_the_rates_show_at_each_width(
    login, lead, tmp_path, width
):
    sampled = sometimes_right(make_project("shop"))
    page = login(lead)
    page.set_viewport_size({"width": width, "height": 800})
    watch = Watch(page, console_errors=True)

    watch.goto("/")
    band = page.locator(".bands .band-0")
    assert band.is_visible() and "Sometimes diverges" in band.inner_text()
    watch.goto("/trends/")
    rates = page.locator("#reproducibility table")
    rates.wait_for()
    live = rates.locator("tbody tr", has_text="Live")
    # Three of four samples (the first replay's too), the inconclusive apart.
    assert "3/4 (75.0%)" in live.inner_text(), live.inner_text()
    watch.goto(f"/runs/{sampled.run_id}/")
    assert page.locator(".replicate-strip li").count() == 6
    assert page.locator(".replicate-rate").is_visible()
    watch.check(f"at {width} px")
    assert page.evaluate(SIDEWAYS) <= 0
