"""A real agent's run replayed live and from its tape, with a model that takes
1 s to answer each call.

The agent is Claude Code at its pinned version (``--agent claude-code``,
installed by the setup phase from the agent cache ``REPLAYHUB_AGENT_CACHE``,
by default ``var/agents``, which ``./dev test`` fills) on the calc project of
``tests/agents/test_live_replays.py``. The scripted fake model of
``tests/agents/fakemodels.py`` answers each call after ``--latency`` seconds:
``--calls - 2`` ``Bash`` reads of ``test_calc.py``, the ``Write`` of
``calc.py``, the end of the turn.

One live replay of the run records its tape through the gateway; tape
replays of the same run (``tier="tape"``) then play it. Both must end
``identical``, every call through the gateway must answer 200, and the tape
replays must reach the model zero times; anything else exits 1. A warm-up
replay of another run of the project (no latency) builds the environment
first, so neither figure holds the build.

Figures:

- **agent phase** (the goal is judged on it): the agent sandbox's wall time
  (``Report.agent.duration_s``) of a tape replay, the median of ``--repeat``,
  beside the live replay's. Goal: live / tape >= 5x.
- **whole replay**: ``services.replay_execute`` end to end (provision, the
  environment from the cache, agent, capture, compare, persist), the same
  way; for information.

``--quick`` (3 calls, no warm-up, one tape replay) judges no goal. A full run without
the agent in the cache exits 1; ``--quick`` says so and exits 0. PostgreSQL:
a scratch database on the server of ``DATABASE_URL``.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python benchmarks/agent_tape.py [--calls 20] [--latency 1.0] \\
        [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is benchmarks/; the project root replaces it.
sys.path[0] = str(ROOT)
# The agent cache the tests read, before the settings read it.
os.environ.setdefault("REPLAYHUB_AGENT_CACHE", str(ROOT / "var" / "agents"))

from benchmarks.support import in_scratch_database, judged, record  # noqa: E402

SCRATCH_DB = "replayhub_bench_agent_tape"
AGENT = "claude-code"
RATIO_GOAL = 5.0


def reads(count: int, model: str) -> list[dict]:
    """``count`` answers each showing the test file through the ``Bash`` tool,
    each call with its own id."""
    from tests.agents.fakemodels import anthropic

    return [
        anthropic(
            [
                {
                    "type": "tool_use",
                    "id": f"toolu_bench_read_{n}",
                    "name": "Bash",
                    "input": {
                        "command": "cat test_calc.py",
                        "description": "Show test_calc.py",
                    },
                }
            ],
            "tool_use",
            model,
        )
        for n in range(count)
    ]


def measure(args: argparse.Namespace) -> int:
    import django

    django.setup()
    import pytest

    from replayhub import services
    from replayhub.demo.pkgindex import PackageIndex, write_index
    from replayhub.models import ModelCall, Replay, Run
    from tests.agents import fakemodels
    from tests.agents.test_live_replays import (
        AGENTS,
        GOOD,
        PROMPT,
        calc_repo,
        need_cli,
        register,
    )
    from tests.environments.test_pytest_project import DISTRIBUTIONS, installed_wheel

    enforce = not args.quick
    try:
        need_cli(AGENT)
    except (pytest.skip.Exception, pytest.fail.Exception) as missing:
        print(f"agent_tape: {missing}", file=sys.stderr)
        if enforce:
            return 1
        print("skipped: no agent to replay (not enforced with --quick)")
        return 0
    wire, model, _, _ = AGENTS[AGENT]
    work = Path(os.environ["REPLAYHUB_VAR_DIR"]) / "bench"
    work.mkdir()
    write_index(work / "index", dict(installed_wheel(n) for n in DISTRIBUTIONS))

    def a_run(project, name: str, base: str, original: str) -> Run:
        return Run.objects.create(
            project=project,
            external_id=name,
            title=name,
            prompt=PROMPT,
            original_commit=original,
            base_sha=base,
            model=model,
            provider=project.providers.get().name,
        )

    def replay(run: Run, **tier) -> tuple[Replay, float, float]:
        """One replay of ``run`` here; it, its wall time and its agent phase's."""
        created = services.replay_create(run=run, trigger="command", **tier)
        began = time.perf_counter()
        report = services.replay_execute(replay_id=created.pk)
        whole = time.perf_counter() - began
        done = Replay.objects.get(pk=created.pk)
        verdict = (done.verdict, done.reason_code)
        calls = list(ModelCall.objects.filter(replay=done).order_by("pk"))
        statuses = [c.status for c in calls]
        if report is None or verdict != ("identical", "same_tree"):
            sys.exit(
                f"replay {done.pk} ({tier or 'live'}) ended {verdict}: {done.reason}\n"
                f"its calls' statuses {statuses}, the model heard "
                f"{len(fake.requests)} requests\n"
                f"--- agent output:\n{done.agent_output[-3000:]}"
            )
        if not calls or any(status != "200" for status in statuses):
            sys.exit(f"replay {done.pk}: its calls' statuses {statuses}")
        return done, whole, report.agent.duration_s

    writes = fakemodels.claude_code_writes("calc.py", GOOD, model)
    script = reads(args.calls - len(writes), model) + writes
    # Each answer a message id of its own: given an answer with the id of one
    # it already had, Claude Code asks the same again, and never ends.
    script = [{**answer, "id": f"msg_bench_{n}"} for n, answer in enumerate(script)]
    with (
        PackageIndex(work / "index") as index,
        fakemodels.FakeModel(wire) as fake,
    ):
        repo, base, original = calc_repo(work, index)
        project = register(AGENT, repo, fake, index)

        # The environment (pytest, the CLI) is built here, outside the figures;
        # --quick judges none, and builds it in its live replay instead.
        if not args.quick:
            fake.script(writes)
            warm, warm_s, _ = replay(a_run(project, "warm-up", base, original))
            environment = warm.evidence.get("environment", {})
            print(
                f"warm-up replay {warm_s:.1f} s "
                f"(environment built: {not environment.get('cached', True)})"
            )

        run = a_run(project, "measured", base, original)
        fake.script(script)
        fake.delay = args.latency
        live, live_whole, live_agent = replay(run)
        heard = len(fake.requests)
        print(
            f"live: {heard} calls to the model, agent phase {live_agent:.2f} s, "
            f"whole replay {live_whole:.2f} s"
        )

        tape_whole, tape_agent = [], []
        for _ in range(args.repeat):
            played, whole, agent = replay(run, tier="tape")
            if len(fake.requests) != heard:
                sys.exit(f"tape replay {played.pk} reached the model")
            tape = played.evidence.get("tape") or {}
            if tape.get("source", f"replay {live.pk}") != f"replay {live.pk}":
                sys.exit(f"tape replay {played.pk} played {tape.get('source')}")
            tape_whole.append(whole)
            tape_agent.append(agent)
            print(
                f"tape: served {tape.get('served')} of {tape.get('played')} "
                f"calls, agent phase {agent:.2f} s, whole replay {whole:.2f} s"
            )

    ratio = live_agent / statistics.median(tape_agent)
    whole_ratio = live_whole / statistics.median(tape_whole)
    print(
        f"{heard} calls at {args.latency:g} s: agent phase live {live_agent:.2f} s, "
        f"tape {statistics.median(tape_agent):.2f} s (median of {args.repeat}): "
        f"{ratio:.1f}x (goal >= {RATIO_GOAL:g}x)"
    )
    print(
        f"whole replay: live {live_whole:.2f} s, tape "
        f"{statistics.median(tape_whole):.2f} s: {whole_ratio:.1f}x (information)"
    )
    ok = ratio >= RATIO_GOAL
    record(
        "agent_tape",
        f"Claude Code, {heard} calls at {args.latency:g} s: tape replay's agent phase",
        unit="s",
        samples=tape_agent,
        floor="the same run's live replay's agent phase",
        floor_samples=[live_agent],
        goal=f"live / tape >= {RATIO_GOAL:g}x",
        holds=ok if enforce else None,
        note=f"{ratio:.1f}x faster than live",
    )
    record(
        "agent_tape",
        f"Claude Code, {heard} calls at {args.latency:g} s: whole tape replay",
        unit="s",
        samples=tape_whole,
        floor="the same run's whole live replay",
        floor_samples=[live_whole],
        goal="information",
        holds=None,
        note=f"{whole_ratio:.1f}x faster than live",
    )
    return judged(ok, enforce=enforce)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    args.calls = args.calls or (3 if args.quick else 20)
    args.repeat = args.repeat or (1 if args.quick else 3)
    if args.calls < 3:
        parser.error("--calls: at least 3 (a read, the write, the end)")

    def run() -> int:
        # Under the project's var/, as replay_overhead.py: the sandbox's uid
        # must reach the workspaces inside.
        (ROOT / "var").mkdir(exist_ok=True)
        given = os.environ["REPLAYHUB_VAR_DIR"]
        var = Path(tempfile.mkdtemp(prefix="bench-agent-tape-", dir=ROOT / "var"))
        var.chmod(0o755)
        os.environ["REPLAYHUB_VAR_DIR"] = str(var)
        try:
            return measure(args)
        finally:
            shutil.rmtree(var, ignore_errors=True)
            shutil.rmtree(given, ignore_errors=True)

    return in_scratch_database(SCRATCH_DB, "benchmarks/agent_tape.py", run)


if __name__ == "__main__":
    sys.exit(main())
