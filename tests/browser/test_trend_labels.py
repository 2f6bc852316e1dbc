"""The label counts on the trends page, in a real Chromium: they load after the
page and follow its project filter."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from reviews.models import Label
from reviews.services import review_decide
from tests.factories import make_project, make_replay

pytestmark = pytest.mark.browser


def test_a_lead_sees_the_labels_given_and_they_follow_the_filter(login, lead, reviewer):
    shop, billing = make_project("shop"), make_project("billing")
    cause = Label.objects.create(
        project=shop,
        name="root cause",
        kind="category",
        categories=["harness", "agent"],
    )
    merge = Label.objects.create(
        project=billing, name='<img src=x onerror="window.__pwned=1">', kind="yes_no"
    )
    for project, label, value in [
        (shop, cause, "harness"),
        (shop, cause, "harness"),
        (billing, merge, "no"),
    ]:
        review_decide(
            replay=make_replay(verdict="divergent", project=project),
            reviewer=reviewer,
            decision="confirm",
            labels={label.pk: value},
        )
    page = login(lead)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto("/trends/")

    table = page.locator("#label-counts table")
    expect(table).to_contain_text("root cause")
    harness = table.locator("tr", has_text="harness")
    expect(harness.locator("td").last).to_have_text("2")
    expect(table).to_contain_text('<img src=x onerror="window.__pwned=1">')

    page.select_option("select[name=project]", "billing")
    page.wait_for_url("**project=billing**")
    expect(page.locator("#label-counts table")).not_to_contain_text("root cause")
    expect(page.locator("#label-counts table")).to_contain_text("no")
    assert page.evaluate("window.__pwned") is None
    assert errors == []
