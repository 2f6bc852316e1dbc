"""A rollout replay's page in a real Chromium: read, expand, nothing executes."""

from __future__ import annotations

import pytest

from tests.harness import LONG_LOG, ONERROR, SCRIPT, replayed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_reads_a_rollout_replay_side_by_side(
    login, reviewer, rollout_project, screenshot
):
    replay_id = replayed(
        rollout_project, answer=f"Used ROUND_HALF_UP {SCRIPT} {ONERROR}"
    )
    page = login(reviewer)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(f"/replays/{replay_id}/")

    assert page.locator("h1 .badge").inner_text() == "Equivalent"
    assert page.locator("#original-reward").inner_text().startswith("1.0")
    assert page.locator("#replay-reward").inner_text().startswith("1.0")
    seed = page.locator("#seed")
    roles = seed.locator(".msg-role").all_inner_texts()
    assert [r.split()[0] for r in roles] == [
        "SYSTEM",
        "USER",
        "ASSISTANT",
        "TOOL",
        "USER",
    ]
    # Hostile text is shown as text and never runs.
    assert SCRIPT in seed.inner_text()
    replay_side = page.locator("#replay-continuation")
    assert f"Used ROUND_HALF_UP {SCRIPT} {ONERROR}" in replay_side.inner_text()
    assert "Used Decimal" in page.locator("#original-continuation").inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#rollout img").count() == 0
    # The long tool result is collapsed until the reviewer opens it.
    long = seed.locator("details.msg-long").first
    last_line = LONG_LOG.splitlines()[-1]
    assert not long.locator("pre").is_visible()
    long.locator("summary").click()
    assert last_line in long.locator("pre").inner_text()
    # Original and replay sit side by side.
    left = page.locator("#original-continuation").bounding_box()
    right = page.locator("#replay-continuation").bounding_box()
    assert left and right and right["x"] > left["x"] + left["width"] - 1
    # The replay's output is offered as a verifiers record.
    with page.expect_download() as download:
        page.locator("#rollout-record").click()
    assert download.value.suggested_filename == f"replay-{replay_id}.jsonl"
    assert errors == []
    screenshot(page, "rollout-replay")
