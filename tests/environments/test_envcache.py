"""The environment cache of a worker host: disk cap, least-recently-used
eviction, remembered failures, and entries in use never evicted."""

from __future__ import annotations

import hashlib
import os

import pytest

from replayhub.environments.cache import FAILED, READY, CacheEntry, EnvCache


def key(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def build(cache: EnvCache, n: int, *, size: int, used: float) -> CacheEntry:
    with cache.exclusive(key(n), timeout=1):
        directory = cache.new_build(key(n))
        (directory / "env" / "blob").write_bytes(os.urandom(size))
        entry = cache.commit(
            directory,
            CacheEntry(key=key(n), state=READY, built_at=used, setup_seconds=1.0),
        )
    os.utime(cache.root / key(n) / "used", (used, used))
    return entry


@pytest.fixture
def cache(tmp_path):
    return EnvCache(tmp_path / "envs", max_bytes=300_000, failure_ttl=60)


def test_eviction_under_the_cap_removes_the_least_recently_used_first(cache):
    for n, used in enumerate((100.0, 300.0, 200.0)):
        build(cache, n, size=120_000, used=used)

    removed = cache.evict(now=400.0)

    assert removed == [key(0)]
    assert [e.key for e in cache.entries()] == [key(2), key(1)]
    assert sum(e.size_bytes for e in cache.entries()) <= cache.max_bytes


def test_an_environment_in_use_is_never_evicted(cache):
    for n, used in enumerate((100.0, 300.0, 200.0)):
        build(cache, n, size=120_000, used=used)
    held = cache.hold(key(0), timeout=1)
    assert held is not None

    removed = cache.evict(now=400.0)
    os.close(held)

    assert key(0) not in removed and (cache.root / key(0) / "env").is_dir()
    assert removed == [key(2)]


def test_using_an_environment_makes_it_recent(cache):
    for n, used in enumerate((100.0, 300.0, 200.0)):
        build(cache, n, size=120_000, used=used)
    os.close(cache.hold(key(0), timeout=1) or -1)

    assert cache.evict() == [key(2)]


def test_a_failure_is_remembered_for_its_time_then_forgotten(cache):
    failed = cache.record_failure(
        CacheEntry(
            key=key(7),
            state=FAILED,
            built_at=1000.0,
            setup_seconds=2.0,
            exit_code=3,
            output_tail="boom",
        )
    )

    assert cache.failure_fresh(failed, now=1030.0)
    assert cache.evict(now=1030.0) == []
    assert not cache.failure_fresh(failed, now=1061.0)
    assert cache.evict(now=1061.0) == [key(7)]
    assert cache.get(key(7)) is None


def test_a_success_replaces_a_remembered_failure(cache):
    cache.record_failure(
        CacheEntry(key=key(1), state=FAILED, built_at=1.0, setup_seconds=2.0)
    )
    build(cache, 1, size=10, used=5.0)

    entry = cache.get(key(1))
    assert entry is not None and entry.state == READY


def test_a_key_that_is_not_a_digest_is_refused(cache):
    with pytest.raises(ValueError):
        cache.env_dir("../../etc")
