"""The model providers page: an admin lists, adds and edits providers with
provider_add's own checks (audited, the key never asked for), a refused form
keeps what was typed beside its one-line reason, and other roles are kept out."""

from __future__ import annotations

import re
from functools import partial

import pytest
from django.urls import reverse

from replayhub.gateway.registry import keys_unset
from replayhub.models import Project, Provider
from reviews.models import AuditEvent
from tests.reviews.views.stored import form_stored, post_from_page

URL = "/providers/"
# A removal's ticked "Yes, remove …" box.
SURE = {"sure": "yes"}


def add(client, **changed):
    data = {
        "name": "acme",
        "kind": "anthropic",
        "base_url": "https://models.example/v1/",
        "key_env": "ACME_API_KEY",
        "prices": "claude-x=3,15\n\nclaude-y=0.8,4,0.08\n",
        **changed,
    }
    return client.post(URL, data)


def test_an_admin_adds_a_provider_and_it_is_listed_and_audited(client, admin_user):
    client.force_login(admin_user)

    response = add(client)

    assert response.status_code == 302 and response["Location"] == URL
    provider = Provider.objects.get()
    assert (provider.kind, provider.base_url, provider.key_env) == (
        "anthropic",
        "https://models.example/v1",
        "ACME_API_KEY",
    )
    assert provider.prices == {
        "claude-x": {"input": "3", "output": "15"},
        "claude-y": {"input": "0.8", "output": "4", "cached": "0.08"},
    }
    event = AuditEvent.objects.get(action="provider.added")
    assert event.actor == admin_user and event.after["key_env"] == "ACME_API_KEY"
    page = client.get(URL).content.decode()
    assert "$ACME_API_KEY" in page and "https://models.example/v1" in page
    assert "Provider acme added." in page


@pytest.mark.parametrize(
    ("changed", "field", "reason"),
    [
        ({"base_url": "ftp://x"}, "base_url", "is not an http(s) URL"),
        ({"base_url": "https://u:pw@x"}, "base_url", "must not carry credentials"),
        ({"key_env": "live key 123"}, "key_env", "not an environment variable name"),
        ({"prices": "m=1"}, "prices", "write MODEL=IN,OUT"),
        ({"name": "no spaces"}, "name", "is not a provider name"),
        ({"key_env": "SECRET_KEY"}, "key_env", "deployment's own secret"),
        ({"key_env": "DATABASE_URL"}, "key_env", "deployment's own secret"),
    ],
)
def test_a_bad_provider_is_refused_beside_its_field_and_nothing_saved(
    client, admin_user, changed, field, reason
):
    client.force_login(admin_user)

    response = add(client, **changed)

    assert response.status_code == 400
    assert reason in " ".join(response.context["form"].errors[field])
    assert not Provider.objects.exists()
    # What was typed is still there to correct.
    value = next(iter(changed.values()))
    assert response.context["form"]["name"].value() == changed.get("name", "acme")
    assert value in response.content.decode()


def test_one_submit_says_every_fields_problem_at_the_top_and_beside_it(
    client, admin_user
):
    client.force_login(admin_user)

    response = add(
        client,
        name="bad name!",
        base_url="ftp://x",
        key_env="SECRET_KEY",
        prices="model=abc",
    )

    assert response.status_code == 400
    errors = response.context["form"].errors
    assert sorted(errors) == ["base_url", "key_env", "name", "prices"]
    page = response.content.decode()
    summary = page[page.index('id="form-problems"') : page.index("</ul>")]
    assert "Not saved: fix these 4 first." in summary
    for field in ["name", "base_url", "key_env", "prices"]:
        assert f'href="#id_{field}"' in summary


def test_a_second_provider_of_the_same_name_is_refused(client, admin_user):
    client.force_login(admin_user)
    add(client)
    response = add(client, base_url="https://other.example")
    assert response.status_code == 400
    assert "already exists" in " ".join(response.context["form"].errors["name"])
    assert Provider.objects.get().base_url == "https://models.example/v1"


