"""The environment store in a bucket of an S3-compatible object store, served
here by a local server speaking S3's wire (moto's): an environment built on
one host is fetched from the bucket by another without running setup; what
the bucket returns is as untrusted as a shared directory's files (digest,
caps, one log line); a bucket out of reach costs a build, never a replay."""

from __future__ import annotations

import json
import logging
import os
import uuid

import boto3
import pytest
from django.conf import settings

from replayhub.environments import locations, store
from replayhub.environments.locations import Bucket
from tests.environments.test_store import (
    KEY,
    STORE_LOG,
    make_tree,
    prepare_on,
    stamp,
    warnings_from_store,
)
from tests.environments.test_store import hosts as hosts
from tests.environments.test_store import project as project
from tests.servers import free_port

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "replayhub-test",
    "AWS_SECRET_ACCESS_KEY": "replayhub-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def endpoint():
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def bucket(endpoint, monkeypatch) -> Bucket:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    name = f"envs-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
    return Bucket(name, "team-a/", endpoint)


def objects(bucket: Bucket) -> dict[str, bytes]:
    listed = bucket.client.list_objects_v2(Bucket=bucket.name)
    return {
        item["Key"]: bucket.client.get_object(Bucket=bucket.name, Key=item["Key"])[
            "Body"
        ].read()
        for item in listed.get("Contents", [])
    }


# -- two hosts, one bucket, the real sandbox -------------------------------------


@pytest.mark.django_db
def test_a_second_host_fetches_the_environment_from_the_bucket_without_setup(
    hosts,
    project,
    calc_repo,
    bucket,
    settings,
):
    settings.REPLAYHUB_ENV_STORE_DIR = ""
    settings.REPLAYHUB_ENV_STORE_URL = f"s3://{bucket.name}/team-a"
    settings.REPLAYHUB_ENV_STORE_ENDPOINT = bucket.endpoint

    built, setups = prepare_on(hosts.a, project, calc_repo)
    built.close()
    assert setups == 1 and "source" not in built.summary()
    held = objects(bucket)
    assert sorted(held) == [f"team-a/{built.key}.json", f"team-a/{built.key}.tar.gz"]
    manifest = json.loads(held[f"team-a/{built.key}.json"])
    assert manifest["size"] == len(held[f"team-a/{built.key}.tar.gz"])

    fetched, setups = prepare_on(hosts.b, project, calc_repo)
    with fetched:
        assert setups == 0 and fetched.cached
        assert stamp(fetched) == stamp(built)
    # Nothing of the store's was written into the shared directory's place.
    assert not hosts.store.exists()


# -- the bucket's bytes, as untrusted as a directory's ------------------------------


def test_a_tree_published_to_the_bucket_comes_back_whole(tmp_path, bucket, caplog):
    env = make_tree(tmp_path / "env")
    manifest = store.publish(bucket, KEY, env, setup_seconds=1.5, label="calc")
    dest = tmp_path / "fetched"
    dest.mkdir()

    got = store.fetch(bucket, KEY, dest, max_bytes=10**7, max_entries=100)

    assert got == manifest
    assert (dest / "lib" / "b.txt").read_text() == "contents"
    assert (dest / "bin" / "python").readlink().as_posix() == "/usr/bin/python3"
    assert warnings_from_store(caplog) == []
    # No part file is left anywhere: not in the bucket, not in the work dir.
    assert sorted(objects(bucket)) == [f"team-a/{KEY}.json", f"team-a/{KEY}.tar.gz"]
    work = settings.REPLAYHUB_WORK_DIR
    assert not list(work.glob("env-store-*")), list(work.glob("env-store-*"))


