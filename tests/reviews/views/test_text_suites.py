"""Run now on the text suites page: a suite run again as a new one, queued
for a worker, said on the page, audited; for those who may, by POST only."""

from __future__ import annotations

import pytest
from django.test import Client

from replayhub.models import Provider, TextSuite
from reviews.models import AuditEvent

URL = "/text-suites/"


@pytest.fixture
def finished(providers, text_run) -> TextSuite:
    return TextSuite.objects.create(
        project=text_run.project,
        target="gpt:gpt-test",
        judge="claude:claude-test",
        filters={"model": None, "since": None, "include_failed": False, "max": 1},
        total=1,
        replayed=1,
        mean_similarity=0.5,
        finished_at=text_run.imported_at,
    )


def run_now(client, suite: TextSuite):
    return client.post(f"{URL}{suite.pk}/run/", follow=True)


def test_an_admin_runs_a_suite_again_and_sees_it_queued(client, admin_user, finished):
    client.force_login(admin_user)
    page = client.get(URL).content.decode()
    assert "Run now" in page and f'action="{URL}{finished.pk}/run/"' in page

    response = run_now(client, finished)

    again = TextSuite.objects.exclude(pk=finished.pk).get()
    assert response.redirect_chain == [(URL, 302)]
    assert [str(m) for m in response.context["messages"]] == [
        f"Suite #{again.pk} queued: {finished.project.slug}'s runs on gpt:gpt-test "
        f"again, as suite #{finished.pk} chose them. A worker starts it; this "
        "page shows how far it got."
    ]
    assert "waiting for a worker" in response.content.decode()
    assert (again.target, again.judge, again.filters) == (
        finished.target,
        finished.judge,
        finished.filters,
    )
    assert again.requested_by == admin_user and again.finished_at is None
    event = AuditEvent.objects.get(action="text_suite.request")
    assert event.actor == admin_user
    assert (event.after["suite"], event.after["again_of"]) == (again.pk, finished.pk)


def test_a_suite_whose_provider_is_gone_is_not_started_and_says_why(
    client, admin_user, finished
):
    Provider.objects.filter(name="claude").delete()
    client.force_login(admin_user)

    response = run_now(client, finished)

    assert f"Suite #{finished.pk} not started: no provider named 'claude'" in (
        response.content.decode().replace("&#x27;", "'")
    )
    assert TextSuite.objects.count() == 1
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize("role", ["reviewer", "lead"])
def test_only_those_who_may_run_suites_see_or_use_run_now(
    client, request, role, finished
):
    client.force_login(request.getfixturevalue(role))
    assert "Run now" not in client.get(URL).content.decode()
    assert client.post(f"{URL}{finished.pk}/run/").status_code == 403
    assert TextSuite.objects.count() == 1


def test_run_now_is_post_only_and_needs_the_csrf_token(admin_user, finished):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.get(f"{URL}{finished.pk}/run/").status_code == 405
    assert client.post(f"{URL}{finished.pk}/run/").status_code == 403
    assert client.post(f"{URL}999999/run/").status_code in (403, 404)
    assert TextSuite.objects.count() == 1


def test_an_unfinished_suite_shows_how_far_it_got(client, reviewer, finished):
    TextSuite.objects.filter(pk=finished.pk).update(finished_at=None, skipped=1)
    client.force_login(reviewer)

    page = client.get(URL).content.decode()

    assert "1 of 1 runs done" in page


def test_an_admin_starts_a_first_suite_from_the_page(
    client, admin_user, providers, text_run
):
    client.force_login(admin_user)
    page = client.get(URL).content.decode()
    assert "No suites yet. Start the first one below." in page
    assert 'action="/text-suites/new/"' in page

    response = client.post(
        f"{URL}new/",
        {
            "project": text_run.project.slug,
            "provider": "gpt",
            "model": "gpt-test",
            "judge_provider": "claude",
            "judge_model": "claude-test",
            "only_model": "",
            "since": "2020-01-02",
            "most": "5",
        },
        follow=True,
    )

    suite = TextSuite.objects.get()
    assert response.redirect_chain == [(URL, 302)]
    assert [str(m) for m in response.context["messages"]] == [
        f"Suite #{suite.pk} queued: {text_run.project.slug}'s runs on gpt:gpt-test. "
        "A worker starts it; this page shows how far it got."
    ]
    assert (suite.project, suite.target, suite.judge) == (
        text_run.project,
        "gpt:gpt-test",
        "claude:claude-test",
    )
    assert suite.filters == {
        "model": None,
        "since": "2020-01-02",
        "include_failed": False,
        "max": 5,
    }
    assert suite.requested_by == admin_user
    event = AuditEvent.objects.get(action="text_suite.request")
    assert (event.after["suite"], event.after["again_of"]) == (suite.pk, None)


def test_a_new_suite_refused_says_why_beside_its_fields_and_starts_nothing(
    client, admin_user, providers, text_run
):
    client.force_login(admin_user)

    response = client.post(
        f"{URL}new/",
        {
            "project": "no-such-project",
            "provider": "gpt",
            "model": "",
            "judge_provider": "claude",
            "most": "0",
        },
    )

    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="form-problems"' in page
    assert "Select a valid choice" in page  # the project
    assert "Give both a judge provider and a judge model, or neither." in page
    assert "At least 1 run." in page
    assert TextSuite.objects.count() == 0
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize("role", ["reviewer", "lead"])
def test_only_those_who_may_run_suites_may_start_one(
    client, request, role, providers, text_run
):
    client.force_login(request.getfixturevalue(role))
    assert "New suite" not in client.get(URL).content.decode()
    response = client.post(
        f"{URL}new/",
        {"project": text_run.project.slug, "provider": "gpt", "model": "gpt-test"},
    )
    assert response.status_code == 403
    assert TextSuite.objects.count() == 0


@pytest.mark.parametrize(
    ("given", "beside"),
    [
        ({"judge_provider": "claude"}, "judge_model"),
        ({"judge_model": "claude-test"}, "judge_provider"),
    ],
)
def test_half_a_judge_is_said_beside_the_judge_field_left_empty(
    client, admin_user, providers, text_run, given, beside
):
    client.force_login(admin_user)

    response = client.post(
        f"{URL}new/",
        {
            "project": text_run.project.slug,
            "provider": "gpt",
            "model": "gpt-test",
            **given,
        },
    )

    assert response.status_code == 400
    said = "Give both a judge provider and a judge model, or neither."
    assert response.context["form"].errors == {beside: [said]}
    page = response.content.decode()
    assert f'<div id="id_{beside}_error"><p class="error" role="alert">{said}' in page
    assert f'href="#id_{beside}"' in page
    assert TextSuite.objects.count() == 0


def test_a_new_suite_sent_with_htmx_is_refused_in_place_then_started(
    client, admin_user, providers, text_run
):
    """The new suite's form is sent with htmx: a refused one is the page
    again (400, swapped in place, so Back has no post to send again); one
    started sends the browser to the suites, as a plain post is redirected."""
    client.force_login(admin_user)
    htmx = {"HX-Request": "true"}
    data = {"project": text_run.project.slug, "provider": "gpt", "model": "gpt-test"}

    refused = client.post(f"{URL}new/", {**data, "most": "0"}, headers=htmx)

    assert refused.status_code == 400
    assert "At least 1 run." in refused.content.decode()
    assert TextSuite.objects.count() == 0

    started = client.post(f"{URL}new/", data, headers=htmx)

    assert started.status_code == 200
    assert started["HX-Redirect"] == URL
    assert TextSuite.objects.count() == 1
