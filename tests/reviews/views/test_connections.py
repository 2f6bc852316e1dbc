"""A project's connections page: an admin issues an ingest token the API takes
(shown once, stored as a hash only) and revokes it; sets and forgets the forge;
adds and removes webhooks, a refused one beside its one-line reason; no
secret's value ever reaches the page; reviewers are kept out of it all."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from replayhub.models import Forge, IngestToken, Webhook
from reviews.models import AuditEvent
from tests.factories import make_project
from tests.records import jsonl, record

URL = "/projects/shop/connections/"
TOKEN = re.compile(r"rhi_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")
VARIABLE = "REPLAYHUB_REPO_TOKEN_CONNECTIONS"
SECRET = "the-value-only-workers-read"
FORGE = {
    "form": "forge",
    "forge-kind": "github",
    "forge-repo": "acme/shop",
    "forge-token_env": VARIABLE,
    "forge-api_url": "",
}
# A public address, written as one: nothing is resolved.
HOOK_URL = "https://93.184.215.14/services/T000/the-path-is-the-secret?key=k"
WEBHOOK = {
    "form": "webhook",
    "webhook-url": HOOK_URL,
    "webhook-events": ["replay.finished", "review.decided"],
    "webhook-format": "cloudevents",
    "webhook-secret_env": VARIABLE,
}


def as_user(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def push(token: str):
    return Client().post(
        reverse("api_runs_create", args=["shop"]),
        data=jsonl(record()),
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {token}"},
    )


def issue(client, **extra) -> tuple[str, Any]:
    answer = client.post(URL, {"form": "issue", **extra}, follow=True)
    assert answer.redirect_chain == [(URL, 302)]
    found = TOKEN.findall(answer.content.decode())
    assert len(found) == 1, "the token, once"
    return found[0], answer


@pytest.fixture
def shop(db):
    return make_project("shop")


def test_a_token_issued_on_the_page_is_shown_once_and_the_api_takes_it(
    git_project, admin_user, caplog
):
    client = as_user(admin_user)
    detail = client.get("/projects/shop/").content.decode()
    assert f'href="{URL}"' in detail

    with caplog.at_level(logging.DEBUG):
        token, answer = issue(client)

    page = answer.content.decode()
    assert "it cannot be shown again" in page
    assert "no-store" in answer["Cache-Control"]
    assert push(token).status_code == 201
    row = IngestToken.objects.get()
    assert row.last_used_at is not None
    # Only its hash is kept: not in the database, a cookie, the session or a log.
    assert token not in repr(list(IngestToken.objects.values()))
    assert token not in str(client.cookies)
    assert token not in repr(dict(client.session))
    assert token not in caplog.text
    assert all(token not in url for url, _ in answer.redirect_chain)
    again = client.get(URL).content.decode()
    assert TOKEN.search(again) is None
    assert f"rhi_{row.prefix}_…" in again
    assert "Active" in again


def test_reloading_the_page_after_issuing_shows_no_token_and_issues_none(
    git_project, admin_user
):
    client = as_user(admin_user)
    posted = client.post(URL, {"form": "issue"})
    # Post, then redirect: the token is in neither the answer nor its URL.
    assert posted.status_code == 302
    assert posted["Location"] == URL
    assert TOKEN.search(posted.content.decode()) is None

    shown = client.get(URL)
    assert len(TOKEN.findall(shown.content.decode())) == 1
    assert "no-store" in shown["Cache-Control"]

    # A reload is a GET of the same page: nothing shown, nothing issued.
    reloaded = client.get(URL).content.decode()
    assert TOKEN.search(reloaded) is None
    assert "it cannot be shown again" not in reloaded
    assert IngestToken.objects.count() == 1


def test_a_revoked_token_is_refused_by_the_api(git_project, admin_user):
    client = as_user(admin_user)
    token, _ = issue(client)
    row = IngestToken.objects.get()

    # Not until its box is ticked: nothing is revoked, and the page says so.
    kept = client.post(URL, {"form": "revoke", "id": row.pk}, follow=True)
    assert f"Nothing removed: tick “Yes, revoke rhi_{row.prefix}_…” first." in (
        kept.content.decode()
    )
    assert push(token).status_code == 201

    revoked = client.post(
        URL, {"form": "revoke", "id": row.pk, "sure": "yes"}, follow=True
    )

    assert revoked.redirect_chain == [(URL, 302)]
    assert f"Token {row.prefix} revoked" in revoked.content.decode()
    assert push(token).status_code == 403


def test_issuing_with_revoke_the_others_leaves_one_working_token(
    git_project, admin_user
):
    client = as_user(admin_user)
    old, _ = issue(client)
    new, answer = issue(client, rotate="on")

    assert "other tokens of shop are revoked" in answer.content.decode()
    assert push(old).status_code == 403
    assert push(new).status_code == 201


@pytest.mark.parametrize(
    "data",
    [
        {"form": "issue"},
        {"form": "revoke", "id": "1"},
        FORGE,
        {"form": "forget"},
        WEBHOOK,
        {"form": "remove", "id": "1"},
    ],
    ids=lambda data: data["form"],
)
def test_a_reviewer_is_refused_the_page_and_every_post(shop, reviewer, lead, data):
    Forge.objects.create(
        project=shop, kind="github", api_url="https://api.github.com", repo="a/b"
    )
    for user in (reviewer, lead):
        client = as_user(user)
        assert client.get(URL).status_code == 403
        assert client.get("/projects/shop/edit/").status_code == 403
        assert client.post(URL, data).status_code == 403
        assert URL not in client.get("/projects/shop/").content.decode()
    assert IngestToken.objects.count() == 0
    assert Webhook.objects.count() == 0
    assert Forge.objects.get().repo == "a/b"


def test_a_forge_with_a_bad_repo_is_refused_beside_it_and_nothing_is_saved(
    shop, admin_user
):
    client = as_user(admin_user)

    refused = client.post(URL, {**FORGE, "forge-repo": "shop-without-owner"})

    assert refused.status_code == 400
    page = refused.content.decode()
    assert 'id="form-problems"' in page
    assert 'href="#id_forge-repo">Repository</a>: ' in page
    assert "&#x27;shop-without-owner&#x27; is not owner/repo." in page
    assert Forge.objects.count() == 0


def test_an_admin_sets_the_forge_and_forgets_it(shop, admin_user):
    client = as_user(admin_user)

    saved = client.post(URL, FORGE, follow=True)

    assert saved.redirect_chain == [(URL, 302)]
    shown = saved.content.decode()
    assert "acme/shop" in shown and VARIABLE in shown
    assert "https://api.github.com" in shown
    assert Forge.objects.get().repo == "acme/shop"
    client.post(URL, {"form": "forget"})
    assert Forge.objects.count() == 0


def test_a_token_variable_outside_the_allow_list_is_refused_beside_it(shop, admin_user):
    answer = as_user(admin_user).post(URL, {**FORGE, "forge-token_env": "HOME"})

    assert answer.status_code == 400
    assert 'href="#id_forge-token_env">Token variable</a>: ' in answer.content.decode()
    assert Forge.objects.count() == 0


def test_an_api_url_that_is_not_http_is_refused_beside_it_not_beside_the_token(
    shop, admin_user
):
    answer = as_user(admin_user).post(
        URL, {**FORGE, "forge-api_url": "ftp://example.com"}
    )

    page = answer.content.decode()
    assert answer.status_code == 400
    assert (
        'href="#id_forge-api_url">API URL</a>: '
        "The URL must be http:// or https:// with a host"
    ) in page
    assert 'href="#id_forge-token_env">' not in page
    assert Forge.objects.count() == 0


def test_a_webhook_to_a_private_address_is_refused_with_its_reason(shop, admin_user):
    client = as_user(admin_user)

    refused = client.post(URL, {**WEBHOOK, "webhook-url": "http://10.0.0.5/hook"})

    assert refused.status_code == 400
    problems = re.search(
        r'<div class="notice bad form-problems".*?</div>',
        refused.content.decode(),
        re.S,
    )
    assert problems is not None
    assert 'href="#id_webhook-url">URL</a>: 10.0.0.5 resolves to' in problems[0]
    assert Webhook.objects.count() == 0


def test_an_address_no_webhook_can_have_is_refused_beside_the_address(shop, admin_user):
    answer = as_user(admin_user).post(
        URL, {**WEBHOOK, "webhook-url": "ftp://hooks.example.com/rh"}
    )

    page = answer.content.decode()
    assert answer.status_code == 400
    assert 'href="#id_webhook-url">URL</a>: ' in page
    assert 'href="#id_webhook-secret_env">' not in page
    assert Webhook.objects.count() == 0


def test_a_cloudevents_webhook_without_a_key_is_refused_beside_the_key(
    shop, admin_user
):
    answer = as_user(admin_user).post(URL, {**WEBHOOK, "webhook-secret_env": ""})

    assert answer.status_code == 400
    assert (
        'href="#id_webhook-secret_env">Signing key variable</a>: '
        "A CloudEvents webhook is signed."
    ) in answer.content.decode()


def test_a_webhook_is_added_shown_without_its_secret_path_and_removed(shop, admin_user):
    client = as_user(admin_user)

    added = client.post(URL, WEBHOOK, follow=True)

    assert added.redirect_chain == [(URL, 302)]
    page = added.content.decode()
    assert "https://93.184.215.14/…" in page
    assert "the-path-is-the-secret" not in page and "key=k" not in page
    assert "replay.finished, review.decided" in page
    hook = Webhook.objects.get()
    assert hook.url == HOOK_URL
    assert 'href="/projects/shop/#deliveries"' in page

    client.post(URL, {"form": "remove", "id": hook.pk})
    assert Webhook.objects.count() == 1  # not without its ticked box
    client.post(URL, {"form": "remove", "id": hook.pk, "sure": "yes"})
    assert Webhook.objects.count() == 0


def test_a_variables_value_never_reaches_the_page(shop, admin_user, monkeypatch):
    monkeypatch.setenv(VARIABLE, SECRET)
    client = as_user(admin_user)
    client.post(URL, FORGE)
    client.post(URL, WEBHOOK)

    page = client.get(URL).content.decode()

    assert page.count(VARIABLE) >= 2
    assert SECRET not in page


def test_another_projects_token_is_not_revoked_from_this_page(shop, admin_user):
    other = IngestToken.objects.create(
        project=make_project("billing"), prefix="0" * 12, token_sha256="0" * 64
    )

    answer = as_user(admin_user).post(
        URL, {"form": "revoke", "id": other.pk, "sure": "yes"}
    )

    assert answer.status_code == 404
    other.refresh_from_db()
    assert other.revoked_at is None


def test_every_change_is_audited_with_no_secret_in_it(git_project, admin_user):
    client = as_user(admin_user)
    old, _ = issue(client)
    token, _ = issue(client, rotate="on")
    row = IngestToken.objects.active().get()
    client.post(URL, {"form": "revoke", "id": row.pk, "sure": "yes"})
    client.post(URL, FORGE)
    client.post(URL, {"form": "forget"})
    client.post(URL, WEBHOOK)
    client.post(URL, {"form": "remove", "id": Webhook.objects.get().pk, "sure": "yes"})

    events = AuditEvent.objects.filter(object_id=str(git_project.pk)).order_by("pk")
    assert [(e.actor, e.action) for e in events] == [
        (admin_user, "ingest_token.issue"),
        (admin_user, "ingest_token.issue"),
        (admin_user, "ingest_token.revoke"),
        (admin_user, "forge.update"),
        (admin_user, "forge.delete"),
        (admin_user, "webhook.create"),
        (admin_user, "webhook.delete"),
    ]
    first = IngestToken.objects.exclude(pk=row.pk).get()
    assert events[1].after == {"prefix": row.prefix, "revoked": [first.prefix]}
    assert events[3].after["token_env"] == VARIABLE
    assert events[5].after["to"] == "https://93.184.215.14/…"
    recorded = repr(list(events.values("before", "after")))
    assert old not in recorded and token not in recorded
    assert "the-path-is-the-secret" not in recorded


def test_a_token_pasted_for_the_forges_variable_is_refused_and_never_shown(
    shop, admin_user
):
    pasted = "ghp_" + "A1b2" * 10

    answer = as_user(admin_user).post(URL, {**FORGE, "forge-token_env": pasted})

    page = answer.content.decode()
    assert answer.status_code == 400
    assert "That looks like a key itself" in page
    assert pasted[:12] not in page and pasted[:12].capitalize() not in page
    assert not Forge.objects.exists()


@pytest.mark.parametrize(
    ("data", "form", "fields"),
    [
        (
            {
                **WEBHOOK,
                "webhook-url": "http://10.0.0.5/hook",
                "webhook-secret_env": "<b>X</b>",
            },
            "webhook_form",
            ["url", "secret_env"],
        ),
        (
            {**FORGE, "forge-repo": "shop-without-owner", "forge-token_env": "HOME"},
            "forge_form",
            ["repo", "token_env"],
        ),
    ],
    ids=["webhook", "forge"],
)
def test_every_problem_of_a_connection_is_said_at_once_beside_its_field(
    shop, admin_user, data, form, fields
):
    refused = as_user(admin_user).post(URL, data)

    assert refused.status_code == 400
    errors = refused.context[form].errors
    assert sorted(errors) == sorted(fields)
    page = refused.content.decode()
    assert f"Not saved: fix these {len(fields)} first." in page
    for field in fields:
        prefix = form.removesuffix("_form")
        assert f'id="id_{prefix}-{field}_error"' in page
    assert "<b>X</b>" not in page
    assert not Webhook.objects.exists() and not Forge.objects.exists()


@pytest.mark.parametrize(
    ("data", "form", "said"),
    [
        (
            {
                **WEBHOOK,
                "webhook-url": "http://127.0.0.1:8760/admin/",
                "webhook-events": [],
                "webhook-secret_env": "bad name",
            },
            "webhook_form",
            {
                "events": "Tick at least one event.",
                "url": "127.0.0.1 resolves to",
                "secret_env": "That is not an environment variable name",
            },
        ),
        (
            {
                **FORGE,
                "forge-api_url": "http://",
                "forge-repo": "shop-without-owner",
                "forge-token_env": "bad name",
            },
            "forge_form",
            {
                "api_url": "Enter a valid URL.",
                "repo": "'shop-without-owner' is not owner/repo.",
                "token_env": "That is not an environment variable name",
            },
        ),
    ],
    ids=["webhook", "forge"],
)
def test_a_field_the_form_refuses_does_not_hide_the_others_problems(
    shop, admin_user, data, form, said
):
    refused = as_user(admin_user).post(URL, data)

    assert refused.status_code == 400
    errors = refused.context[form].errors
    assert sorted(errors) == sorted(said)
    for field, sentence in said.items():
        assert len(errors[field]) == 1 and errors[field][0].startswith(sentence)
    assert f"Not saved: fix these {len(said)} first." in refused.content.decode()
    assert not Webhook.objects.exists() and not Forge.objects.exists()


@pytest.mark.parametrize("sent", [FORGE, WEBHOOK], ids=["forge", "webhook"])
def test_a_form_sent_with_htmx_is_refused_in_place_and_a_save_reloads_the_page(
    shop, admin_user, sent
):
    """The forge and webhook forms are sent with htmx: a refused save is the
    page again (400, swapped in place, so Back has no post to send again); a
    save taken sends the browser to the page, as a plain post is redirected."""
    client = as_user(admin_user)
    htmx = {"HX-Request": "true"}
    field = "forge-api_url" if sent is FORGE else "webhook-url"

    refused = client.post(URL, {**sent, field: "ftp://x"}, headers=htmx)

    assert refused.status_code == 400
    assert f'href="#id_{field}">' in refused.content.decode()
    assert Forge.objects.count() + Webhook.objects.count() == 0

    saved = client.post(URL, sent, headers=htmx)

    assert saved.status_code == 200
    assert saved["HX-Redirect"] == URL
    assert Forge.objects.count() + Webhook.objects.count() == 1
