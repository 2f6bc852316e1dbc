"""The test gate: the project's own test command on a clean checkout of a tree.

Each run gets a fresh checkout and a fresh sandbox. When the trees' first
outcomes disagree, each is run again (``reruns`` more times); an outcome that
changes across attempts makes that tree's suite flaky. The runs do not learn
which tree or attempt they are: the code under test must not be able to tell.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replayhub.git.scratch import GitError, Scratch, remove_tree
from replayhub.sandbox import Bind, Limits, Runner, SandboxSpec
from replayhub.testgate.cases import (
    TestCase,
    compare_cases,
    parse_junit_cases,
    parse_output_cases,
)
from replayhub.testgate.summary import TestCounts, parse_junit, parse_summary
from replayhub.verdicts import SuiteResult
from replayhub.verdicts.toolchain import missing_toolchain

if TYPE_CHECKING:
    from replayhub.gateway.access import PhaseNetwork

JUNIT_DIR = "/replayhub-out"
JUNIT_FILE = f"{JUNIT_DIR}/junit.xml"
JUNIT_MAX_BYTES = 10 * 1024 * 1024
OUTPUT_TAIL_CHARS = 64 * 1024

# Exit statuses that mean the command itself could not start.
_NOT_STARTED = {126, 127}


@dataclass(frozen=True)
class Attempt:
    """One execution of the test command on one tree."""

    tree: str  # "original" | "replay" | "base"
    attempt: int
    ran: bool
    passed: bool | None
    exit_code: int | None
    tests_executed: int | None
    tests_failed: int | None
    timed_out: bool
    limit_fired: str
    output_tail: str
    output_truncated: bool
    duration_s: float
    # Per test, when the run reported test ids (JUnit or verbose output).
    cases: tuple[TestCase, ...] | None = None
    # Taken from an earlier identical run rather than executed now.
    cached: bool = False
    # What the sandbox lacked for the suite to start ("" when nothing).
    missing: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.cases is not None:
            data["cases"] = [asdict(case) for case in self.cases]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attempt:
        fields = dict(data)
        if fields.get("cases") is not None:
            fields["cases"] = tuple(TestCase(**case) for case in fields["cases"])
        return cls(**fields)


@dataclass
class GateResult:
    attempts: list[Attempt] = field(default_factory=list)

    def of(self, tree: str) -> list[Attempt]:
        return [a for a in self.attempts if a.tree == tree]

    def suite(self, tree: str) -> SuiteResult | None:
        """The tree's result for the verdict: the first attempt, flaky if any differ."""
        runs = self.of(tree)
        if not runs:
            return None
        first = runs[0]
        outcomes = {(a.ran, a.passed) for a in runs}
        return SuiteResult(
            ran=first.ran,
            passed=first.passed if first.ran else None,
            tests_executed=first.tests_executed,
            flaky=len(outcomes) > 1,
            exit_code=first.exit_code,
            missing=first.missing,
        )

    @property
    def sandbox_seconds(self) -> float:
        return sum(a.duration_s for a in self.attempts if not a.cached)

    def first(self, tree: str) -> Attempt | None:
        runs = self.of(tree)
        return runs[0] if runs else None

    def flipping(self) -> set[str]:
        """Test ids whose outcome differed between attempts of one tree."""
        seen: dict[tuple[str, str], set[str]] = {}
        for attempt in self.attempts:
            for case in attempt.cases or ():
                seen.setdefault((attempt.tree, case.id), set()).add(case.outcome)
        return {test for (_, test), outcomes in seen.items() if len(outcomes) > 1}


class CheckoutFailed(Exception):
    """A tree could not be checked out for its tests; git's error is the cause.

    ``gate`` holds the attempts made before it, so their sandbox time counts.
    """

    def __init__(self, tree: str, error: GitError) -> None:
        super().__init__(f"the {tree} tree could not be checked out: {error}")
        self.tree = tree
        self.error = error
        self.gate = GateResult()


@dataclass(frozen=True)
class PerTest:
    """The original's first run against the judging tree's first run, by test id."""

    compared: bool = False
    newly_failing: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()


def compare_first_attempts(gate: GateResult, judged: str) -> PerTest:
    """Compare by test id when the original's run reported ids.

    A judging run that reported no ids at all while the original's did is not
    comparable: every test of the original is missing from it.
    """
    original, other = gate.first("original"), gate.first(judged)
    if original is None or other is None or original.cases is None:
        return PerTest()
    if other.cases is None:
        return PerTest(missing=tuple(sorted({c.id for c in original.cases})))
    found = compare_cases(list(original.cases), list(other.cases))
    # A test that passed on the original and was skipped on the judging run did
    # not run there: as missing as one it never reported.
    missing = tuple(sorted({*found.missing, *found.newly_skipped}))
    return PerTest(compared=True, newly_failing=found.newly_failing, missing=missing)


