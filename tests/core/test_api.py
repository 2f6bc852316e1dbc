"""The HTTP API: pushing runs with an ingest token, reading evidence with a session."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.test import Client
from django.urls import reverse

from replayhub.ingest.tokens import token_issue
from replayhub.models import (
    Comparison,
    IngestToken,
    Preflight,
    Replay,
    Run,
    TestOutcome,
)
from tests.factories import make_git_project
from tests.gitrepos import make_repo
from tests.records import jsonl, line, record
from tests.transcript_files import CART, transcript_files

NDJSON = "application/x-ndjson"


@pytest.fixture
def token(git_project):
    return token_issue(project=git_project)[1]


def push(client, body: bytes, token: str | None, slug="shop", **headers):
    if token is not None:
        headers.setdefault("Authorization", f"Bearer {token}")
    return client.post(
        reverse("api_runs_create", args=[slug]),
        data=body,
        content_type=headers.pop("content_type", NDJSON),
        headers=headers,
    )


# --- authentication --------------------------------------------------------------


def test_a_push_without_a_token_is_401_with_a_bearer_challenge(client, git_project):
    response = push(client, jsonl(record()), None)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="replayhub"'
    assert "Authorization: Bearer" in response.json()["error"]
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "header",
    ["Basic dXNlcjpwdw==", "Bearer", "Bearer not-a-token", "Bearer rhi_zz_short"],
)
def test_a_malformed_authorization_header_is_401(client, git_project, header):
    response = push(client, jsonl(record()), None, Authorization=header)
    assert response.status_code == 401


def test_a_token_with_a_wrong_secret_is_401(client, git_project, token):
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert push(client, jsonl(record()), forged).status_code == 401


def test_a_revoked_token_is_403(client, git_project, token):
    IngestToken.objects.get().revoke()
    response = push(client, jsonl(record()), token)
    assert response.status_code == 403
    assert response.json() == {"error": "the ingest token was revoked"}


def test_a_token_of_another_project_is_403(client, git_project, git_repo, token):
    make_git_project(git_repo, slug="billing")
    response = push(client, jsonl(record()), token, slug="billing")
    assert response.status_code == 403
    assert not Run.objects.exists()


def test_an_unknown_project_answers_like_a_foreign_one_so_nothing_leaks(
    client, git_project, token
):
    unknown = push(client, jsonl(record()), token, slug="no-such-project")
    assert unknown.status_code == 403
    assert unknown.json() == {"error": "the ingest token is not valid for this project"}
    assert (
        push(
            client,
            jsonl(record()),
            "rhi_" + "0" * 12 + "_" + "x" * 43,
            slug="no-such-project",
        ).status_code
        == 401
    )


def test_the_token_is_stored_only_as_its_hash(git_project, token):
    row = IngestToken.objects.get()
    assert row.token_sha256 == hashlib.sha256(token.encode()).hexdigest()
    assert token.startswith(f"rhi_{row.prefix}_")
    secret = token.rsplit("_", 1)[1][-20:]
    stored = json.dumps(list(IngestToken.objects.values()), default=str)
    assert secret not in stored


def test_a_push_needs_no_csrf_token_and_no_session(git_project, token):
    client = Client(enforce_csrf_checks=True)
    assert push(client, jsonl(record()), token).status_code == 201


def test_a_successful_push_records_when_the_token_was_last_used(
    client, git_project, token
):
    assert IngestToken.objects.get().last_used_at is None
    push(client, jsonl(record()), token)
    assert IngestToken.objects.get().last_used_at is not None


def test_only_post_is_allowed(client, git_project, token):
    url = reverse("api_runs_create", args=["shop"])
    response = client.get(url, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 405


# --- bodies ----------------------------------------------------------------------


def test_a_jsonl_body_is_imported_and_answered_with_the_summary(
    client, git_project, token
):
    response = push(client, jsonl(record(1), record(2, original_commit=None)), token)

    assert response.status_code == 201
    body = response.json()
    assert (body["imported"], body["duplicates"], body["invalid"]) == (2, 0, [])
    assert body["preflight"] == {
        "ready": 0,
        "unreproducible": 2,
        "failed": 0,
        "pending": 0,
    }
    assert Run.objects.filter(preflight=Preflight.UNREPRODUCIBLE).count() == 2


def test_a_json_array_body_is_imported_too(client, git_project, token):
    body = json.dumps([record(1), record(2)]).encode()
    response = push(client, body, token, content_type="application/json")
    assert response.status_code == 201
    assert response.json()["imported"] == 2


def test_pushing_the_same_records_again_is_200_with_only_duplicates(
    client, git_project, token
):
    push(client, jsonl(record(1), record(2)), token)
    response = push(client, jsonl(record(1), record(2)), token)
    assert response.status_code == 200
    assert (response.json()["imported"], response.json()["duplicates"]) == (0, 2)


def test_invalid_lines_give_400_with_their_errors_and_the_valid_lines_are_imported(
    client, git_project, token
):
    body = line(record(1)) + b"not json\n" + line(record(3, started_at="noon"))
    body += line(record(4))

    response = push(client, body, token)

    assert response.status_code == 400
    data = response.json()
    assert data["imported"] == 2
    assert [entry["line"] for entry in data["invalid"]] == [2, 3]
    assert data["invalid"][1]["error"].startswith("started_at: ")
    assert data["error"] == (
        "2 of the records are invalid and were not imported; the other 2 were imported"
    )
    assert Run.objects.count() == 2


def test_a_file_with_no_valid_line_says_nothing_was_imported(
    client, git_project, token
):
    response = push(client, b"not json\n" + line(record(3, started_at="noon")), token)

    assert response.status_code == 400
    assert response.json()["imported"] == 0
    assert response.json()["error"] == (
        "2 of the records are invalid and were not imported; nothing was imported"
    )
    assert not Run.objects.exists()


def test_a_conflict_is_409_and_the_stored_run_is_kept(client, git_project, token):
    push(client, jsonl(record(1)), token)
    response = push(client, jsonl(record(1, prompt="changed"), record(2)), token)
    assert response.status_code == 409
    assert response.json()["conflicts"] == [
        {"line": 1, "project": "shop", "external_id": "run-0001"}
    ]
    assert Run.objects.get(external_id="run-0001").prompt == record(1)["prompt"]
    assert Run.objects.filter(external_id="run-0002").exists()


def test_array_elements_are_checked_one_by_one_by_position(client, git_project, token):
    body = b'[%s, [1], "x", %s]' % (
        json.dumps(record(1)).encode(),
        json.dumps(record(4)).encode(),
    )
    response = push(client, body, token, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["imported"] == 2
    assert response.json()["invalid"] == [
        {"line": 2, "error": "a record must be a JSON object, not an array"},
        {"line": 3, "error": "a record must be a JSON object, not a string"},
    ]


def test_a_broken_array_keeps_the_elements_before_the_break(client, git_project, token):
    body = b"[" + json.dumps(record(1)).encode() + b', {"external_id": '
    response = push(client, body, token, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["imported"] == 1
    [invalid] = response.json()["invalid"]
    assert invalid["line"] == 2
    assert invalid["error"].endswith("the rest of the array was not read")


def test_invalid_utf8_in_one_array_element_spoils_only_that_element(
    client, git_project, token
):
    bad = json.dumps(record(2)).encode().replace(b"Fix bug", b"Fix \xff bug")
    body = b"[" + json.dumps(record(1)).encode() + b"," + bad + b"]"
    response = push(client, body, token, content_type="application/json")
    assert response.json()["imported"] == 1
    assert response.json()["invalid"][0]["error"].startswith("not valid UTF-8")


def test_a_record_naming_another_project_is_refused_by_the_api(
    client, git_project, git_repo, token
):
    make_git_project(git_repo, slug="billing")
    response = push(client, jsonl(record(1, project="billing")), token)
    assert response.status_code == 400
    assert not Run.objects.exists()


def test_a_body_above_the_limit_is_413_before_anything_is_read(
    client, git_project, token, settings
):
    settings.REPLAYHUB_API_MAX_BODY_BYTES = 1000
    response = push(client, jsonl(*(record(n) for n in range(10))), token)
    assert response.status_code == 413
    assert "1,000 bytes" in response.json()["error"]
    assert not Run.objects.exists()


def test_an_empty_body_is_400(client, git_project, token):
    response = client.post(
        reverse("api_runs_create", args=["shop"]),
        data=b"",
        content_type=NDJSON,
        headers={"Authorization": f"Bearer {token}"},
        CONTENT_LENGTH="0",
    )
    assert response.status_code == 400
    assert "the body is empty" in response.json()["error"]


@pytest.mark.parametrize("length", [None, "", "-1", "1e3", "\u00b2"])
def test_a_body_without_a_usable_length_is_411(rf, git_project, token, length):
    from replayhub.api import runs_create

    request = rf.post(
        "/",
        data=jsonl(record()),
        content_type=NDJSON,
        headers={"Authorization": f"Bearer {token}"},
    )
    if length is None:
        del request.META["CONTENT_LENGTH"]
    else:
        request.META["CONTENT_LENGTH"] = length
    assert runs_create(request, slug="shop").status_code == 411


# --- reading evidence ------------------------------------------------------------


@pytest.fixture
def run(git_project):
    return Run.objects.create(
        project=git_project,
        external_id="run-<b>1</b>",
        prompt="<script>alert(1)</script>",
        raw={"external_id": "run-<b>1</b>", "extra": [1, 2]},
        provenance={"reproducible": True},
    )


@pytest.fixture
def replay(run):
    replay = Replay.objects.create(
        run=run,
        project=run.project,
        status="finished",
        phase="done",
        verdict="divergent",
        reason_code="replay_fails_tests",
        reason="The replay's tests fail where the original's pass.",
        evidence={"tests": "independently_executed"},
        cost_usd="1.2500",
    )
    Comparison.objects.create(
        replay=replay,
        identical=False,
        original_tree="a" * 40,
        replay_tree="b" * 40,
        diff_of_diffs="diff --git a/x b/x\n",
        original_patch="patch one",
        replay_patch="patch two",
        differing_paths=["cart.py"],
    )
    TestOutcome.objects.create(
        replay=replay, tree="replay", ran=True, passed=False, output_tail="1 failed"
    )
    return replay


@pytest.mark.parametrize("name", ["api_run_detail", "api_replay_detail"])
def test_anonymous_readers_get_401_json_not_a_login_redirect(client, replay, name):
    pk = replay.run_id if name == "api_run_detail" else replay.pk
    response = client.get(reverse(name, args=[pk]))
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize("name", ["api_run_detail", "api_replay_detail"])
def test_users_without_the_view_permission_get_403(client, nobody, replay, name):
    client.force_login(nobody)
    pk = replay.run_id if name == "api_run_detail" else replay.pk
    assert client.get(reverse(name, args=[pk])).status_code == 403


def test_a_run_is_returned_with_its_raw_record_and_provenance(client, reviewer, replay):
    client.force_login(reviewer)
    data = client.get(reverse("api_run_detail", args=[replay.run_id])).json()
    assert data["external_id"] == "run-<b>1</b>"
    assert data["prompt"] == "<script>alert(1)</script>"
    # The prompt is stored once, in its column; the record comes back whole.
    assert data["raw"] == {
        "external_id": "run-<b>1</b>",
        "extra": [1, 2],
        "prompt": "<script>alert(1)</script>",
    }
    assert data["provenance"] == {"reproducible": True}
    assert [r["verdict"] for r in data["replays"]] == ["divergent"]


def test_an_unknown_id_is_404_json(client, reviewer, db):
    client.force_login(reviewer)
    response = client.get(reverse("api_run_detail", args=[999999]))
    assert response.status_code == 404
    assert "error" in response.json()


def test_a_replay_is_returned_with_its_evidence_but_not_the_big_texts(
    client, reviewer, replay
):
    client.force_login(reviewer)
    data = client.get(reverse("api_replay_detail", args=[replay.pk])).json()
    assert (data["verdict"], data["reason_code"]) == ("divergent", "replay_fails_tests")
    assert data["evidence"] == {"tests": "independently_executed"}
    assert data["comparison"]["differing_paths"] == ["cart.py"]
    assert "diff_of_diffs" not in data["comparison"]
    assert data["test_outcomes"][0]["passed"] is False
    assert "output_tail" not in data["test_outcomes"][0]
    assert "cost_usd" not in data  # reviewers do not see money


def test_full_1_adds_the_diffs_and_money_shows_for_leads(client, lead, replay):
    client.force_login(lead)
    url = reverse("api_replay_detail", args=[replay.pk])
    data = client.get(url, {"full": "1"}).json()
    assert data["comparison"]["diff_of_diffs"] == "diff --git a/x b/x\n"
    assert data["comparison"]["replay_patch"] == "patch two"
    assert data["test_outcomes"][0]["output_tail"] == "1 failed"
    assert data["cost_usd"] == "1.2500"


def test_a_replay_shows_its_hunk_classes_and_per_test_cases(client, lead, replay):
    from replayhub.models import Comparison, TestOutcome

    Comparison.objects.filter(replay=replay).update(
        hunk_classes={"cart.py": "whitespace"}, substantive_files=0
    )
    TestOutcome.objects.filter(replay=replay).update(
        cases=[["t::a", "failed", 0.1, "boom"]], cached=True
    )
    client.force_login(lead)
    url = reverse("api_replay_detail", args=[replay.pk])

    brief = client.get(url).json()
    full = client.get(url, {"full": "1"}).json()

    assert brief["comparison"]["hunk_classes"] == {"cart.py": "whitespace"}
    assert brief["test_outcomes"][0]["cached"] is True
    assert "cases" not in brief["test_outcomes"][0]
    assert full["test_outcomes"][0]["cases"] == [["t::a", "failed", 0.1, "boom"]]


# --- transcript formats ---------------------------------------------------------


@pytest.mark.parametrize(
    "format", ["claude-code", "codex", "aider", "swe-agent", "openhands", "swebench"]
)
def test_each_transcript_format_is_taken_with_its_file_name(
    client, db, tmp_path, format
):
    repo = make_repo(tmp_path, {"cart.py": CART})
    project = make_git_project(repo)
    token = token_issue(project=project)[1]
    [file] = [f for f in transcript_files(repo) if f.format == format]
    url = reverse("api_runs_create", args=["shop"])

    def send():
        return client.post(
            f"{url}?format={format}&name={file.name}",
            data=file.data,
            content_type="application/octet-stream",
            headers={"Authorization": f"Bearer {token}"},
        )

    response = send()

    assert response.status_code == 201, response.json()
    assert response.json()["imported"] == 1
    run = Run.objects.get()
    assert run.record["transcript"]["file"] == file.name
    if file.external_id:
        assert run.external_id == file.external_id
    # Sending the same body again is harmless, even for the formats whose
    # time is not in the file.
    again = send()
    assert (again.status_code, again.json()["duplicates"]) == (200, 1)


def test_a_format_the_api_does_not_know_is_400(client, git_project, token):
    url = reverse("api_runs_create", args=["shop"])
    response = client.post(
        f"{url}?format=cursor",
        data=b"{}\n",
        content_type=NDJSON,
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 400
    assert response.json()["error"].startswith("format: 'cursor' is not one of")


def test_an_original_named_in_the_query_is_the_transcript_runs(client, db, tmp_path):
    repo = make_repo(tmp_path, {"cart.py": CART})
    change = repo.commit({"cart.py": CART + "# rounded\n"}, "Round totals")
    project = make_git_project(repo)
    token = token_issue(project=project)[1]
    [file] = [f for f in transcript_files(repo) if f.format == "claude-code"]
    url = reverse("api_runs_create", args=["shop"])

    def send(query: str):
        return client.post(
            f"{url}?{query}&name={file.name}",
            data=file.data,
            content_type="application/octet-stream",
            headers={"Authorization": f"Bearer {token}"},
        )

    native = send(f"format=native&original={change}")
    assert native.status_code == 400
    assert native.json()["error"].startswith("original: only an agent's own file")
    missing = send(f"format=claude-code&original={'f' * 40}")
    assert missing.json()["imported"] == 0
    assert (
        "not a commit of the project repository"
        in (missing.json()["invalid"][0]["error"])
    )

    taken = send(f"format=claude-code&original={change}")

    assert taken.status_code == 201, taken.json()
    assert Run.objects.get().original_commit == change
