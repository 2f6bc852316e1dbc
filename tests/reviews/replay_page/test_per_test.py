"""The detail page's test evidence: the per-test table, the test changes, what
could interfere with a run, and results taken from the cache."""

from __future__ import annotations

import pytest
from django.urls import reverse

from replayhub.models import TestOutcome
from reviews.replay_page.outcomes import case_table
from tests.factories import make_replay

PAYLOAD = "<script>window.__pwned=1</script>"


@pytest.fixture
def as_reviewer(client, reviewer):
    client.force_login(reviewer)
    return client


def cases(*rows):
    return [[test_id, outcome, 0.01, message] for test_id, outcome, message in rows]


def with_gate(target, trees):
    target.test_outcomes.all().delete()
    for tree, (passed, rows, cached) in trees.items():
        TestOutcome.objects.create(
            replay=target,
            tree=tree,
            attempt=1,
            ran=True,
            passed=passed,
            tests_executed=len(rows),
            cases=rows,
            cached=cached,
        )


def test_failures_on_the_judging_run_come_first_with_their_excerpt(as_reviewer):
    replay = make_replay(verdict="divergent")
    with_gate(
        replay,
        {
            "original": (
                True,
                cases(("t::a", "passed", ""), ("t::b", "passed", "")),
                True,
            ),
            "replay": (True, cases(("t::a", "passed", "")), False),
            "reference": (
                False,
                cases(
                    ("t::a", "passed", ""), ("t::b", "failed", "AssertionError: 1 != 5")
                ),
                False,
            ),
        },
    )

    page = as_reviewer.get(reverse("reviews:replay_detail", args=[replay.pk]))
    html = page.content.decode()

    table = html[html.index('id="per-test"') :]
    assert table.index("t::b") < table.index("t::a")
    assert "AssertionError: 1 != 5" in table
    assert "Reference" in table and "Replay's own tests" in table
    assert "from cache" in html
    # What "from cache" means is written on the page, not only in a tooltip.
    assert (
        '<p class="muted small" id="from-cache-note">From cache: the same tree '
        "under the same test command"
    ) in html


def test_a_test_missing_from_the_judging_run_says_so():
    table = case_table(
        {
            "original": cases(("t::a", "passed", ""), ("t::gone", "passed", "")),
            "replay": cases(("t::a", "passed", "")),
        }
    )

    assert [row.test_id for row in table.rows] == ["t::gone", "t::a"]
    assert table.rows[0].judged == "" and table.rows[0].regressed
    assert not table.with_own


def test_a_long_table_is_cut_and_counts_the_rest():
    rows = cases(*((f"t::{i:04}", "passed", "") for i in range(30)))

    table = case_table({"original": rows, "replay": rows}, max_rows=10)

    assert len(table.rows) == 10 and table.hidden == 20


def test_runs_without_test_ids_show_no_table():
    assert not case_table({"original": None, "replay": None})


def test_test_changes_and_interference_are_shown_escaped(as_reviewer):
    replay = make_replay(verdict="inconclusive", reason_code="test_interference")
    replay.evidence = {
        **replay.evidence,
        "test_changes": {
            "added": [],
            "changed": [],
            "deleted": [f"tests/{PAYLOAD}.py"],
            "summary": f"the replay deleted 1 test file (tests/{PAYLOAD}.py)",
        },
        "interference": [
            {
                "path": f"{PAYLOAD}.py",
                "line": 3,
                "kind": "process_exit_at_import",
                "what": "exits the process when loaded",
                "excerpt": f"os._exit(0)  # {PAYLOAD}",
            }
        ],
    }
    replay.save()

    html = as_reviewer.get(
        reverse("reviews:replay_detail", args=[replay.pk])
    ).content.decode()

    assert PAYLOAD not in html
    assert "the replay deleted 1 test file" in html
    assert "line 3 (exits the process when loaded)" in html
    assert "reference" in html