def read_small_file(path: Path, max_bytes: int) -> bytes | None:
    """Read a file the sandbox could have written, without trusting it.

    The sandbox may have replaced it with a symlink (to a host secret), a FIFO
    (to hang the worker) or something huge: only a regular file, opened without
    following links and without blocking, up to ``max_bytes``, is read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(max_bytes + 1)[:max_bytes]
    finally:
        os.close(fd)


def interpret(
    *,
    exit_code: int | None,
    timed_out: bool,
    limit_fired: str,
    counts: TestCounts | None,
) -> tuple[bool, bool | None]:
    """(ran, passed) from what the sandbox and the runner's summary said.

    A suite ran when it was not stopped by a limit and either its runner printed
    a summary or it exited 0/1 (pass/fail by the usual convention). Anything else
    (command not found, usage errors, a crash of the runner) did not execute.
    """
    if timed_out or limit_fired or exit_code is None or exit_code in _NOT_STARTED:
        return False, None
    if counts is None and exit_code not in (0, 1):
        return False, None
    failed = counts is not None and counts.failed > 0
    return True, exit_code == 0 and not failed


def run_once(
    *,
    scratch: Scratch,
    tree_sha: str,
    tree: str,
    attempt: int,
    runner: Runner,
    argv: Sequence[str],
    limits: Limits,
    network: PhaseNetwork | None = None,
) -> Attempt:
    checkout = scratch.root / f"tests-{tree}-{attempt}"
    out_dir = scratch.root / f"tests-{tree}-{attempt}-out"
    remove_tree(checkout)
    remove_tree(out_dir)
    out_dir.mkdir(parents=True)
    try:
        try:
            scratch.checkout_tree(tree_sha, checkout)
        except GitError as error:
            raise CheckoutFailed(tree, error) from error
        env = {"REPLAYHUB_JUNIT_XML": JUNIT_FILE}
        binds = [Bind(out_dir, JUNIT_DIR, writable=True)]
        command = tuple(argv)
        if network is not None and network.bind is not None:
            env.update(network.env)
            binds.append(network.bind)
            command = network.wrap(command)
        outcome = runner.run(
            SandboxSpec(
                argv=command,
                workspace=checkout,
                env=env,
                limits=limits,
                binds=tuple(binds),
            )
        )
        junit = read_small_file(out_dir / "junit.xml", JUNIT_MAX_BYTES)
        counts = parse_junit(junit) if junit else None
        counts = counts or parse_summary(outcome.output)
        cases = parse_junit_cases(junit) if junit else None
        if cases is None:
            cases = parse_output_cases(outcome.output)
        ran, passed = interpret(
            exit_code=outcome.exit_code,
            timed_out=outcome.timed_out,
            limit_fired=outcome.limit_fired,
            counts=counts,
        )
        missing = ""
        if not passed and (not counts or counts.failed >= counts.executed):
            # Nothing passed and the output names a missing module or command:
            # the toolchain, not the code, may be what failed. A suite that
            # executed nothing did not start at all, whatever its exit status.
            missing = missing_toolchain(outcome.output, outcome.exit_code)
            if missing and not (counts and counts.executed):
                ran, passed = False, None
        return Attempt(
            tree=tree,
            attempt=attempt,
            ran=ran,
            passed=passed,
            exit_code=outcome.exit_code,
            tests_executed=counts.executed if counts else None,
            tests_failed=counts.failed if counts else None,
            timed_out=outcome.timed_out,
            limit_fired=outcome.limit_fired,
            output_tail=outcome.output[-OUTPUT_TAIL_CHARS:],
            output_truncated=outcome.output_truncated
            or len(outcome.output) > OUTPUT_TAIL_CHARS,
            duration_s=outcome.duration_s,
            cases=tuple(cases) if cases is not None else None,
            missing=missing,
        )
    finally:
        remove_tree(checkout)
        remove_tree(out_dir)


def run_gate(
    *,
    scratch: Scratch,
    trees: dict[str, str],
    runner: Runner,
    argv: Sequence[str],
    limits: Limits,
    reruns: int,
    on_tree: Callable[[str], object] | None = None,
    known: Mapping[str, Attempt] | None = None,
    network: PhaseNetwork | None = None,
) -> GateResult:
    """Run the suite on each tree (``{"original": sha, "replay": sha, …}``).

    When the trees' first outcomes differ, each is run ``reruns`` more times, so
    a flaky suite is not mistaken for a divergence. A tree in ``known`` is not
    run: its earlier result (an attempt of the same tree and configuration that
    did not flip) stands, marked cached. A tree that cannot be checked out
    raises :class:`CheckoutFailed` with the attempts made before it.
    """
    known = known or {}
    result = GateResult()

    def execute(tree: str, attempt: int) -> None:
        if on_tree:
            on_tree(tree)
        try:
            done = run_once(
                scratch=scratch,
                tree_sha=trees[tree],
                tree=tree,
                attempt=attempt,
                runner=runner,
                argv=argv,
                limits=limits,
                network=network,
            )
        except CheckoutFailed as failure:
            failure.gate = result
            raise
        result.attempts.append(done)

    for tree in trees:
        if tree in known:
            result.attempts.append(replace(known[tree], tree=tree, cached=True))
        else:
            execute(tree, 1)
    firsts = {(a.ran, a.passed) for a in result.attempts}
    if len(trees) > 1 and len(firsts) > 1:
        for attempt in range(2, reruns + 2):
            for tree in trees:
                if tree not in known:
                    execute(tree, attempt)
    return result
