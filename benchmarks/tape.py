"""A tape replay against a live one: a ten-call agent run whose upstream
answers each call in 1 s, made live through the gateway (recording its tape),
then again through a gateway that serves that tape; and what one served call
costs.

The upstream is the local fake of both provider APIs
(``replayhub/demo/model_api.py``) with ``first_byte_delay`` set to the
per-call latency. The agent is a kept-alive connection to the gateway's unix
socket sending a conversation that grows by one turn a call (openai chat
completions, the second half streamed). Figures:

- **run**: wall time of the ten calls live and from the tape; the ratio is
  live over tape. Goal: at least 5x.
- **served call**: request sent to whole response read for one call answered
  from a tape, beside its floor, the same request made directly to the fake
  upstream with no delay (what any local HTTP answer costs). Goal: at most
  2 ms added at the median.

Every call must answer 200 and the tape replay must reach the upstream zero
times; anything else exits 1, as does a missed goal unless ``--quick``.

    .venv/bin/python benchmarks/tape.py [--latency 1.0] [--served 400] [--quick]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/; the project root replaces it.
sys.path[0] = str(ROOT)

from benchmarks.support import record  # noqa: E402
from replayhub.demo.model_api import StandInProvider  # noqa: E402
from replayhub.gateway import Caps, ModelGateway, Upstream  # noqa: E402
from replayhub.gateway.playback import TapePlayer, TapeRecorder  # noqa: E402
from tests.gateway.client import UnixHTTPConnection, openai_headers  # noqa: E402

KEY = "sk-bench-real-key"
PLACEHOLDER = "replayhub-bench-placeholder"
CALLS = 10
RATIO_GOAL = 5.0
SERVED_GOAL_MS = 2.0


def bodies() -> list[bytes]:
    """The run's ten requests: a conversation one turn longer each call."""
    messages = [{"role": "system", "content": "be brief"}]
    out = []
    for n in range(CALLS):
        messages.append({"role": "user", "content": f"step {n}: list the files"})
        out.append(
            json.dumps(
                {"model": "gpt-test", "messages": messages, "stream": n >= CALLS // 2}
            ).encode()
        )
        messages.append({"role": "assistant", "content": f"step {n}: list the files"})
    return out


def call(
    conn: http.client.HTTPConnection, path: str, body: bytes, key: str = PLACEHOLDER
) -> float:
    started = time.perf_counter()
    conn.request("POST", path, body=body, headers=openai_headers(key))
    response = conn.getresponse()
    data = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    if response.status != 200:
        sys.exit(f"{path}: {response.status} {data[:200]!r}")
    return elapsed


def gateway(directory: Path, name: str, upstream: StandInProvider, **kwargs):
    return ModelGateway(
        directory / f"{name}.sock",
        [Upstream("gpt", "openai", upstream.base_url + "/v1", KEY, {})],
        PLACEHOLDER,
        Caps(),
        **kwargs,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--served", type=int, default=400)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    enforce = not args.quick
    directory = Path(tempfile.mkdtemp(prefix="bench-tape-", dir="/tmp"))
    path = "/gpt/v1/chat/completions"
    try:
        with StandInProvider(key=KEY) as upstream:
            upstream.record = False
            upstream.first_byte_delay = args.latency
            recorder = TapeRecorder()
            with gateway(directory, "live", upstream, recorder=recorder) as live:
                conn = UnixHTTPConnection(live.socket_path, timeout=60)
                started = time.perf_counter()
                for body in bodies():
                    call(conn, path, body)
                live_s = time.perf_counter() - started
            recorded, _ = recorder.exchanges()
            before = upstream.calls
            player = TapePlayer(recorded)
            with gateway(directory, "tape", upstream, player=player) as played:
                conn = UnixHTTPConnection(played.socket_path, timeout=60)
                started = time.perf_counter()
                for body in bodies():
                    call(conn, path, body)
                tape_s = time.perf_counter() - started
            if upstream.calls != before or player.finish() is not None:
                sys.exit("the tape replay reached the upstream or left its tape")

            # One served call, many times, beside the same call made directly.
            upstream.first_byte_delay = 0.0
            body = bodies()[0]
            served, direct = [], []
            one = [recorded[0]] * args.served
            player = TapePlayer(one)
            with gateway(directory, "served", upstream, player=player) as played:
                through = UnixHTTPConnection(played.socket_path, timeout=60)
                straight = http.client.HTTPConnection("127.0.0.1", upstream.port)
                for _ in range(args.served):
                    served.append(call(through, path, body))
                    direct.append(call(straight, "/v1/chat/completions", body, KEY))
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    ratio = live_s / tape_s
    added = statistics.median(served) - statistics.median(direct)
    print(
        f"ten calls at {args.latency:g} s: live {live_s:.2f} s, tape "
        f"{tape_s * 1000:.1f} ms, {ratio:.0f}x"
    )
    print(
        f"a served call: {statistics.median(served):.3f} ms median, floor "
        f"{statistics.median(direct):.3f} ms (direct), adds {added:.3f} ms"
    )
    record(
        "tape",
        f"ten-call run at {args.latency:g} s a call: tape replay",
        unit="ms",
        samples=[tape_s * 1000],
        floor="the same run live",
        floor_samples=[live_s * 1000],
        goal=f"live / tape >= {RATIO_GOAL:g}x",
        holds=ratio >= RATIO_GOAL if enforce else None,
        note=f"{ratio:.0f}x faster than live",
    )
    record(
        "tape",
        "one call served from a tape",
        unit="ms",
        samples=served,
        floor="the same call made directly to the local upstream",
        floor_samples=direct,
        goal=f"adds <= {SERVED_GOAL_MS:g} ms (median)",
        holds=added <= SERVED_GOAL_MS if enforce else None,
        note=f"adds {added:.3f} ms at the median",
    )
    if enforce and (ratio < RATIO_GOAL or added > SERVED_GOAL_MS):
        print("goal missed")
        sys.exit(1)


if __name__ == "__main__":
    main()
