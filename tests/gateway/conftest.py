"""The gateway's fixtures: the fake provider, and gateways in front of it."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replayhub.demo.model_api import REAL_KEY, StandInProvider
from replayhub.gateway import Caps, ModelGateway, Upstream
from tests.gateway.client import PLACEHOLDER

PRICES = {
    "claude-test": {"input": "3", "output": "15", "cached": "0.3"},
    "claude-other": {"input": "1", "output": "5"},
    "gpt-test": {"input": "2", "output": "8"},
}

MakeGateway = Callable[..., ModelGateway]


@pytest.fixture
def upstream() -> Iterator[StandInProvider]:
    with StandInProvider(key=REAL_KEY) as fake:
        yield fake


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # A unix socket path has at most 107 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="gw-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def providers(base_url: str, prices: dict[str, Any] | None = None) -> list[Upstream]:
    """``claude`` (anthropic) and ``gpt`` (openai, base URL ending in /v1)."""
    prices = PRICES if prices is None else prices
    return [
        Upstream("claude", "anthropic", base_url, REAL_KEY, prices),
        Upstream("gpt", "openai", base_url + "/v1", REAL_KEY, prices),
    ]


@pytest.fixture
def make_gateway(upstream: StandInProvider, socket_dir: Path) -> Iterator[MakeGateway]:
    opened: list[ModelGateway] = []
    numbers = itertools.count()

    def make(
        caps: Caps = Caps(),  # noqa: B008
        *,
        upstreams: list[Upstream] | None = None,
        **kwargs: Any,
    ) -> ModelGateway:
        gateway = ModelGateway(
            socket_dir / f"gateway-{next(numbers)}.sock",
            upstreams if upstreams is not None else providers(upstream.base_url),
            PLACEHOLDER,
            caps,
            **kwargs,
        )
        gateway.start()
        opened.append(gateway)
        return gateway

    yield make
    for gateway in opened:
        gateway.close()


@pytest.fixture
def gateway(make_gateway: MakeGateway) -> ModelGateway:
    return make_gateway()
