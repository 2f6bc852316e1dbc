"""Nothing is lost: a run that cannot be pushed or posted is spooled inside
.git, and ``--send`` / ``--send-all`` deliver it later."""

from __future__ import annotations

import socket
import stat

import pytest

from replayhub.models import Preflight, Run
from tests.recorder.conftest import World, read_spool, spooled

pytestmark = pytest.mark.services


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_that_does_not_answer_spools_the_run_and_send_delivers_it(
    world: World,
):
    down = f"http://127.0.0.1:{closed_port()}"
    recorded = world.record(server=down)
    assert recorded.returncode == 75
    assert "did not answer" in recorded.stderr
    (path,) = spooled(world)
    assert f"replayhub-record --send {path}" in recorded.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    delivery = read_spool(path)
    record = delivery["record"]
    assert delivery["pushed"] is True and delivery["server"] == down
    assert world.origin_ref(record["original_branch"]) == record["original_commit"]
    assert world.token not in path.read_text()
    assert not Run.objects.exists()

    sent = world.send("--send", str(path), "--server", world.server)
    assert sent.returncode == 0, sent.stderr
    run = world.stored(record["external_id"])
    assert run.original_commit == record["original_commit"]
    assert run.preflight == Preflight.READY
    assert not path.exists()


def test_a_failed_push_spools_the_run_unposted_and_send_all_pushes_then_posts(
    world: World,
):
    recorded = world.record("edit", "--remote", "nowhere")
    assert recorded.returncode == 75
    assert "the push to 'nowhere' failed" in recorded.stderr
    (path,) = spooled(world)
    delivery = read_spool(path)
    ref = delivery["record"]["original_branch"]
    assert delivery["pushed"] is False and delivery["remote"] == "nowhere"
    # Posted before its commit is in the repository, the run would be
    # unreproducible for good: it waits for the push.
    assert not Run.objects.exists() and world.origin_ref(ref) == ""

    again = world.send("--send-all")
    assert again.returncode == 75 and "0 of 1" in again.stderr
    assert read_spool(path)["reason"].startswith("the push to 'nowhere' failed")

    sent = world.send("--send-all", "--remote", "origin", "--server", world.server)
    assert sent.returncode == 0, sent.stderr
    assert "1 of 1 spooled run(s) sent" in sent.stderr
    run = world.stored(delivery["record"]["external_id"])
    assert world.origin_ref(ref) == run.original_commit
    assert run.preflight == Preflight.READY
    assert spooled(world) == []


def test_a_refused_token_spools_the_run_with_the_servers_reason(world: World, tmp_path):
    spool_dir = tmp_path / "spool"
    forged = "rhi_000000000000_" + "A" * 43
    env = world.env(REPLAYHUB_TOKEN=forged)
    recorded = world.record("edit", "--spool-dir", str(spool_dir), env=env)
    assert recorded.returncode == 75
    assert "the server refused the record (401)" in recorded.stderr
    (path,) = spool_dir.glob("*.json")
    assert spooled(world) == []

    sent = world.send("--send", str(path))
    assert sent.returncode == 0, sent.stderr
    assert Run.objects.get().external_id == path.stem
    assert not path.exists()