def test_an_admin_edits_a_provider_but_not_its_name(client, admin_user):
    client.force_login(admin_user)
    add(client)
    edit = reverse("reviews:provider_edit", args=["acme"])
    form = client.get(edit).context["form"]
    assert form["prices"].value() == "claude-x=3,15\nclaude-y=0.8,4,0.08"

    response = post_from_page(
        client,
        edit,
        {
            "name": "renamed",
            "kind": "openai",
            "base_url": "https://gateway.example",
            "key_env": "OTHER_KEY",
            "prices": "",
        },
    )

    assert response.status_code == 302
    provider = Provider.objects.get()
    assert (provider.name, provider.kind, provider.base_url, provider.key_env) == (
        "acme",
        "openai",
        "https://gateway.example",
        "OTHER_KEY",
    )
    assert provider.prices == {}
    event = AuditEvent.objects.get(action="provider.edited")
    assert event.before["base_url"] == "https://models.example/v1"
    assert event.after["base_url"] == "https://gateway.example"


def test_the_page_counts_the_projects_that_name_a_provider(client, admin_user):
    client.force_login(admin_user)
    add(client)
    project = Project.objects.create(slug="shop", repo_path="/srv/shop.git")
    project.providers.add(Provider.objects.get())
    (row,) = client.get(URL).context["providers"]
    assert row.used_by == 1


@pytest.mark.parametrize("role", ["reviewer", "lead"])
def test_reviewers_and_leads_neither_see_nor_add_providers(client, request, role):
    client.force_login(request.getfixturevalue(role))
    assert client.get(URL).status_code == 403
    assert add(client).status_code == 403
    assert not Provider.objects.exists()
    assert "Model providers" not in client.get("/projects/").content.decode()


def test_the_projects_page_leads_an_admin_to_the_providers(client, admin_user):
    client.force_login(admin_user)
    assert f'href="{URL}"' in client.get("/projects/").content.decode()


def test_a_provider_nothing_names_is_removed_and_one_in_use_is_kept_saying_why(
    client, admin_user
):
    from replayhub.models import Budget

    client.force_login(admin_user)
    add(client)
    add(client, name="spare", key_env="SPARE_KEY")
    shop = Project.objects.create(slug="shop", repo_path="/srv/shop.git")
    shop.providers.add(Provider.objects.get(name="acme"))
    billing = Project.objects.create(slug="billing", repo_path="/srv/billing.git")
    Budget.objects.create(project=billing, text_target="acme:claude-x")

    kept = client.post("/providers/acme/remove/", SURE, follow=True)
    page = client.get("/providers/spare/edit/").content.decode()
    unticked = client.post("/providers/spare/remove/", follow=True)
    assert Provider.objects.filter(name="spare").exists()
    assert "Nothing removed: tick “Yes, remove provider spare” first." in (
        unticked.content.decode()
    )
    removed = client.post("/providers/spare/remove/", SURE, follow=True)

    assert Provider.objects.filter(name="acme").exists()
    assert (
        "Provider acme is kept: project shop, the text tier of billing name it."
        in kept.content.decode()
    )
    assert 'action="/providers/spare/remove/"' in page
    assert not Provider.objects.filter(name="spare").exists()
    assert "Provider spare removed." in removed.content.decode()
    event = AuditEvent.objects.get(action="provider.removed")
    assert event.before["name"] == "spare" and event.after == {}


def test_only_an_admin_removes_a_provider_and_only_by_post(client, lead, admin_user):
    client.force_login(admin_user)
    add(client)
    assert client.get("/providers/acme/remove/").status_code == 405
    client.force_login(lead)
    assert client.post("/providers/acme/remove/", SURE).status_code == 403
    assert Provider.objects.filter(name="acme").exists()


def test_keys_unset_names_the_variables_missing_or_empty_and_no_value():
    environ = {"SET_KEY": "sk-live-secret", "EMPTY_KEY": ""}
    assert keys_unset(
        [("b", "SET_KEY"), ("c", "EMPTY_KEY"), ("a", "MISSING_KEY")], environ
    ) == [("a", "MISSING_KEY"), ("c", "EMPTY_KEY")]
    assert keys_unset([], environ) == []


