"""Every page: anonymous users are sent to log in; each role gets what it should."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import make_replay

PAGES = [
    # (url name, reviewer, lead, admin, nobody)
    ("reviews:queue", 200, 200, 200, 403),
    ("reviews:running", 200, 200, 200, 403),
    ("reviews:trends", 403, 200, 200, 403),
    ("reviews:budgets", 200, 200, 200, 403),
    ("reviews:projects", 200, 200, 200, 403),
    ("reviews:status", 403, 403, 200, 403),
]
ROLES = ["reviewer", "lead", "admin_user", "nobody"]


@pytest.mark.parametrize("name", [row[0] for row in PAGES])
def test_anonymous_visitors_are_sent_to_the_login_page(client, db, name):
    url = reverse(name)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.parametrize(
    ("name", "role", "expected"),
    [(row[0], role, row[1 + i]) for row in PAGES for i, role in enumerate(ROLES)],
)
def test_each_role_gets_exactly_what_it_should(client, request, name, role, expected):
    client.force_login(request.getfixturevalue(role))
    assert client.get(reverse(name)).status_code == expected


# Pages about one replay: (url name, extra url args, reviewer, lead, admin, nobody).
REPLAY_PAGES = [
    ("reviews:replay_detail", [], 200, 200, 200, 403),
    ("reviews:replay_diff_file", ["dod", 0], 200, 200, 200, 403),
]


@pytest.mark.parametrize(
    ("name", "extra", "role", "expected"),
    [
        (row[0], row[1], role, row[2 + i])
        for row in REPLAY_PAGES
        for i, role in enumerate(ROLES)
    ],
)
def test_each_role_reads_replays_as_it_should(
    client, db, request, name, extra, role, expected
):
    replay = make_replay()
    client.force_login(request.getfixturevalue(role))
    url = reverse(name, args=[replay.pk, *extra])
    assert client.get(url).status_code == expected


@pytest.mark.parametrize("name", [row[0] for row in REPLAY_PAGES])
def test_anonymous_visitors_are_sent_to_log_in_before_reading_a_replay(
    client, db, name
):
    replay = make_replay()
    args = [replay.pk] if name == "reviews:replay_detail" else [replay.pk, "dod", 0]
    url = reverse(name, args=args)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


# Mutations: (url name, reviewer, lead, admin, nobody) for a POST.
ACTIONS = [
    ("reviews:next", 302, 403, 302, 403),
    ("reviews:replay_claim", 302, 403, 302, 403),
    ("reviews:replay_release", 302, 403, 302, 403),
    ("reviews:replay_decide", 302, 403, 302, 403),
]


@pytest.mark.parametrize(
    ("name", "role", "expected"),
    [(row[0], role, row[1 + i]) for row in ACTIONS for i, role in enumerate(ROLES)],
)
def test_only_deciders_may_claim_and_decide(client, db, request, name, role, expected):
    replay = make_replay()
    client.force_login(request.getfixturevalue(role))
    args = [] if name == "reviews:next" else [replay.pk]
    response = client.post(reverse(name, args=args), {"decision": "confirm"})
    assert response.status_code == expected


def test_the_login_page_is_public(client, db):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b"Log in" in response.content


def test_logging_in_lands_on_the_queue(client, reviewer):
    response = client.post(
        reverse("login"), {"username": "rita", "password": "pw-rita"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("reviews:queue")
    assert b"Review queue" in response.content


def test_a_wrong_password_is_refused_with_a_message(client, reviewer):
    response = client.post(reverse("login"), {"username": "rita", "password": "nope"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content


@pytest.mark.parametrize(
    ("role", "expected"), [("reviewer", 302), ("lead", 302), ("admin_user", 200)]
)
def test_only_staff_reach_the_django_admin(client, request, role, expected):
    user = request.getfixturevalue(role)
    if role == "admin_user":
        user.is_staff = True
        user.save()
    client.force_login(user)
    assert client.get(reverse("admin:index")).status_code == expected


def test_the_navigation_links_every_page(client, admin_user):
    client.force_login(admin_user)
    html = client.get(reverse("reviews:queue")).content.decode()
    for name in [
        "reviews:queue",
        "reviews:trends",
        "reviews:budgets",
        "reviews:projects",
    ]:
        assert f'href="{reverse(name)}"' in html


def test_the_worker_check_is_a_post_only_for_admins(client, reviewer, admin_user):
    client.force_login(reviewer)
    assert client.post(reverse("reviews:worker_check_create")).status_code == 403
    client.force_login(admin_user)
    assert client.get(reverse("reviews:worker_check_create")).status_code == 405


def test_logout_is_a_post(client, reviewer):
    client.force_login(reviewer)
    response = client.post(reverse("logout"))
    assert response.status_code == 302
    assert client.get(reverse("reviews:queue")).status_code == 302
