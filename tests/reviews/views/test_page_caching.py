"""A page a signed-in person sees is never kept by the browser's cache, so
Back and Forward ask the server again; the JSON API is left to its own
headers."""

from __future__ import annotations

from tests.factories import make_replay


def cached(response) -> set[str]:
    """The response's Cache-Control directives, e.g. {"no-store", "private"}."""
    said = response.get("Cache-Control", "")
    return {part.strip() for part in said.split(",") if part.strip()}


def test_every_page_a_signed_in_person_sees_is_never_stored(client, reviewer):
    replay = make_replay(verdict="divergent")
    client.force_login(reviewer)

    for path in ("/", f"/replays/{replay.pk}/", "/done/"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response["Content-Type"].startswith("text/html")
        assert {"no-store", "no-cache", "private", "max-age=0"} <= cached(response), (
            path
        )


def test_the_page_a_refused_role_gets_is_never_stored_either(client, reviewer):
    client.force_login(reviewer)
    response = client.get("/providers/")
    assert response.status_code == 403
    assert "no-store" in cached(response)


def test_the_json_api_keeps_its_own_headers(client, reviewer):
    replay = make_replay(verdict="divergent")
    client.force_login(reviewer)

    answer = client.get(f"/api/v1/replays/{replay.pk}")

    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/json"
    assert "no-store" not in cached(answer)
