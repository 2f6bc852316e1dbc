"""The Done tab's filters behave as the queue's and the trends': a select
applies as it changes (htmx asks for the results alone), and a period that
ends before it starts is refused in one line, the decisions then listed
for every day."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from reviews.models import Review
from reviews.services import review_decide
from tests.factories import make_replay

pytestmark = pytest.mark.django_db

DONE = reverse("reviews:done")


@pytest.fixture
def decided(reviewer) -> list[Review]:
    """Two of the reviewer's decisions, five days apart."""
    reviews = [
        review_decide(
            replay=make_replay(verdict="divergent", title=title),
            reviewer=reviewer,
            decision="confirm",
        )
        for title in ("Round totals", "Parse dates")
    ]
    Review.objects.filter(pk=reviews[0].pk).update(
        created_at=timezone.now() - timedelta(days=5)
    )
    return reviews


def test_a_reversed_period_is_refused_in_one_line_and_every_day_listed(
    client, reviewer, decided
):
    client.force_login(reviewer)
    today = timezone.localdate()
    html = client.get(
        DONE,
        {"since": today.isoformat(), "until": (today - timedelta(days=7)).isoformat()},
    ).content.decode()

    assert (
        '<p class="error" id="done-refused">To: The period ends before it starts. '
        "Shown for every day instead.</p>"
    ) in html
    assert "Round totals" in html and "Parse dates" in html
    assert "No decision matches" not in html


def test_a_period_in_order_still_filters(client, reviewer, decided):
    client.force_login(reviewer)
    today = timezone.localdate()
    html = client.get(
        DONE, {"since": (today - timedelta(days=1)).isoformat()}
    ).content.decode()
    assert "Parse dates" in html and "Round totals" not in html
    assert 'id="done-refused"' not in html


def test_a_select_applies_as_it_changes_and_htmx_gets_the_results_alone(
    client, reviewer, decided
):
    client.force_login(reviewer)
    page = client.get(DONE).content.decode()
    assert 'hx-trigger="change target:select, submit"' in page
    assert 'hx-target="#done-results"' in page

    part = client.get(DONE, {"decision": "rerun"}, headers={"HX-Request": "true"})
    html = part.content.decode()
    assert html.lstrip().startswith('<section id="done-results"')
    assert 'class="filters"' not in html
    assert "No decision matches." in html
    assert "HX-Request" in part["Vary"]


def test_a_part_of_a_model_name_in_another_case_filters_the_decisions(client, reviewer):
    for title, model in (("Round totals", "Coder-Small"), ("Parse dates", "gpt-5")):
        review_decide(
            replay=make_replay(verdict="divergent", title=title, model=model),
            reviewer=reviewer,
            decision="confirm",
        )
    client.force_login(reviewer)

    html = client.get(DONE, {"model": "CODER"}).content.decode()
    assert "Round totals" in html and "Parse dates" not in html
    assert 'name="model" value="CODER"' in html
    assert '<option value="Coder-Small">' in html and 'list="done-models"' in html

    none = client.get(DONE, {"model": "llama"}).content.decode()
    assert "No decision of a model matching “llama”." in none
    assert "Round totals" not in none and "Parse dates" not in none
