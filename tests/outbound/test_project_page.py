"""The project page lists the last deliveries and their answers, escaped, to
those who configure them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from replayhub.models import Delivery, Webhook
from tests.factories import make_project, make_user


@pytest.fixture
def delivered(db):
    project = make_project("shop")
    Delivery.objects.create(
        project=project,
        target="forge",
        event="commit.status",
        key="k1",
        commit="a" * 40,
        summary=f"{'a' * 12} failure (replay 3)",
        body={"state": "failure"},
        status="failed",
        attempts=2,
        http_status=422,
        answer='<script>alert("forge")</script> Validation Failed',
    )
    return project


def test_an_admin_sees_the_last_deliveries_and_their_answers_escaped(
    client, admin_user, delivered
):
    client.force_login(admin_user)
    html = client.get(reverse("reviews:project_detail", args=["shop"])).content.decode()
    section = html[html.index('id="deliveries"') :]
    assert f"{'a' * 12} failure (replay 3)" in section
    assert "<code>422</code>" in section
    assert "Failed" in section
    assert "&lt;script&gt;" in section
    assert "<script>alert" not in html


def test_a_reviewer_does_not_see_them(client, delivered):
    client.force_login(make_user("rita", "reviewer"))
    html = client.get(reverse("reviews:project_detail", args=["shop"])).content.decode()
    assert 'id="deliveries"' not in html


def _empty_state(client, slug: str) -> str:
    html = client.get(reverse("reviews:project_detail", args=[slug])).content.decode()
    section = html[
        html.index('id="deliveries"') : html.index(
            "</section>", html.index('id="deliveries"')
        )
    ]
    assert "<table" not in section
    return section


def test_with_nothing_sent_an_admin_reads_what_will_appear_there_and_when(
    client, admin_user, db
):
    project = make_project("shop")
    client.force_login(admin_user)

    section = _empty_state(client, "shop")
    assert 'id="deliveries-none"' in section
    assert "shop has no forge or webhook" in section
    assert 'href="/projects/shop/connections/"' in section
    assert "when a replay ends, a reviewer decides one, a night closes" in section

    Webhook.objects.create(
        project=project, url="https://hooks.example.com/x", events=["replay.finished"]
    )
    section = _empty_state(client, "shop")
    assert "Nothing sent yet" in section
    assert "when a replay of shop ends, a reviewer decides one or a night closes" in (
        section
    )
    assert "no forge or webhook" not in section
