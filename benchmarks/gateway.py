"""Latency the model gateway adds to a call, beside a direct call to the same
upstream, in the same run.

The upstream is the tests' local fake of both provider APIs
(``replayhub/demo/model_api.py``) on 127.0.0.1; the floor is the agent calling
it directly over a kept-alive TCP connection, the figure the same agent calling
through the gateway's unix socket over a kept-alive connection (the gateway
keeps its own upstream connections alive too). Direct and gateway calls
alternate, so drift on the machine hits both. Figures:

- **non-streaming**: request sent to whole response read, for an anthropic
  message and an openai chat completion (a short prompt), and for an anthropic
  message with a ~200 KB context (the size an agent's later turns reach;
  reported, no goal);
- **first streamed chunk**: request sent to the first body bytes of a stream.

"added" is the gateway's median (p99) minus the direct call's.
Every gateway call must answer 200 and be recorded with its usage; anything
else stops the benchmark with status 1. Goal: at most 2 ms added at the
median, for non-streaming calls and for the first streamed chunk; missed goals
exit 1. ``--quick`` (60 calls per figure) checks the calls and prints every
figure but does not fail on the goal: timing on a shared machine is noise at
that size.

    .venv/bin/python benchmarks/gateway.py [--calls 2000] [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/; the project root replaces it.
sys.path[0] = str(ROOT)

from benchmarks.support import record  # noqa: E402
from replayhub.demo.model_api import StandInProvider  # noqa: E402
from replayhub.gateway import Caps, ModelGateway, Upstream  # noqa: E402
from tests.gateway.client import (  # noqa: E402
    UnixHTTPConnection,
    anthropic_headers,
    chat_body,
    messages_body,
    openai_headers,
)

GOAL_MS = 2.0
KEY = "sk-bench-real-key"
PLACEHOLDER = "replayhub-bench-placeholder"
PRICES = {
    "claude-test": {"input": 3, "output": 15},
    "gpt-test": {"input": 2, "output": 8},
}
# A later turn of an agent: ~200 KB of conversation before a short question.
BIG_BODY = json.dumps(
    {
        "model": "claude-test",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": " ".join(f"w{i}" for i in range(40_000))},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": "and now?"},
        ],
    }
).encode()


def timed_call(
    conn: http.client.HTTPConnection,
    path: str,
    body: bytes,
    headers: dict[str, str],
    *,
    first_chunk: bool = False,
) -> float:
    """Milliseconds to the whole response, or to its first body bytes."""
    started = time.perf_counter()
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    if first_chunk:
        if not response.read1(65536):
            sys.exit(f"{path}: a stream with no body")
        elapsed = time.perf_counter() - started
        rest = response.read()
    else:
        rest = response.read()
        elapsed = time.perf_counter() - started
    if response.status != 200:
        sys.exit(f"{path}: {response.status} {rest[:200]!r}")
    return elapsed * 1000


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


class Case:
    """One figure: a request made directly and through the gateway."""

    def __init__(
        self,
        label: str,
        *,
        direct: tuple[str, bytes, dict[str, str]],
        gateway: tuple[str, bytes, dict[str, str]],
        first_chunk: bool = False,
        goal: bool = True,
    ) -> None:
        self.label = label
        self.direct = direct
        self.gateway = gateway
        self.first_chunk = first_chunk
        self.goal = goal
        self.samples: dict[str, list[float]] = {"direct": [], "gateway": []}

    def run(
        self, connections: dict[str, http.client.HTTPConnection], *, keep: bool
    ) -> None:
        for route in ("direct", "gateway"):
            path, body, headers = getattr(self, route)
            ms = timed_call(
                connections[route], path, body, headers, first_chunk=self.first_chunk
            )
            if keep:
                self.samples[route].append(ms)

    def added(self, stat: Callable[[list[float]], float]) -> float:
        return stat(self.samples["gateway"]) - stat(self.samples["direct"])


def cases() -> list[Case]:
    anthropic_direct = anthropic_headers(KEY)
    anthropic_gateway = anthropic_headers(PLACEHOLDER)
    small = messages_body("hello there world")
    return [
        Case(
            "anthropic message",
            direct=("/v1/messages", small, anthropic_direct),
            gateway=("/claude/v1/messages", small, anthropic_gateway),
        ),
        Case(
            "openai chat completion",
            direct=("/v1/chat/completions", chat_body("hello"), openai_headers(KEY)),
            gateway=(
                "/gpt/v1/chat/completions",
                chat_body("hello"),
                openai_headers(PLACEHOLDER),
            ),
        ),
        Case(
            "anthropic message, 200 KB context",
            direct=("/v1/messages", BIG_BODY, anthropic_direct),
            gateway=("/claude/v1/messages", BIG_BODY, anthropic_gateway),
            goal=False,
        ),
        Case(
            "anthropic stream, first chunk",
            direct=(
                "/v1/messages",
                messages_body("a b c", stream=True),
                anthropic_direct,
            ),
            gateway=(
                "/claude/v1/messages",
                messages_body("a b c", stream=True),
                anthropic_gateway,
            ),
            first_chunk=True,
        ),
        Case(
            "openai stream, first chunk",
            # The gateway asks the upstream for usage; the direct call does too,
            # so both streams are the same.
            direct=(
                "/v1/chat/completions",
                json.dumps(
                    {
                        **json.loads(chat_body("a b c", stream=True)),
                        "stream_options": {"include_usage": True},
                    }
                ).encode(),
                openai_headers(KEY),
            ),
            gateway=(
                "/gpt/v1/chat/completions",
                chat_body("a b c", stream=True),
                openai_headers(PLACEHOLDER),
            ),
            first_chunk=True,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    calls = args.calls or (60 if args.quick else 2000)
    socket_dir = tempfile.mkdtemp(prefix="gw-bench-", dir="/tmp")
    try:
        return measure(calls=calls, socket_dir=socket_dir, enforce=not args.quick)
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


def measure(*, calls: int, socket_dir: str, enforce: bool) -> int:
    with StandInProvider(KEY) as upstream:
        upstream.record = False
        providers = [
            Upstream("claude", "anthropic", upstream.base_url, KEY, PRICES),
            Upstream("gpt", "openai", upstream.base_url + "/v1", KEY, PRICES),
        ]
        socket_path = f"{socket_dir}/gateway.sock"
        with ModelGateway(socket_path, providers, PLACEHOLDER, Caps()) as gateway:
            connections: dict[str, http.client.HTTPConnection] = {
                "direct": http.client.HTTPConnection("127.0.0.1", upstream.port),
                "gateway": UnixHTTPConnection(socket_path),
            }
            figures = cases()
            warmup = max(10, calls // 20)
            # Cases take turns too, so none runs on a quieter machine than another.
            for i in range(warmup + calls):
                for case in figures:
                    case.run(connections, keep=i >= warmup)
            recorded = gateway.calls
    expected = (warmup + calls) * len(figures)
    unmetered = [c for c in recorded if c.status != 200 or not c.output_tokens]
    if len(recorded) != expected or unmetered:
        print(f"gateway recorded {len(recorded)} calls of {expected}; {unmetered[:3]}")
        return 1

    print(f"{calls} calls per figure and route, after {warmup} to warm up; ms")
    print(f"{'':<36} {'direct':>15}  {'gateway':>15}  {'added':>15}  goal")
    print(
        f"{'':<36} {'median    p99':>15}  {'median    p99':>15}  {'median    p99':>15}"
    )
    missed = []
    for case in figures:
        direct, through = case.samples["direct"], case.samples["gateway"]
        added = case.added(statistics.median)
        goal = f"<= {GOAL_MS:g}" if case.goal else "-"
        print(
            f"{case.label:<36} {statistics.median(direct):6.3f} {p99(direct):8.3f}  "
            f"{statistics.median(through):6.3f} {p99(through):8.3f}  "
            f"{added:6.3f} {case.added(p99):8.3f}  {goal}"
        )
        if case.goal and added > GOAL_MS:
            missed.append(case.label)
        record(
            "gateway",
            f"model call through the gateway: {case.label}",
            unit="ms",
            samples=through,
            floor="the same call made directly",
            floor_samples=direct,
            goal=f"adds <= {GOAL_MS:g} ms (median)" if case.goal else "",
            holds=(added <= GOAL_MS if enforce else None) if case.goal else None,
            note=f"adds {added:.3f} ms at the median, {case.added(p99):.3f} at p99",
        )
    if missed:
        print(f"goal missed: {', '.join(missed)} add more than {GOAL_MS:g} ms")
        return 1 if enforce else 0
    print(f"goal met: at most {GOAL_MS:g} ms added at the median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
