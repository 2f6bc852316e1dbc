"""The budgets page's text tier settings: a model the night could never ask
is refused in one line, what was typed kept; the change log writes lists as
people do, a switch as on or off."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from replayhub.models import Budget, Project, Provider, TextReplay
from replayhub.texttier.night import night_admit_text
from reviews.models import AuditEvent
from tests.reviews.views.stored import post_from_page
from tests.reviews.views.test_budgets import (
    budgeted_project,  # noqa: F401 (a fixture)
    form_data,
)

pytestmark = pytest.mark.usefixtures("budgeted_project")

EDIT = reverse("reviews:budget_edit", args=["shop"])
TEXT = {
    "budget-shop-text_target": "",
    "budget-shop-text_judge": "",
    "budget-shop-text_similarity_below": "0.5",
    "budget-shop-agentic_after_text": "on",
    "budget-shop-escalate_categories": "",
}
NO_SUCH = (
    "No provider named &#x27;nosuchprovider&#x27; (register it on the Providers "
    "page, or with manage.py provider_add; providers: openai-main, stand-in)."
)


@pytest.fixture(autouse=True)
def registered(db):
    for name in ("stand-in", "openai-main"):
        Provider.objects.create(
            name=name, kind="openai", base_url="https://m.test", key_env="K"
        )


def post(client, **text):
    return post_from_page(
        client,
        EDIT,
        form_data(**{**TEXT, **{f"budget-shop-{k}": v for k, v in text.items()}}),
        headers={"HX-Request": "true"},
    )


@pytest.mark.parametrize("tier_on", ["", "on"])
@pytest.mark.parametrize("field", ["text_target", "text_judge"])
def test_a_model_of_a_provider_not_registered_is_refused_and_kept_in_its_box(
    client, admin_user, field, tier_on
):
    client.force_login(admin_user)
    other = "text_judge" if field == "text_target" else "text_target"

    response = post(
        client,
        text_enabled=tier_on,
        **{field: "nosuchprovider:model-zzz", other: "stand-in:coder"},
    )

    page = response.content.decode()
    assert response.status_code == 400
    assert page.count(NO_SUCH) == 2  # beside the field, and in the list above
    assert 'value="nosuchprovider:model-zzz"' in page
    assert Budget.objects.get().text_target == ""
    assert not AuditEvent.objects.exists()


def test_a_model_of_a_registered_provider_is_saved(client, admin_user):
    """Providers keep no list of the models they offer: the model is theirs
    to refuse when it is asked."""
    client.force_login(admin_user)

    response = post(
        client, text_target="openai-main:gpt-x", text_judge="stand-in:nosuchmodel"
    )

    assert response.status_code == 200 and "Saved." in response.content.decode()
    budget = Budget.objects.get()
    assert (budget.text_target, budget.text_judge) == (
        "openai-main:gpt-x",
        "stand-in:nosuchmodel",
    )


def test_a_night_skips_the_text_tier_on_what_the_page_refuses():
    Budget.objects.update(text_enabled=True, text_target="nosuchprovider:model-zzz")

    report = night_admit_text(project=Project.objects.get(), immediate=True)

    said = html.unescape(NO_SUCH)
    assert report.skipped_reason == f"text tier target: n{said[1:-1]}"
    assert not TextReplay.objects.exists()


def test_a_saved_model_of_a_provider_gone_since_blocks_no_other_edit(
    client, admin_user
):
    """The tier off, the saved model not typed again: the rest saves."""
    Budget.objects.update(text_target="gone:model")
    client.force_login(admin_user)

    response = post(client, text_target="gone:model", window_end_hour="7")

    assert response.status_code == 200
    assert Budget.objects.get().window_end_hour == 7


def test_a_category_longer_than_a_labels_is_refused_with_its_length_and_kept(
    client, admin_user
):
    client.force_login(admin_user)
    typed = "security, " + "x" * 5000

    response = post(client, escalate_categories=typed)

    page = response.content.decode()
    assert response.status_code == 400
    assert f"A category is at most 80 characters: “{'x' * 20}…” has 5,000." in page
    assert f'value="{typed}"' in page
    assert "maxlength" not in page  # no box cuts a paste short
    assert Budget.objects.get().escalate_categories == []


def test_the_changes_write_lists_as_people_do_each_value_escaped_and_shortened(
    client, admin_user
):
    client.force_login(admin_user)
    typed = "<b>payments</b>, " + "y" * 80
    post(client, escalate_categories=typed)

    page = client.get(reverse("reviews:budgets")).content.decode()

    changed = page[page.index("categories always escalated</code>") :]
    changed = changed[: changed.index("</li>")]
    assert "[" not in changed and "<b>" not in changed
    # Cut to 80 characters, as the project form's messages of an edit.
    assert f"none → {html.escape(typed[:79])}…" in changed


def test_the_changes_write_a_switch_as_on_or_off_and_no_value_as_not_set(
    client, admin_user
):
    client.force_login(admin_user)
    post(client, text_enabled="on", text_target="stand-in:coder")
    post(
        client, text_enabled="on", text_target="stand-in:coder", text_score_at_most="3"
    )

    page = client.get(reverse("reviews:budgets")).content.decode()

    assert "Text tier first (runs with prompts)</code> off → on" in page
    assert "Text tier: escalate at judge score at most</code> not set → 3" in page
    assert "False" not in page and "None" not in page


def test_a_provider_typed_in_any_case_is_saved_as_it_is_registered(client, admin_user):
    """Provider names are slugs: "STAND-IN" is "stand-in"; the model's name
    is the provider's, kept as typed."""
    client.force_login(admin_user)

    response = post(
        client,
        text_enabled="on",
        text_target="STAND-IN:Coder-Small",
        text_judge="OpenAI-Main:gpt-x",
    )

    assert response.status_code == 200 and "Saved." in response.content.decode()
    budget = Budget.objects.get()
    assert (budget.text_target, budget.text_judge) == (
        "stand-in:Coder-Small",
        "openai-main:gpt-x",
    )
