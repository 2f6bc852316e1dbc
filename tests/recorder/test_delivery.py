"""A redirect is not a delivery: the ingest token goes to the server it was
given for and nowhere else, and a run the server redirected is spooled with
the reason, the exit code saying so."""

from __future__ import annotations

import pytest

from replayhub.recorder.delivery import post
from tests.recorder.conftest import LocalHost, make_world, read_spool, spooled

TOKEN = "rhi_0123456789ab_" + "T" * 43
RECORD = {"project": "shop", "external_id": "x", "prompt": "p"}


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirected_post_is_not_delivered_and_the_token_stays(elsewhere, status):
    with LocalHost(status, location=f"{elsewhere.url}/collect?from=rh") as server:
        why = post(server.url, "shop", TOKEN, RECORD)
    assert why is not None
    assert f"answered {status}, a redirect to '{elsewhere.url}/collect?from=rh'" in why
    assert "not delivered" in why
    (got,) = server.received
    assert got[2]["authorization"] == f"Bearer {TOKEN}"
    assert elsewhere.received == []


def test_a_run_whose_server_redirects_is_spooled_with_the_location(
    tmp_path, fake, recorder, elsewhere
):
    world = make_world(tmp_path, fake, "http://unused", recorder)
    world.token = TOKEN
    with LocalHost(302, location=f"{elsewhere.url}/runs") as server:
        recorded = world.record("edit", server=server.url)

        assert recorded.returncode == 75, recorded.stderr
        assert "recorded run" not in recorded.stderr
        assert f"a redirect to '{elsewhere.url}/runs'" in recorded.stderr
        assert "the run is kept in" in recorded.stderr
        (path,) = spooled(world)
        delivery = read_spool(path)
        assert f"a redirect to '{elsewhere.url}/runs'" in delivery["reason"]
        assert delivery["pushed"] is True  # the push went through; the post did not

        # Sent again, it is still not delivered, and still kept.
        again = world.send("--send", str(path))
        assert again.returncode == 75 and "not sent" in again.stderr
        assert "a redirect to" in read_spool(path)["reason"]

    # The server named was asked (with its token), twice; no other host was.
    assert [(method, got["authorization"]) for method, _, got in server.received] == [
        ("POST", f"Bearer {TOKEN}")
    ] * 2
    assert elsewhere.received == []
    assert TOKEN not in path.read_text()