def test_the_pages_warn_of_a_key_variable_this_server_does_not_set(
    client, admin_user, monkeypatch
):
    monkeypatch.setenv("ACME_SET_KEY", "sk-live-do-not-show")
    monkeypatch.delenv("ACME_UNSET_KEY", raising=False)
    for name, key_env in [("acme", "ACME_SET_KEY"), ("zeta", "ACME_UNSET_KEY")]:
        Provider.objects.create(
            name=name, kind="anthropic", base_url="https://x.example", key_env=key_env
        )
    client.force_login(admin_user)

    page = client.get(URL).content.decode()

    assert "1 key variable not set on this server." in page
    assert (
        "Provider zeta: <code>$ACME_UNSET_KEY</code> is not set in this server's "
        "environment."
    ) in page.replace("&#x27;", "'")
    assert "Provider acme:" not in page
    assert "sk-live-do-not-show" not in page
    edit = client.get("/providers/zeta/edit/").content.decode()
    assert "<code>$ACME_UNSET_KEY</code> is not set" in edit
    edit = client.get("/providers/acme/edit/").content.decode()
    assert 'id="keys-unset"' not in edit and "sk-live-do-not-show" not in edit

    monkeypatch.setenv("ACME_UNSET_KEY", "sk-now-set")
    page = client.get(URL).content.decode()
    assert 'id="keys-unset"' not in page and "sk-now-set" not in page


PASTED_KEY = "sk-ant-api03-" + "Zq7" * 30


def test_a_key_pasted_for_its_variable_is_refused_and_never_shown_again(
    client, admin_user
):
    client.force_login(admin_user)

    response = add(client, key_env=PASTED_KEY)

    assert response.status_code == 400
    page = response.content.decode()
    assert "looks like a key itself" in " ".join(
        response.context["form"].errors["key_env"]
    )
    # Not in a message, not in the field shown again; the rest stays to correct.
    assert PASTED_KEY[:20] not in page
    assert response.context["form"]["key_env"].value() == ""
    assert response.context["form"]["name"].value() == "acme"
    assert not Provider.objects.exists()


AT_MOST = "a price is at most 10,000 USD per million tokens."


@pytest.mark.parametrize(
    ("prices", "reason"),
    [
        ("gpt=1e309,1", AT_MOST),
        ("gpt=99999999999999999999,1", AT_MOST),
        ("gpt=1,10001", AT_MOST),
        ("gpt=nan,1", "a price is not a number (nan or infinity)."),
        ("gpt=1,-inf", "a price is not a number (nan or infinity)."),
        ("gpt=-1,1", "prices must be zero or more."),
    ],
)
def test_a_price_past_the_bound_or_not_a_number_is_refused_in_its_words(
    client, admin_user, prices, reason
):
    client.force_login(admin_user)

    response = add(client, prices=prices)

    assert response.status_code == 400
    assert response.context["form"].errors["prices"] == [f"{prices!r}: {reason}"]
    assert not Provider.objects.exists()


def test_the_highest_price_is_taken_and_an_exponent_is_written_out(client, admin_user):
    client.force_login(admin_user)

    assert add(client, prices="big=1e4,1E+2\nsmall=0.08,4").status_code == 302
    assert Provider.objects.get().prices == {
        "big": {"input": "10000", "output": "100"},
        "small": {"input": "0.08", "output": "4"},
    }
    assert "1E+" not in client.get(URL).content.decode()


@pytest.mark.parametrize(
    "typed", ["$ANTHROPIC_KEY", "${ANTHROPIC_KEY}", " $ANTHROPIC_KEY"]
)
def test_a_key_variable_typed_as_the_list_shows_it_is_taken_without_its_dollar(
    client, admin_user, typed
):
    client.force_login(admin_user)

    assert add(client, key_env=typed).status_code == 302
    assert Provider.objects.get().key_env == "ANTHROPIC_KEY"
    assert "$ANTHROPIC_KEY" in client.get(URL).content.decode()


def test_a_key_variable_of_other_characters_is_told_what_a_name_may_hold(
    client, admin_user
):
    client.force_login(admin_user)

    response = add(client, key_env="ÄPI_KEY")

    assert response.status_code == 400
    assert response.context["form"].errors["key_env"] == [
        "That is not an environment variable name: a name is ASCII letters, "
        "digits and _, not starting with a digit."
    ]


def test_a_save_of_an_unchanged_provider_says_nothing_was_saved(client, admin_user):
    client.force_login(admin_user)
    add(client)
    edit = reverse("reviews:provider_edit", args=["acme"])
    shown = client.get(edit).context["form"]
    unchanged = {name: shown[name].value() for name in shown.fields}

    response = post_from_page(client, edit, unchanged, follow=True)

    page = response.content.decode()
    assert "No changes to provider acme: nothing was saved." in page
    assert "Provider acme saved." not in page
    assert not AuditEvent.objects.filter(action="provider.edited").exists()


