"""Issuing and rotating ingest tokens: the command and the Django admin."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import CommandError, call_command
from django.urls import reverse

from replayhub.models import IngestToken
from tests.records import jsonl, record


def issue(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest_token", *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


def push(client, token: str):
    return client.post(
        reverse("api_runs_create", args=["shop"]),
        data=jsonl(record()),
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_the_command_prints_a_token_once_that_the_api_accepts(client, git_project):
    token, note = issue("shop")

    assert token.startswith("rhi_")
    assert "cannot be shown again" in note
    assert token not in note
    assert push(client, token).status_code == 201


def test_each_token_is_different_and_several_can_be_active(client, git_project):
    first, _ = issue("shop")
    second, _ = issue("shop")
    assert first != second
    assert IngestToken.objects.active().count() == 2


def test_rotating_revokes_the_old_tokens(client, git_project):
    old, _ = issue("shop")
    new, note = issue("shop", "--rotate")

    assert "revoked" in note
    assert push(client, old).status_code == 403
    assert push(client, new).status_code == 201
    assert IngestToken.objects.active().count() == 1


def test_an_unknown_project_is_a_usage_error(db):
    with pytest.raises(CommandError, match="there is no project 'nope'") as caught:
        issue("nope")
    assert caught.value.returncode == 2


def test_the_admin_group_may_manage_ingest_tokens(db):
    admin = Group.objects.get(name="admin")
    codenames = set(
        admin.permissions.filter(content_type__model="ingesttoken").values_list(
            "codename", flat=True
        )
    )
    assert codenames == {
        "add_ingesttoken",
        "change_ingesttoken",
        "delete_ingesttoken",
        "view_ingesttoken",
    }
    assert not Group.objects.get(name="reviewer").permissions.filter(
        pk__in=Permission.objects.filter(content_type__model="ingesttoken")
    )


@pytest.fixture
def staff_admin(admin_user):
    admin_user.is_staff = True
    admin_user.save()
    return admin_user


def test_the_admin_lists_tokens_but_issues_none_that_a_cookie_would_carry(
    client, staff_admin, git_project
):
    issue("shop")
    client.force_login(staff_admin)

    listed = client.get(reverse("admin:replayhub_ingesttoken_changelist"))
    added = client.post(
        reverse("admin:replayhub_ingesttoken_add"), {"project": git_project.pk}
    )

    assert IngestToken.objects.get().prefix in listed.content.decode()
    assert added.status_code == 403
    assert IngestToken.objects.count() == 1
    assert "messages" not in added.cookies


def test_the_admin_can_revoke(client, staff_admin, git_project):
    old, _ = issue("shop")
    client.force_login(staff_admin)
    newest = IngestToken.objects.active().get()

    client.post(
        reverse("admin:replayhub_ingesttoken_changelist"),
        {"action": "revoke", "_selected_action": [newest.pk]},
    )

    assert push(client, old).status_code == 403
    assert not IngestToken.objects.active().exists()
