"""Replicates spent by sequential stopping beside a fixed k = 10, at equal error.

Simulated runs of known rate (``replayhub.replicates.simulation``): each
repeat draws ``--runs`` rates uniformly from [0, 1] and puts every rule
through the same runs, plus ``--runs / 5`` runs at each edge of the policy's
indifference zone (0.65 and 0.95 for ``p0 = 0.8``), where a wrong decision
is likeliest. The policy is ``p0 = 0.8`` at 90 % with ``k = 10``.

- The figure: replicates a run, sequential stopping (the calibrated truncated
  SPRT of ``replicates.stopping``); the floor: a fixed ten a run, then
  reproduces at nine or more of ten (the cut that holds the same 10 % at both
  edges). Goal: ratio <= 0.60.
- The same at the fixed ten's own exact error (8.6 % a side): the sequential
  test held to it.
- Wrong decisions at each edge, sequential beside fixed; goal <= 10 %
  (three standard errors of the edge runs allowed).

Also printed: an uncorrected Wilson interval after every replicate (its
errors pass 10 %) and an exact interval with a Bonferroni correction (holds,
spends more). Pure Python, no database. ``--quick`` (5,000 runs, 2 repeats)
checks it runs and judges no goal.

    .venv/bin/python benchmarks/replicates.py [--runs 10000] [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from math import sqrt
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/; the project root replaces it.
sys.path[0] = str(ROOT)

from benchmarks.support import judged, record  # noqa: E402
from replayhub.replicates.simulation import (  # noqa: E402
    Tally,
    bonferroni_rule,
    fixed_rule,
    simulate,
    uncorrected_rule,
)
from replayhub.replicates.stopping import (  # noqa: E402
    ReplicatePolicy,
    Rule,
    boundaries,
    rule,
    walk,
)

POLICY = ReplicatePolicy(threshold=0.8, confidence=0.90, most=10)
GOAL_RATIO = 0.60


def fixed_error() -> float:
    """The fixed ten's exact error at its worse edge."""
    fixed = fixed_rule(POLICY)
    return max(
        walk(fixed, POLICY.most, lambda s, f: POLICY.low).reproduces,
        walk(fixed, POLICY.most, lambda s, f: POLICY.high).does_not_reproduce,
    )


def rules() -> dict[str, tuple[ReplicatePolicy, Rule]]:
    matched = ReplicatePolicy(threshold=0.8, confidence=1 - fixed_error(), most=10)
    return {
        "sequential": (POLICY, rule(POLICY)),
        "sequential at the fixed ten's error": (matched, rule(matched)),
        "fixed k = 10": (POLICY, fixed_rule(POLICY)),
        "uncorrected interval": (POLICY, uncorrected_rule(POLICY)),
        "Bonferroni interval": (POLICY, bonferroni_rule(POLICY)),
    }


def repeat(seed: int, runs: int) -> dict[str, tuple[Tally, Tally]]:
    """Every rule over the same runs: spread over [0, 1], and at the edges."""
    draw = random.Random(seed)
    spread = [draw.random() for _ in range(runs)]
    edge_runs = runs // 5
    edges = [POLICY.low] * edge_runs + [POLICY.high] * edge_runs
    return {
        name: (
            simulate(policy, test, spread, random.Random(seed + 1)),
            simulate(policy, test, edges, random.Random(seed + 2)),
        )
        for name, (policy, test) in rules().items()
    }


def report(repeats: list[dict[str, tuple[Tally, Tally]]]) -> None:
    print(
        f"{'rule':<37} {'replicates/run':>14} {'decided':>8} "
        f"{'wrong at 0.65':>13} {'at 0.95':>8} {'worse side, spread':>18}"
    )
    for name in repeats[0]:
        spread = [r[name][0] for r in repeats]
        edges = [r[name][1] for r in repeats]

        def median(values: list[float]) -> float:
            return statistics.median(values)

        print(
            f"{name:<37} {median([t.replays_per_run for t in spread]):14.2f} "
            f"{median([t.decided / t.runs for t in spread]):8.1%} "
            f"{median([t.wrong_reproduces_rate for t in edges]):13.1%} "
            f"{median([t.wrong_does_not_rate for t in edges]):8.1%} "
            f"{median([t.worst_error for t in spread]):18.1%}"
        )
    exact = boundaries(POLICY)
    print(
        f"exact errors of the sequential test: {exact.wrong_reproduces:.1%} at "
        f"0.65, {exact.wrong_does_not:.1%} at 0.95; the fixed ten's "
        f"{fixed_error():.1%} at either"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = args.runs or (5000 if args.quick else 10_000)
    count = args.repeats or (2 if args.quick else 5)
    enforce = not args.quick
    repeats = [repeat(38 + 10 * i, runs) for i in range(count)]
    edge = runs // 5
    print(f"{count} repeats of {runs:,} runs spread over [0, 1], {edge:,} at each edge")
    report(repeats)

    def per_run(name: str) -> list[float]:
        return [r[name][0].replays_per_run for r in repeats]

    fixed = per_run("fixed k = 10")
    ratios = {
        name: statistics.median(per_run(name)) / statistics.median(fixed)
        for name in ("sequential", "sequential at the fixed ten's error")
    }
    slack = 3 * sqrt(POLICY.alpha * (1 - POLICY.alpha) / (runs // 5))
    held = all(
        r[name][1].worst_error <= POLICY.alpha + slack
        for r in repeats
        for name in ("sequential", "sequential at the fixed ten's error")
    )
    ok = held and all(ratio <= GOAL_RATIO for ratio in ratios.values())
    for name, ratio in ratios.items():
        print(f"ratio {name}/fixed {ratio:.2f}x replicates (goal <= {GOAL_RATIO:.2f}x)")
        errors = [r[name][1].worst_error * 100 for r in repeats]
        record(
            "replicates",
            f"replicates a run, {name} (p0 0.8, k 10)",
            unit="replays/run",
            samples=per_run(name),
            floor="a fixed k = 10, reproduces at 9 of 10",
            floor_samples=fixed,
            goal=f"ratio <= {GOAL_RATIO:.2f}",
            holds=(ratio <= GOAL_RATIO) if enforce else None,
            note=f"worse edge's wrong decisions {statistics.median(errors):.1f} %",
        )
    for side, label in (
        ("wrong_reproduces_rate", "0.65"),
        ("wrong_does_not_rate", "0.95"),
    ):
        wrong = [getattr(r["sequential"][1], side) * 100 for r in repeats]
        record(
            "replicates",
            f"wrong decisions at p = {label}, sequential (90 %)",
            unit="%",
            samples=wrong,
            floor="a fixed k = 10",
            floor_samples=[getattr(r["fixed k = 10"][1], side) * 100 for r in repeats],
            goal="<= 10 % (+ 3 standard errors)",
            holds=(max(wrong) <= (POLICY.alpha + slack) * 100) if enforce else None,
        )
    return judged(ok, enforce=enforce)


if __name__ == "__main__":
    sys.exit(main())
