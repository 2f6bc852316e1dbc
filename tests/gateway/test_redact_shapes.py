"""Known key shapes are masked in a record's line before it is read: every
provider's key, a forge token, an ingest token, a Bearer credential -- and
nothing else, the line still valid JSON, the stored record and its hash of the
masked text. (Its cost on a line without a key: benchmarks/ingest.py.)"""

from __future__ import annotations

import json
import secrets
import string

import pytest

from replayhub.gateway.redact import mask_key_shapes
from replayhub.ingest.fastpath import read_record

ALNUM = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


# Made here, at random, in each provider's shape: a real key in a test file
# would be one more leak.
KEYS = {
    "anthropic": "sk-ant-api03-" + rand(93, ALNUM + "-_") + "AA",
    "openai project": "sk-proj-" + rand(48, ALNUM + "-_") + "T3BlbkFJ" + rand(48),
    "openai service account": "sk-svcacct-" + rand(40, ALNUM + "-_"),
    "openai legacy": "sk-" + rand(20) + "T3BlbkFJ" + rand(20),
    "openai, 48 characters": "sk-" + rand(48),
    "google": "AIza" + rand(35, ALNUM + "-_"),
    "github classic": "ghp_" + rand(36),
    "github app": "ghs_" + rand(36),
    "github fine-grained": "github_pat_" + rand(22) + "_" + rand(59),
    "hugging face": "hf_" + rand(34),
    "aws access key id": "AKIA" + rand(16, string.ascii_uppercase + string.digits),
    "replayhub ingest": "rhi_" + secrets.token_hex(6) + "_" + rand(43, ALNUM + "-_"),
}


@pytest.mark.parametrize("kind", list(KEYS))
def test_each_key_shape_is_masked_wherever_it_stands(kind):
    key = KEYS[kind]
    line = json.dumps(
        {
            "agent": {"command": ["agent", "--api-key", key, f"--key={key}"]},
            "output": f"export OPENAI_API_KEY={key}\n{key}\tthen more",
        }
    ).encode()
    masked = mask_key_shapes(line)
    assert key.encode() not in masked
    record = json.loads(masked)
    assert record["agent"]["command"] == [
        "agent",
        "--api-key",
        "[redacted]",
        "--key=[redacted]",
    ]
    assert record["output"] == (
        "export OPENAI_API_KEY=[redacted]\n[redacted]\tthen more"
    )


@pytest.mark.parametrize("scheme", ["Bearer", "bearer"])
def test_a_bearer_credential_is_masked_and_its_scheme_kept(scheme):
    token = rand(40, ALNUM + "._-") + "=="
    line = json.dumps({"headers": {"authorization": f"{scheme} {token}"}}).encode()
    assert json.loads(mask_key_shapes(line)) == {
        "headers": {"authorization": f"{scheme} [redacted]"}
    }


@pytest.mark.parametrize(
    "text",
    [
        "risk-assessment-for-the-quarterly-report-of-the-team",
        "task-" + "a" * 47,  # one short of a key
        "sk-" + "a" * 49,  # one past: not of the length
        "sha256 " + "8f5c1e494de27acd945a9d9ac3dbfbe47c45b7be9f75699e34b7e32274fc0af9",
        "a Bearer token is sent with each call",
        "ghp_short and AIzaShort and hf_x",
        "AKIA" + "B" * 17,
        "rhi_" + "0" * 12 + "_short",
        "sk-learn, sk-ant, sk-proj",
    ],
)
def test_what_is_no_key_is_left_as_it_is(text):
    line = json.dumps({"output": text}).encode()
    assert mask_key_shapes(line) == line


def test_an_imported_record_is_stored_and_hashed_masked():
    key = KEYS["anthropic"]
    record = {
        "project": "shop",
        "external_id": "run-1",
        "prompt": "fix it",
        "base_sha": "a" * 40,
        "started_at": "2025-01-01T00:00:00+00:00",
        "output": f"using {key}",
        "agent": {"command": ["claude", "--api-key", key]},
        "tape": [{"status": 401, "response": {"error": {"message": f"bad {key}"}}}],
    }
    clean = json.loads(json.dumps(record).replace(key, "[redacted]"))
    read = read_record(json.dumps(record).encode(), max_prompt_bytes=2**20)
    assert key not in read.output and key not in read.stored_json
    assert key not in json.dumps(read.raw)
    assert read.raw["agent"]["command"][-1] == "[redacted]"
    # The same record as if sent masked: one record, not two.
    assert (
        read.sha256
        == read_record(json.dumps(clean).encode(), max_prompt_bytes=2**20).sha256
    )
