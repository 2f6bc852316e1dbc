"""What the benchmark scripts share: scratch databases and timing statistics."""

from __future__ import annotations

import statistics
import time
from urllib.parse import urlsplit, urlunsplit


def scratch_url(url: str, name: str) -> str:
    """``url`` pointing at the database ``name`` on the same server."""
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def admin_connect(url: str):
    """A connection to the server's maintenance database, for CREATE/DROP."""
    import psycopg

    parts = urlsplit(url)
    return psycopg.connect(
        host=parts.hostname,
        port=parts.port or 5432,
        user=parts.username,
        password=parts.password,
        dbname="postgres",
        autocommit=True,
    )


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def stats(samples: list[float]) -> dict[str, float]:
    """p50, p95, min and max of timings in seconds, in milliseconds."""
    return {
        "p50": statistics.median(samples) * 1000,
        "p95": percentile(samples, 0.95) * 1000,
        "min": min(samples) * 1000,
        "max": max(samples) * 1000,
    }


def timed(fn, iterations: int, warmup: int = 20) -> list[float]:
    """Seconds per call of ``fn`` after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples
