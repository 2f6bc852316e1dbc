"""Tables at a laptop's width keep their words whole: a column's name, a
check's outcome, a badge, a link never broken in the middle ("Outc ome",
"skip ped"), while a long unbroken value beside them (a detail, an address, a
title) still wraps inside its own column (tests/browser/test_long_words.py)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from replayhub.models import Provider, Replay, TestOutcome
from reviews.models import Label, ReviewLabel
from reviews.services import review_decide
from reviews.together.comments import comment_add
from tests.browser.test_csp import rich_replay
from tests.factories import make_replay, make_superuser, make_user

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
    seen = {}
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
