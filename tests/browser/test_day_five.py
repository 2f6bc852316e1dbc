"""A newcomer's fifth day in Chromium: the agreement page's boxes after Back
say the period its tables show."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_back_on_the_agreement_page_shows_the_period_of_its_tables(login, lead):
    today = timezone.localdate()
    since, typed = today - timedelta(days=10), today - timedelta(days=40)
    page = login(lead)
    page.goto(f"/agreement/?since={since}&until={today}")
    box = page.get_by_label("From")

    box.fill(str(typed))
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(f"since={typed}"))
    expect(page.locator("main")).to_contain_text(f"Decisions from {typed:%a %-d %b %Y}")

    page.go_back()
    expect(page).to_have_url(re.compile(f"since={since}"))
    expect(page.locator("main")).to_contain_text(f"Decisions from {since:%a %-d %b %Y}")
    expect(box).to_have_value(str(since))
    expect(page.get_by_label("To")).to_have_value(str(today))
