"""Who may read trends: leads and admins; reviewers and people without a role not."""

from __future__ import annotations

import pytest
from django.urls import reverse

PAGES = ["reviews:trends", "reviews:trends_export_csv", "reviews:trends_export_json"]
ROLES = [("reviewer", 403), ("lead", 200), ("admin_user", 200), ("nobody", 403)]


@pytest.mark.parametrize("name", PAGES)
@pytest.mark.parametrize(("role", "expected"), ROLES)
def test_only_leads_and_admins_read_the_dashboard_and_its_exports(
    client, request, name, role, expected
):
    client.force_login(request.getfixturevalue(role))
    assert client.get(reverse(name)).status_code == expected


@pytest.mark.parametrize("name", PAGES)
def test_anonymous_visitors_are_sent_to_log_in_before_reading_trends(client, db, name):
    url = reverse(name)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.parametrize(("role", "expected"), ROLES)
def test_the_api_answers_each_role_in_json(client, request, role, expected):
    client.force_login(request.getfixturevalue(role))
    response = client.get(reverse("reviews:api_trends"))
    assert response.status_code == expected
    assert response["Content-Type"] == "application/json"


def test_the_api_answers_anonymous_callers_401_instead_of_a_login_redirect(client, db):
    response = client.get(reverse("reviews:api_trends"))
    assert response.status_code == 401
    assert "log in" in response.json()["error"]


@pytest.mark.parametrize("name", [*PAGES, "reviews:api_trends"])
def test_trends_are_read_only(client, lead, name):
    client.force_login(lead)
    assert client.post(reverse(name)).status_code == 405


def test_the_api_is_served_at_its_documented_path():
    assert reverse("reviews:api_trends") == "/api/v1/trends"
