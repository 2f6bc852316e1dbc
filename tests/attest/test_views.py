"""The attestation download, the public key, and the replay page's link."""

from __future__ import annotations

import logging

import pytest
from django.urls import reverse

from replayhub.attest import dsse
from replayhub.ingest.tokens import token_issue
from replayhub.models import Replay, ReplayStatus
from reviews.models import ReviewPolicy
from tests.factories import make_project, make_replay

pytestmark = pytest.mark.django_db


def attestation_of(client, replay: Replay, **headers):
    return client.get(
        reverse("api_replay_attestation", args=[replay.pk]), headers=headers
    )


def test_a_reviewer_downloads_an_envelope_that_verifies(client, reviewer, signing_key):
    replay = make_replay(verdict="divergent")
    client.force_login(reviewer)
    response = attestation_of(client, replay)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == (
        f'attachment; filename="replay-{replay.pk}.intoto.json"'
    )
    statement = dsse.verify(response.content, signing_key.public_key())
    assert statement["predicate"]["verdict"] == "divergent"


def test_a_pipelines_token_reads_its_own_projects_attestations_only(
    client, signing_key
):
    replay = make_replay(project=make_project("shop"))
    own = token_issue(project=replay.project)[1]
    other = token_issue(project=make_project("billing"))[1]
    answer = attestation_of(client, replay, Authorization=f"Bearer {own}")
    assert answer.status_code == 200
    refused = attestation_of(client, replay, Authorization=f"Bearer {other}")
    assert refused.status_code == 404
    forged = attestation_of(client, replay, Authorization=f"Bearer {own[:-4]}AAAA")
    assert forged.status_code == 401


def test_without_a_session_the_answer_is_401_json_not_a_redirect(client, signing_key):
    response = attestation_of(client, make_replay())
    assert response.status_code == 401
    assert set(response.json()) == {"error"}


def test_a_user_without_the_permission_is_refused(client, nobody, signing_key):
    client.force_login(nobody)
    assert attestation_of(client, make_replay()).status_code == 403


def test_an_unfinished_replay_has_nothing_to_attest(client, reviewer, signing_key):
    finished = make_replay()
    queued = Replay.objects.create(
        run=finished.run, project=finished.project, attempt=2
    )
    assert queued.status == ReplayStatus.QUEUED
    client.force_login(reviewer)
    response = attestation_of(client, queued)
    assert response.status_code == 409
    assert "has not finished" in response.json()["error"]


def test_blind_review_keeps_the_attestation_from_a_reviewer_who_has_not_judged(
    client, reviewer, signing_key
):
    replay = make_replay(verdict="divergent")
    ReviewPolicy.objects.create(project=replay.project, blind=True)
    client.force_login(reviewer)
    response = attestation_of(client, replay)
    assert response.status_code == 403
    assert "divergent" not in response.content.decode()
    page = client.get(reverse("reviews:replay_detail", args=[replay.pk]))
    assert 'id="attestation"' not in page.content.decode()


def test_with_no_key_configured_there_is_no_attestation_and_no_link(
    client, reviewer, settings
):
    settings.REPLAYHUB_ATTESTATION_KEY_FILE = ""
    settings.REPLAYHUB_ATTESTATION_KEY_ENV = ""
    replay = make_replay()
    client.force_login(reviewer)
    response = attestation_of(client, replay)
    assert response.status_code == 404
    assert "no attestation key is configured" in response.json()["error"]
    page = client.get(reverse("reviews:replay_detail", args=[replay.pk]))
    assert 'id="attestation"' not in page.content.decode()
    assert client.get(reverse("api_attestation_key")).status_code == 404


def test_with_a_key_the_replay_page_links_the_attestation(
    client, reviewer, signing_key
):
    replay = make_replay()
    client.force_login(reviewer)
    page = client.get(reverse("reviews:replay_detail", args=[replay.pk]))
    link = reverse("api_replay_attestation", args=[replay.pk])
    assert f'href="{link}" id="attestation" download' in page.content.decode()


def test_the_key_may_come_from_a_variable_the_operator_names(
    client, reviewer, signing_key, settings, monkeypatch
):
    monkeypatch.setenv(
        "RH_TEST_ATTESTATION_KEY", dsse.private_pem(signing_key).decode()
    )
    settings.REPLAYHUB_ATTESTATION_KEY_FILE = ""
    settings.REPLAYHUB_ATTESTATION_KEY_ENV = "RH_TEST_ATTESTATION_KEY"
    client.force_login(reviewer)
    response = attestation_of(client, make_replay())
    assert dsse.verify(response.content, signing_key.public_key())


def test_an_unreadable_key_is_503_and_the_log_names_the_setting_not_the_key(
    client, reviewer, settings, tmp_path, caplog
):
    bad = tmp_path / "bad.key"
    bad.write_text(
        "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LXRleHQ=\n-----END PRIVATE KEY-----\n"
    )
    settings.REPLAYHUB_ATTESTATION_KEY_FILE = str(bad)
    client.force_login(reviewer)
    with caplog.at_level(logging.WARNING):
        response = attestation_of(client, make_replay())
    assert response.status_code == 503
    assert "\n" not in response.json()["error"]
    assert "REPLAYHUB_ATTESTATION_KEY_FILE" in caplog.text
    assert "c2VjcmV0" not in caplog.text + response.content.decode()


def test_the_public_key_is_served_to_anyone_with_its_id(client, signing_key):
    response = client.get(reverse("api_attestation_key"))
    assert response.status_code == 200
    public = dsse.load_public_key(response.content)
    assert public == signing_key.public_key()
    assert response["ReplayHub-Key-Id"] == dsse.key_id(public)
    assert b"PRIVATE" not in response.content
