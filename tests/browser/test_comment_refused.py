"""The replay page's comment form, refused: what was typed stays, and the
problems are shown beside the form under its own labels, with focus on them."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from reviews.models import Comment
from tests.factories import make_replay

pytestmark = pytest.mark.browser

TEXT = "The second assignment shadows the first; worth a look."


def fill(page, *, path: str, start: str, end: str) -> None:
    page.locator("#comment-path").fill(path)
    page.locator("#comment-start").fill(start)
    page.locator("#comment-end").fill(end)
    page.locator("#comment-body").fill(TEXT)
    with page.expect_navigation():
        page.locator("#comment-form").get_by_role("button", name="Comment").click()


def in_view(page, selector: str) -> bool:
    return page.evaluate(
        """s => { const r = document.querySelector(s).getBoundingClientRect();
        return r.top >= 0 && r.bottom <= innerHeight; }""",
        selector,
    )


@pytest.mark.parametrize(
    ("path", "start", "end", "said"),
    [
        ("src/app.py", "5", "2", "Lines: The range ends before it starts."),
        ("src/nothing.py", "1", "", "File or output: That file is not in that diff"),
    ],
    ids=["backwards", "no-such-file"],
)
def test_a_refused_comment_keeps_its_text_and_says_why_beside_the_form(
    login, reviewer, path, start, end, said
):
    replay = make_replay(verdict="divergent")
    page = login(reviewer)
    page.set_viewport_size({"width": 1024, "height": 800})
    page.goto(f"/replays/{replay.pk}/")

    fill(page, path=path, start=start, end=end)

    errors = page.locator("#comment-form #comment-errors")
    expect(errors).to_contain_text(said)
    expect(errors).to_be_focused()
    assert in_view(page, "#comment-errors")
    assert "line end" not in errors.inner_text()
    assert "line start" not in page.locator("body").inner_text()
    expect(page.locator("#comment-body")).to_have_value(TEXT)
    expect(page.locator("#comment-path")).to_have_value(path)
    expect(page.locator("#comment-start")).to_have_value(start)
    # Said once, beside the form: not again at the top of the page.
    expect(page.get_by_text("Comment not added")).to_have_count(1)
    assert not Comment.objects.exists()

    # Shown once: a reload is the page as it was, with an empty form.
    page.reload()
    expect(page.locator("#comment-errors")).to_have_count(0)
    expect(page.locator("#comment-body")).to_have_value("")