def tampered(bucket: Bucket, tmp_path, change) -> None:
    store.publish(bucket, KEY, make_tree(tmp_path / "env"), setup_seconds=1, label="")
    name = f"team-a/{KEY}.tar.gz"
    data = bucket.client.get_object(Bucket=bucket.name, Key=name)["Body"].read()
    bucket.client.put_object(Bucket=bucket.name, Key=name, Body=change(data))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda data: (
                data[:100] + bytes(b ^ 0xFF for b in data[100:116]) + data[116:]
            ),
            "sha256 differs",
        ),
        (lambda data: data[:500], "manifest says"),
        (lambda data: data + b"\0" * 5000, "manifest says"),
    ],
    ids=["flipped", "cut short", "grown"],
)
def test_a_tampered_object_is_refused_in_one_line(
    tmp_path, bucket, caplog, change, said
):
    tampered(bucket, tmp_path, change)
    dest = tmp_path / "fetched"
    dest.mkdir()
    caplog.clear()

    assert store.fetch(bucket, KEY, dest, max_bytes=10**7, max_entries=100) is None
    (line,) = warnings_from_store(caplog)
    assert said in line and str(bucket) in line
    assert list(dest.iterdir()) == []


def test_an_object_over_the_cap_is_refused_before_it_is_read(tmp_path, bucket, caplog):
    # A manifest that owns up to a small archive, beside an object of 3 MB.
    store.publish(bucket, KEY, make_tree(tmp_path / "env"), setup_seconds=1, label="")
    bucket.client.put_object(
        Bucket=bucket.name, Key=f"team-a/{KEY}.tar.gz", Body=os.urandom(3 << 20)
    )
    dest = tmp_path / "fetched"
    dest.mkdir()
    caplog.clear()

    assert store.fetch(bucket, KEY, dest, max_bytes=1_000_000, max_entries=100) is None
    (line,) = warnings_from_store(caplog)
    assert "over 1000000" in line


def test_a_key_the_bucket_lacks_is_no_warning(tmp_path, bucket, caplog):
    caplog.set_level(logging.INFO, logger=STORE_LOG)
    assert store.fetch(bucket, KEY, tmp_path, max_bytes=10**6, max_entries=10) is None
    assert warnings_from_store(caplog) == []
    assert any("is not in the store s3://" in r.getMessage() for r in caplog.records)


def test_a_bucket_out_of_reach_costs_a_build_never_a_crash(
    tmp_path, monkeypatch, caplog
):
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    away = Bucket("envs-away", "", f"http://127.0.0.1:{free_port()}")
    env = make_tree(tmp_path / "env")
    dest = tmp_path / "fetched"
    dest.mkdir()

    assert store.fetch(away, KEY, dest, max_bytes=10**6, max_entries=10) is None
    with pytest.raises(Exception, match="Could not connect"):
        store.publish(away, KEY, env, setup_seconds=1, label="")
    (line,) = warnings_from_store(caplog)
    assert "building it instead" in line and "Could not connect" in line
    # The credentials are boto3's own: none of them reaches a log line.
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in logged


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://bucket/x", "not an s3:// URL"),
        ("s3://Bad_Bucket/x", "not a bucket name"),
        ("s3://envs/a/../b", "plain path parts"),
        ("s3://envs/a?versionId=1", "plain path parts"),
    ],
)
def test_a_store_url_that_is_no_bucket_says_why(url, said):
    with pytest.raises(ValueError, match=said):
        locations.parse_url(url)


def test_the_bucket_is_taken_before_the_directory(settings):
    settings.REPLAYHUB_ENV_STORE_DIR = "/srv/envs"
    settings.REPLAYHUB_ENV_STORE_URL = "s3://team-envs/replayhub"
    settings.REPLAYHUB_ENV_STORE_ENDPOINT = "http://127.0.0.1:9000"
    where = locations.configured()
    assert isinstance(where, Bucket)
    assert (where.name, where.prefix, where.endpoint) == (
        "team-envs",
        "replayhub/",
        "http://127.0.0.1:9000",
    )
    settings.REPLAYHUB_ENV_STORE_URL = ""
    assert str(locations.configured()) == "/srv/envs"


def test_a_store_url_that_is_no_bucket_stops_the_start(settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.REPLAYHUB_ENV_STORE_URL = "s3://Bad_Bucket/x"
    with pytest.raises(SystemCheckError, match=r"replayhub\.E002.*not a bucket name"):
        call_command("check")
