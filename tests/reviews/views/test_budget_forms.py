"""The budgets page's checks of settings that could never work: each
refused on its own field, nothing of the post saved."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.urls import reverse

from replayhub.models import Budget, Project, Provider
from replayhub.models.project_settings import SETTING
from reviews import services
from reviews.models import AuditEvent
from tests.reviews.views.stored import post_from_page
from tests.reviews.views.test_budgets import (
    AGENTIC,
    agentic_share,
    budgeted_project,  # noqa: F401 (a fixture)
    form_data,
)

# The shop project of test_budgets, its budget's agentic share at 20 replays.
pytestmark = pytest.mark.usefixtures("budgeted_project")


@pytest.mark.parametrize(
    ("overrides", "field_id", "message"),
    [
        (
            {
                "budget-shop-text_enabled": "on",
                "budget-shop-text_target": "nosuch:model",
                "budget-shop-text_similarity_below": "0.5",
            },
            "id_budget-shop-text_target",
            "No provider named &#x27;nosuch&#x27; (register it on the Providers page",
        ),
        (
            {f"{AGENTIC}max_replays": "0"},
            f"id_{AGENTIC}max_replays",
            "The agentic tier is on: give it at least 1 replay a night",
        ),
        (
            {
                "replicates-shop-replicate_threshold": "0.8",
                "replicates-shop-replicate_confidence": "0.9",
                "replicates-shop-replicate_most": "1",
            },
            "id_replicates-shop-replicate_most",
            "Give at least 2 samples: with 1, a run&#x27;s first replay",
        ),
        (
            {
                "replicates-shop-replicate_threshold": "0.8",
                "replicates-shop-replicate_confidence": "7",
            },
            "id_replicates-shop-replicate_confidence",
            "Give a number between 0 and 1.",
        ),
    ],
    ids=["unknown-provider", "agentic-with-no-replays", "one-sample", "confidence-7"],
)
def test_settings_that_could_never_work_are_refused_on_their_field(
    client, admin_user, overrides, field_id, message
):
    """Each is said once, beside the field that causes it, and nothing of
    the post is saved."""
    Provider.objects.create(
        name="anthropic", kind="anthropic", base_url="https://a.test", key_env="K"
    )
    client.force_login(admin_user)

    response = post_from_page(
        client,
        reverse("reviews:budget_edit", args=["shop"]),
        form_data(**overrides),
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 400
    page = response.content.decode()
    problems = page[page.index('class="notice bad form-problems"') :]
    problems = problems[: problems.index("</ul>")]
    assert problems.count("<li>") == 1
    assert f'<a href="#{field_id}">' in problems and message in problems
    # Said once, and not contradicted (a target was given: it names no
    # provider, it is not missing).
    assert "needs a PROVIDER:MODEL" not in page
    budget = Budget.objects.get(project__slug="shop")
    assert not budget.text_enabled and budget.replicate_threshold is None
    assert agentic_share(Project.objects.get(slug="shop")).max_replays == 20
    assert not AuditEvent.objects.exists()


def test_the_text_tier_asking_a_registered_provider_is_saved(client, admin_user):
    Provider.objects.create(
        name="anthropic", kind="anthropic", base_url="https://a.test", key_env="K"
    )
    client.force_login(admin_user)

    response = post_from_page(
        client,
        reverse("reviews:budget_edit", args=["shop"]),
        form_data(
            **{
                "budget-shop-text_enabled": "on",
                "budget-shop-text_target": "anthropic:claude-sonnet-4-5",
                "budget-shop-text_judge": "anthropic:claude-haiku-4-5",
                "budget-shop-text_similarity_below": "0.5",
            }
        ),
    )

    assert response.status_code == 302
    assert Budget.objects.get(project__slug="shop").text_enabled


# The replay's caps that are numbers, each with the bounds the save checks.
NUMBER_CAPS = [name for name in services.CAP_FIELDS if name in SETTING]


def test_no_number_input_has_browser_bounds_so_the_form_says_its_own_words(
    client, admin_user
):
    """As on the project form: a 0 cap (or a negative share) is not stopped
    by the browser's bubble but refused beside its field in the form's words."""
    client.force_login(admin_user)

    page = client.get(reverse("reviews:budgets")).content.decode()

    assert len(NUMBER_CAPS) == len(services.CAP_FIELDS) - 1  # all but the box
    shares = [f"share-shop-agentic-{name}" for name in ("max_replays", "max_tokens")]
    for name in [f"caps-shop-{name}" for name in NUMBER_CAPS] + shares:
        tag = re.search(rf'<input[^>]*name="{name}"[^>]*>', page)
        assert tag, name
        attrs = dict(re.findall(r'([a-z]+)="([^"]*)"', tag[0]))
        assert "min" not in attrs and "max" not in attrs, (name, attrs)


@pytest.mark.parametrize("name", NUMBER_CAPS)
def test_a_cap_at_its_bounds_is_saved_and_one_past_them_is_refused(
    client, admin_user, name
):
    client.force_login(admin_user)
    setting = SETTING[name]
    url = reverse("reviews:budget_edit", args=["shop"])

    def post(value: int) -> int:
        # A night long enough for any test run the caps allow.
        data = form_data(**{f"caps-shop-{name}": str(value)})
        data[f"{AGENTIC}max_sandbox_minutes"] = "1440"
        return post_from_page(
            client, url, data, headers={"HX-Request": "true"}
        ).status_code

    for value in (setting.least, setting.most):
        assert post(value) == 200, value
        assert getattr(Project.objects.get(slug="shop"), name) == value
    for value in (setting.least - 1, setting.most + 1):
        assert post(value) == 400, value
        assert getattr(Project.objects.get(slug="shop"), name) == setting.most


@pytest.mark.parametrize(
    ("caps", "message"),
    [
        (
            {"test_time_limit_seconds": "3600"},
            "The test time limit, 3,600 s, is longer than a night&#x27;s whole "
            "sandbox time of 1,800 s (the agentic tier&#x27;s 30 minutes)",
        ),
        (
            {"time_limit_seconds": "1801", "test_time_limit_seconds": ""},
            "Empty, the test time limit is the agent&#x27;s, 1,801 s, longer than",
        ),
    ],
    ids=["test-limit", "agent-limit-for-the-tests"],
)
def test_a_test_run_longer_than_the_nights_sandbox_time_is_refused_on_its_cap(
    client, admin_user, caps, message
):
    client.force_login(admin_user)
    url = reverse("reviews:budget_edit", args=["shop"])
    thirty = {f"{AGENTIC}max_sandbox_minutes": "30"}
    sent = {f"caps-shop-{name}": value for name, value in caps.items()}

    response = post_from_page(
        client, url, form_data(**thirty, **sent), headers={"HX-Request": "true"}
    )
    whole = post_from_page(
        client,
        url,
        form_data(**thirty, **{"caps-shop-test_time_limit_seconds": "1800"}),
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 400
    page = response.content.decode()
    problems = page[page.index('class="notice bad form-problems"') :]
    assert '<a href="#id_caps-shop-test_time_limit_seconds">' in problems
    assert message in problems
    # Beside the field too: between its label and its input.
    at = page.index('name="caps-shop-test_time_limit_seconds"')
    label = page.rindex('for="id_caps-shop-test_time_limit_seconds"', 0, at)
    assert page.rfind(message, 0, at) > label
    assert whole.status_code == 200
    shop = Project.objects.get(slug="shop")
    assert shop.test_time_limit_seconds == 1800
    assert agentic_share(shop).max_sandbox_minutes == 30


def test_the_caps_the_page_lacks_are_pointed_to_where_they_are_set(client, admin_user):
    client.force_login(admin_user)
    page = client.get(reverse("reviews:budgets")).content.decode()
    edit = reverse("reviews:project_edit", args=["shop"])
    assert "Money, model calls, output kept and grace per replay" in page
    assert f'href="{edit}"' in page
    # The Edit page has an input for each.
    edit_page = client.get(edit).content.decode()
    for field in ("max_cost_usd", "max_output_bytes", "cap_grace_seconds"):
        assert f'name="{field}"' in edit_page, field


def test_the_window_hours_and_similarity_leave_their_bounds_to_the_form(
    client, admin_user
):
    """As every other number on the page: no browser bubble stops 24 or 1.5;
    the form refuses it beside its field, and 0.33 is not off a step."""
    client.force_login(admin_user)

    page = client.get(reverse("reviews:budgets")).content.decode()

    for name in ("window_start_hour", "window_end_hour", "text_similarity_below"):
        field = re.search(rf'<input[^>]*name="budget-shop-{name}"[^>]*>', page)
        assert field, name
        attrs = dict(re.findall(r'([a-z]+)="([^"]*)"', field[0]))
        assert "min" not in attrs and "max" not in attrs, (name, attrs)
        assert attrs.get("step", "any") in ("any", "1"), (name, attrs)


@pytest.mark.parametrize(
    ("typed", "stored"), [("20", Decimal("20.00")), ("3.5", Decimal("3.50"))]
)
def test_money_saved_is_shown_as_it_was_typed(client, admin_user, typed, stored):
    """The column keeps two places; the card saved in place, and the page
    opened again, show the amount as the admin wrote it."""
    client.force_login(admin_user)
    field = f'name="{AGENTIC}max_cost_usd"'

    saved = post_from_page(
        client,
        reverse("reviews:budget_edit", args=["shop"]),
        form_data(**{f"{AGENTIC}max_cost_usd": typed}),
        headers={"HX-Request": "true"},
    )

    assert b"Saved." in saved.content
    assert agentic_share(Project.objects.get(slug="shop")).max_cost_usd == stored
    for page in (saved.text, client.get(reverse("reviews:budgets")).text):
        box = re.search(rf"<input[^>]*{field}[^>]*>", page)
        assert box is not None
        assert f'value="{typed}"' in box[0]
