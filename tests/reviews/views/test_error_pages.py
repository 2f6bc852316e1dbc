"""No dead ends: styled 403/404/500 pages with the navigation and a way back,
a navigation without links the user cannot open, and quiet logs for 4xx."""

from __future__ import annotations

import logging

import pytest
from django.test import Client
from django.urls import reverse

from reviews import queue_reads
from tests.factories import make_replay


def test_a_missing_page_is_styled_with_the_navigation_and_a_way_back(client, reviewer):
    client.force_login(reviewer)
    response = client.get(
        "/replays/999999/", headers={"Referer": "http://testserver/?project=shop"}
    )
    assert response.status_code == 404
    html = response.content.decode()
    assert 'id="error-page"' in html and "Not found" in html
    assert '<nav aria-label="Main">' in html
    assert 'href="http://testserver/?project=shop"' in html  # back
    assert f'href="{reverse("reviews:queue")}" class="button"' in html


def test_a_foreign_referer_is_not_offered_as_the_way_back(client, reviewer):
    client.force_login(reviewer)
    html = client.get(
        "/no/such/page/", headers={"Referer": "https://evil.example/x"}
    ).content.decode()
    assert "evil.example" not in html


def test_a_forbidden_page_is_styled_and_the_reviewers_nav_hides_it(client, reviewer):
    client.force_login(reviewer)
    response = client.get(reverse("reviews:trends"))
    assert response.status_code == 403
    html = response.content.decode()
    assert "Not for your role" in html
    nav = html[html.index('<nav aria-label="Main">') : html.index("</nav>")]
    assert reverse("reviews:queue") in nav
    assert reverse("reviews:trends") not in nav
    assert reverse("reviews:status") not in nav
    assert reverse("runs_upload") not in nav


def test_each_link_in_the_navigation_opens_for_its_role(db, reviewer, lead, admin_user):
    for user in (reviewer, lead, admin_user):
        client = Client()
        client.force_login(user)
        html = client.get(reverse("reviews:queue")).content.decode()
        nav = html[html.index('<nav aria-label="Main">') : html.index("</nav>")]
        for href in __import__("re").findall(r'href="([^"]+)"', nav):
            status = client.get(href).status_code
            assert status in (200, 302), (user.username, href, status)


def test_a_server_error_is_styled_and_keeps_the_navigation(
    reviewer, monkeypatch, caplog
):
    def broken(*args, **kwargs):
        raise RuntimeError("the queue broke")

    monkeypatch.setattr(queue_reads, "page", broken)
    client = Client(raise_request_exception=False)
    client.force_login(reviewer)
    with caplog.at_level(logging.INFO, logger="django.request"):
        response = client.get(reverse("reviews:queue"))
    assert response.status_code == 500
    html = response.content.decode()
    assert "Server error" in html and '<nav aria-label="Main">' in html
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.levelno == logging.ERROR and record.exc_info


@pytest.mark.parametrize(
    ("path", "status"),
    [("/replays/999999/", 404), ("/trends/", 403), ("/replays/1/claim/", 405)],
)
def test_client_errors_are_logged_at_debug_without_a_traceback(
    client, reviewer, caplog, path, status
):
    client.force_login(reviewer)
    with caplog.at_level(logging.INFO, logger="django.request"):
        assert client.get(path).status_code == status
    # At the default level, nothing: a refused page is no server trouble.
    assert [r for r in caplog.records if r.name == "django.request"] == []
    with caplog.at_level(logging.DEBUG, logger="django.request"):
        assert client.get(path).status_code == status
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.levelno == logging.DEBUG
    assert record.exc_info is None


def test_favicon_answers_with_a_real_icon_without_a_login(client):
    from django.contrib.staticfiles import finders

    answer = client.get("/favicon.ico")

    assert answer.status_code == 302
    assert answer["Location"].endswith("replayhub/favicon.ico")
    icon = finders.find("replayhub/favicon.ico")
    assert icon is not None
    with open(icon, "rb") as file:
        assert file.read(4) == b"\x00\x00\x01\x00"  # the ICO header


# --- an address that only takes a form's submission -----------------------------

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


@pytest.mark.parametrize(
    ("path", "page"),
    [
        ("/text-suites/new/", "/text-suites/"),
        ("/projects/shop/remove/", "/projects/shop/edit/"),
    ],
)
def test_a_browser_opening_a_refused_forms_address_is_sent_to_the_forms_page(
    client, admin_user, path, page
):
    client.force_login(admin_user)
    response = client.get(path, headers=BROWSER)
    assert response.status_code == 302
    assert response["Location"] == page


def test_a_browser_opening_another_post_only_address_gets_a_styled_page(
    client, reviewer
):
    replay = make_replay(verdict="divergent")
    client.force_login(reviewer)
    response = client.get(f"/replays/{replay.pk}/claim/", headers=BROWSER)
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    html = response.content.decode()
    assert 'id="error-page"' in html and '<nav aria-label="Main">' in html
    assert "only takes a form&#x27;s submission" in html
    onward = f'href="/replays/{replay.pk}/" class="button secondary" id="onward"'
    assert onward in html


def test_the_way_onward_never_names_a_page_that_is_not_there(client, reviewer):
    client.force_login(reviewer)
    # No replay 999999: the way onward skips its address for the home page.
    html = client.get("/replays/999999/claim/", headers=BROWSER).content.decode()
    assert "/replays/999999/" not in html.split('id="error-page"')[1]
    assert 'href="/" class="button secondary" id="onward"' in html


@pytest.mark.parametrize(
    "path", ["/text-suites/new/", "/projects/shop/remove/", "/replays/1/claim/"]
)
@pytest.mark.parametrize(
    "headers",
    [{"Accept": "application/json"}, {}, {**BROWSER, "HX-Request": "true"}],
    ids=["api", "no-accept", "htmx"],
)
def test_a_client_that_is_not_a_page_load_keeps_the_bare_405(
    client, admin_user, path, headers
):
    client.force_login(admin_user)
    response = client.get(path, headers=headers)
    assert response.status_code == 405
    assert response.content == b""
