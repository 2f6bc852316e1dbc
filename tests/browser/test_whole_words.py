"""Tables at a laptop's width keep their words whole: a column's name, a
check's outcome, a badge, a link never broken in the middle ("Outc ome",
"skip ped"), while a long unbroken value beside them (a detail, an address, a
title) still wraps inside its own column (tests/browser/test_long_words.py)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from replayhub.models import Provider, Replay, TestOutcome
from reviews.models import Label, ReviewLabel
from reviews.services import review_decide
from reviews.together.comments import comment_add
from tests.browser.test_csp import rich_replay
from tests.factories import (
    make_budget,
    make_project,
    make_replay,
    make_superuser,
    make_user,
)

pytestmark = pytest.mark.browser

WIDTHS = [(1024, 768), (1280, 800)]

# Words of the page's tables, badges and buttons drawn on more than one line.
# A word ends at a space, or after a hyphen or a slash, where a line may break
# between words; one of more than 24 characters is a value that may break
# anywhere. Each word's rectangles are measured with a Range over its letters.
SPLIT_WORDS = """() => {
  const split = [];
  const boxes = document.querySelectorAll(
    "main table th, main table td, main .badge, main .count, main button, "
    + "main .tag, main .decision label");
  for (const box of boxes) {
    const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      if (parent.closest("pre, textarea, select, .sr-only")) continue;
      if (!parent.checkVisibility()) continue;
      for (const match of node.data.matchAll(/[^\\s\\-\\/]+[\\-\\/]?/g)) {
        const word = match[0];
        if (word.length < 2 || word.length > 24) continue;
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + word.length);
        const tops = new Set([...range.getClientRects()]
          .filter(r => r.width > 0 && r.height > 0).map(r => Math.round(r.top)));
        const where = box.tagName.toLowerCase() + "." + box.className;
        if (tops.size > 1) split.push(`${word} (${where})`);
      }
    }
  }
  return [...new Set(split)];
}"""

SIDEWAYS = "document.documentElement.scrollWidth - window.innerWidth"

CHECKS = [
    ("trees_identical", "fail", "cryptographically_verified"),
    ("test_gate", "pass", "independently_executed"),
    ("base_identity", "pass", "cryptographically_verified"),
    ("image_pinned", "skipped", "executor_supplied"),
    ("egress_denied", "unknown", "independently_observed"),
    ("model_answered_as_asked", "pass", "agentically_inferred"),
    ("flaky_tests", "skipped", "unavailable"),
    ("rerun_agreement", "unknown", "human_attested"),
]


def many_checks(replay: Replay) -> Replay:
    """Checks of every outcome, each with a detail of long sentences and one
    unbroken path, as a replay with many checks shows them."""
    detail = (
        "the replay's tree differs from the original's in the files listed "
        "below, and the difference rests on "
        "src/payments/reconciliation/ledger_rounding_half_even_totals.py"
    )
    replay.evidence["checks"] = [
        {"name": name, "outcome": outcome, "evidence_class": evidence, "detail": detail}
        for name, outcome, evidence in CHECKS
    ]
    replay.save(update_fields=["evidence"])
    return replay


def seed_tables(reviewer):
    """A replay with many checks and long test output, a search hit with an
    unresolved comment, decisions with labels and notes, and a provider with
    a long address; the pages showing them, and who opens them."""
    replay = many_checks(rich_replay())
    TestOutcome.objects.filter(replay=replay).update(
        output_tail="\n".join(
            f"tests/payments/test_ledger.py::test_rounding_{n} PASSED " + "x" * 90
            for n in range(20)
        )
    )
    comment_add(
        replay=replay,
        author=make_user("cole", "reviewer"),
        data={
            "target": "dod",
            "path": "src/app.py",
            "side": "new",
            "line_start": 2,
            "body": "is y = 3 meant?",
        },
    )
    label = Label.objects.create(
        project=replay.project, name="cause", kind="category", categories=["flaky"]
    )
    for n in range(3):
        decided = make_replay(
            verdict="divergent", project=replay.project, title=f"Round totals {n}"
        )
        review = review_decide(
            replay=decided,
            reviewer=reviewer,
            decision="confirm",
            note="the totals differ by a cent: https://ci.example.com/" + "b" * 80,
        )
        ReviewLabel.objects.create(review=review, label=label, value="flaky")
    Provider.objects.create(
        name="openai-main",
        kind="openai",
        base_url="https://gateway.example.com/" + "v" * 200,
        key_env="OPENAI_API_KEY",
    )
    return [
        (reviewer, f"/replays/{replay.pk}/"),
        (reviewer, "/search/?q=Round"),
        (reviewer, "/done/"),
        (make_superuser(), "/providers/"),
    ]


@pytest.mark.parametrize("width, height", WIDTHS)
def test_no_word_of_a_table_is_broken_in_the_middle(login, reviewer, width, height):
    seen: dict[Any, Any] = {}
    broken = {}
    for user, path in seed_tables(reviewer):
        page = seen.get(user) or login(user)
        seen[user] = page
        page.set_viewport_size({"width": width, "height": height})
        page.goto(path)
        expect(page.locator("main table").first).to_be_visible()
        # The tests' output tails opened, as a reader does to read them.
        page.locator("td.tail details").evaluate_all(
            "all => all.forEach(d => { d.open = true; })"
        )
        broken[path] = page.evaluate(SPLIT_WORDS)
        assert page.evaluate(SIDEWAYS) == 0, path
    assert {path: words for path, words in broken.items() if words} == {}


# Search hits as the demo's runs name them, with the longest reason codes an
# outcome shows beside its verdict.
SEARCH_HITS = [
    ("Implement add()", "coder-large", "divergent", "replay_fails_reference_tests"),
    (
        "Implement add() with a flaky suite",
        "coder-small",
        "inconclusive",
        "flaky_tests",
    ),
    ("Repair a broken add()", "coder-large", "divergent", "replay_passes_tests"),
    ("Implement add() and drop the tests", "coder-small", "divergent", "tests_missing"),
    (
        "Implement add() after a direct push",
        "coder-small",
        "inconclusive",
        "base_untrusted",
    ),
]

# How far the last column's header runs past the window's right edge, or is
# cut inside its own cell.
LAST_HEADER_CUT = """() => {
  const th = document.querySelector("main table thead th:last-child");
  const box = th.getBoundingClientRect();
  return Math.max(0, Math.ceil(box.right - window.innerWidth),
                  th.scrollWidth - th.clientWidth);
}"""


@pytest.mark.parametrize("query", ["/search/?q=add", "/search/?q=add&model=coder"])
def test_search_results_fit_a_laptop_with_every_column_whole(login, reviewer, query):
    project = make_project("calculator")
    for n, (title, model, verdict, reason) in enumerate(SEARCH_HITS, start=1):
        replay = make_replay(
            verdict=verdict,
            project=project,
            title=title,
            model=model,
            reason_code=reason,
        )
        replay.run.external_id = f"calc-{n:03}"
        replay.run.save(update_fields=["external_id"])
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(query)
    expect(page.locator("#search-rows tr.row")).not_to_have_count(0)
    assert page.evaluate(SIDEWAYS) <= 0
    assert page.evaluate(LAST_HEADER_CUT) == 0
    assert page.evaluate(SPLIT_WORDS) == []


# The lines a piece of text of the element matched by ``selector`` is drawn
# on: the distinct tops of the rectangles of its letters.
LINES_OF = """([selector, text]) => {
  const box = document.querySelector(selector);
  const at = box.textContent.indexOf(text);
  const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
  let seen = 0;
  const tops = new Set();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const start = Math.max(at - seen, 0);
    const end = Math.min(at + text.length - seen, node.data.length);
    if (start < end) {
      const range = document.createRange();
      range.setStart(node, start);
      range.setEnd(node, end);
      for (const r of range.getClientRects())
        if (r.width > 0 && r.height > 0) tops.add(Math.round(r.top));
    }
    seen += node.data.length;
  }
  return tops.size;
}"""


def test_a_providers_address_breaks_only_after_a_slash_at_1024_px(login):
    # The demo's stand-in provider, beside one of long names.
    for name, kind, url, key in [
        ("stand-in", "anthropic", "http://127.0.0.1:8761", "REPLAYHUB_DEMO_MODEL_KEY"),
        (
            "acme",
            "openai",
            "https://llm-gateway.internal.example.com/v1/openai-compatible",
            "REPLAYHUB_ACME_OPENAI_COMPAT_PROD_EU_WEST_KEY",
        ),
    ]:
        Provider.objects.create(name=name, kind=kind, base_url=url, key_env=key)
    page = login(make_superuser())
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto("/providers/")
    # Listed by name: the stand-in's address is in the last row.
    host = "#providers tbody tr:last-child td:nth-child(3) code"
    expect(page.locator(host)).to_have_attribute("title", "http://127.0.0.1:8761")
    assert page.evaluate(LINES_OF, [host, "127.0.0.1:8761"]) == 1
    assert page.evaluate(SIDEWAYS) == 0


def test_the_nightly_commands_options_stay_whole_at_1024_px(login):
    make_budget(make_project("demo"), shares={"agentic": {"max_replays": 3}})
    page = login(make_superuser())
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto("/budgets/")
    command = "#night-start-help-demo code"
    expect(page.locator(command)).to_have_text("manage.py nightly --project demo --now")
    assert page.evaluate(LINES_OF, [command, "--now"]) == 1
    assert page.evaluate(LINES_OF, [command, "--project"]) == 1
