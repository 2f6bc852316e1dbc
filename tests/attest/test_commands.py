"""manage.py verify_attestation and attestation_key, as an operator runs them."""

from __future__ import annotations

import base64
import json
import stat
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from replayhub.attest import dsse, keys, signing
from replayhub.attest.statement import canonical
from tests.conftest import ROOT, child_env
from tests.factories import make_replay


def verify(envelope: Path, key: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "manage.py",
            "verify_attestation",
            str(envelope),
            "--key",
            str(key),
        ],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def envelope_file(db, signing_key, tmp_path) -> Path:
    path = tmp_path / "replay.intoto.json"
    envelope = signing.replay_envelope(make_replay(verdict="divergent"), signing_key)
    path.write_bytes(canonical(envelope))
    return path


def test_a_good_attestation_prints_its_statement_and_exits_0(
    envelope_file, public_key_file
):
    result = verify(envelope_file, public_key_file)
    assert result.returncode == 0, result.stderr
    statement = json.loads(result.stdout)
    assert statement["predicate"]["verdict"] == "divergent"
    assert result.stderr.startswith("verified: signed by the key ")


def test_one_changed_byte_of_the_payload_is_one_line_and_exit_1(
    envelope_file, public_key_file
):
    envelope = json.loads(envelope_file.read_bytes())
    payload = bytearray(base64.b64decode(envelope["payload"]))
    payload[10] ^= 0x01
    envelope["payload"] = base64.b64encode(bytes(payload)).decode()
    envelope_file.write_text(json.dumps(envelope))
    result = verify(envelope_file, public_key_file)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().count("\n") == 0
    assert "not verified: no signature by the key" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "content", [b"", b"{", b"\x00\xff" * 100, b"[" * 100_000, b'{"payload": 1}']
)
def test_a_malformed_file_is_a_one_line_error(tmp_path, public_key_file, content):
    path = tmp_path / "odd.json"
    path.write_bytes(content)
    with pytest.raises(CommandError, match=r"^not verified: ") as caught:
        call_command("verify_attestation", str(path), "--key", str(public_key_file))
    assert "\n" not in str(caught.value)


def test_a_file_larger_than_an_envelope_is_not_read_whole(tmp_path, public_key_file):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (dsse.MAX_ENVELOPE_BYTES + 10))
    with pytest.raises(CommandError, match="larger than"):
        call_command("verify_attestation", str(path), "--key", str(public_key_file))


def test_a_key_that_is_no_public_key_is_refused(envelope_file, tmp_path):
    key = tmp_path / "not.pub"
    key.write_text("hello")
    with pytest.raises(CommandError, match="not a PEM public key"):
        call_command("verify_attestation", str(envelope_file), "--key", str(key))
    with pytest.raises(CommandError, match="cannot be read"):
        call_command(
            "verify_attestation", str(envelope_file), "--key", str(tmp_path / "none")
        )


def test_attestation_key_makes_a_pair_that_signs_and_verifies(db, settings, tmp_path):
    out, err = StringIO(), StringIO()
    call_command(
        "attestation_key", "--out", str(tmp_path / "keys"), stdout=out, stderr=err
    )
    private = tmp_path / "keys" / "replayhub-attestation.key"
    public = Path(out.getvalue().strip())
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert "REPLAYHUB_ATTESTATION_KEY_FILE=" in err.getvalue()
    assert "PRIVATE" not in err.getvalue() + out.getvalue()
    settings.REPLAYHUB_ATTESTATION_KEY_FILE = str(private)
    key = keys.signing_key()
    assert key is not None
    envelope = signing.replay_envelope(make_replay(), key)
    assert dsse.verify(canonical(envelope), dsse.load_public_key(public.read_bytes()))
    with pytest.raises(CommandError, match="exists"):
        call_command("attestation_key", "--out", str(tmp_path / "keys"))