def test_every_bad_price_line_is_said_beside_the_prices_at_once(client, admin_user):
    client.force_login(admin_user)

    response = add(client, prices="fine=1,2\nfirst=abc\nsecond=1\nthird=-1,2")

    assert response.status_code == 400
    said = response.context["form"].errors["prices"]
    assert [line.split(":")[0] for line in said] == [
        "'first=abc'",
        "'second=1'",
        "'third=-1,2'",
    ]
    assert not Provider.objects.exists()


def test_a_long_provider_name_is_sent_whole_and_refused_in_one_short_line(
    client, admin_user
):
    client.force_login(admin_user)
    # The browser does not cut a longer paste short without a word.
    tag = re.search(r'<input[^>]*name="name"[^>]*>', client.get(URL).text)
    assert tag and "maxlength" not in tag[0]

    response = add(client, name="p" * 120)

    assert response.status_code == 400
    assert response.context["form"].errors["name"] == [
        "At most 64 characters (this one has 120)."
    ]
    assert not Provider.objects.exists()


@pytest.mark.parametrize("page", ["add", "edit"])
def test_a_form_sent_with_htmx_is_refused_in_place_and_a_save_goes_to_the_list(
    client, admin_user, page
):
    """The add and edit forms are sent with htmx: a refused save is the page
    again (400, swapped in place, so Back has no post to send again); a save
    taken sends the browser to the list, as a plain post is redirected."""
    client.force_login(admin_user)
    if page == "edit":
        add(client)
    url = URL if page == "add" else reverse("reviews:provider_edit", args=["acme"])
    htmx = {"HX-Request": "true"}
    data = {
        "name": "acme",
        "kind": "anthropic",
        "base_url": "ftp://x",
        "key_env": "ACME_API_KEY",
        "prices": "",
    }

    post = client.post if page == "add" else partial(post_from_page, client)
    refused = post(url, data, headers=htmx)

    assert refused.status_code == 400
    assert "is not an http(s) URL" in refused.content.decode()
    assert 'id="form-problems"' in refused.content.decode()

    saved = post(url, {**data, "base_url": "https://b.test"}, headers=htmx)

    assert saved.status_code == 200
    assert saved["HX-Redirect"] == URL
    assert Provider.objects.get().base_url == "https://b.test"


EDITED = {
    "name": "acme",
    "kind": "anthropic",
    "base_url": "https://models.example/v1",
    "key_env": "ACME_API_KEY",
    "prices": "claude-x=3,15",
}


def test_a_save_from_a_page_opened_before_anothers_save_is_refused(client, admin_user):
    """Two admins open the edit page; the first saves, the second's save
    (its page older than the first's save) is refused (409): the first's
    values stand, listed beside what the second's form holds, which it
    keeps."""
    client.force_login(admin_user)
    add(client)
    edit = reverse("reviews:provider_edit", args=["acme"])
    first = form_stored(client, edit, "provider-form")
    second = form_stored(client, edit, "provider-form")
    saved = client.post(edit, {**EDITED, **first, "base_url": "https://first.test"})
    assert saved.status_code == 302
    events = AuditEvent.objects.count()

    refused = client.post(edit, {**EDITED, **second, "key_env": "SECOND_KEY"})

    assert refused.status_code == 409
    page = refused.content.decode()
    assert "Provider acme was changed by someone else since you opened" in page
    assert "stored now https://first.test (this form: https://models.example/v1)" in (
        page
    )
    assert refused.context["form"]["key_env"].value() == "SECOND_KEY"
    provider = Provider.objects.get()
    assert (provider.base_url, provider.key_env) == (
        "https://first.test",
        "ACME_API_KEY",
    )
    assert AuditEvent.objects.count() == events


def test_a_provider_save_without_its_fingerprint_is_refused(client, admin_user):
    client.force_login(admin_user)
    add(client)
    edit = reverse("reviews:provider_edit", args=["acme"])

    refused = client.post(edit, {**EDITED, "base_url": "https://b.test"})

    assert refused.status_code == 400
    assert "did not say which stored values" in refused.content.decode()
    assert Provider.objects.get().base_url == "https://models.example/v1"
