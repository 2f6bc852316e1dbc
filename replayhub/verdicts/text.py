"""The sentences of reasons and checks, from untrusted text made safe to show."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from replayhub.verdicts.facts import TRUSTED_BASE_SOURCES, Facts, Reason, SuiteResult

# How many disallowed paths a reason sentence names before summarising the rest.
_PATHS_NAMED = 5
_DETAIL_LIMIT = 200


def base_trusted(facts: Facts) -> bool:
    return facts.base_source in TRUSTED_BASE_SOURCES and facts.base_confirmed


_HARNESS_SENTENCE: Mapping[Reason, str] = MappingProxyType(
    {
        Reason.SANDBOX_UNAVAILABLE: "No isolating sandbox runner was available, "
        "so the replay was refused",
        Reason.FIXTURE_FAILED: "The sandbox workspace could not be provisioned "
        "at the base commit",
        Reason.TIMEOUT: "The replay hit its time limit before producing a change",
        Reason.CAP_FIRED: "A per-replay cap fired before the replay produced a change",
        Reason.NO_CHANGE: "The agent finished without producing a change",
        Reason.AGENT_FAILED: "The agent command failed before its first model call",
        Reason.WORKER_LOST: "The worker running the replay was lost before it finished",
        Reason.HARNESS_ERROR: "The replay harness failed before producing a change",
        Reason.PROVIDER_ERROR: "Every model call the agent made failed at the "
        "provider, so the replay says nothing of the agent",
        Reason.TAPE_DIVERGED: "The agent's model requests left the recorded tape, "
        "so the replay could not give it the original's model answers",
        Reason.SETUP_FAILED: "The project's setup phase failed, so the replay had "
        "no environment to run in",
        Reason.IMAGE_MISMATCH: "The record's sandbox image is not the project's "
        "root image, and the project requires the match",
        Reason.REPO_UNREACHABLE: "The project's repository could not be fetched "
        "from its remote, so the replay had no commits to start from",
        Reason.HOST_FAILED: "The worker's host could not provision the replay, "
        "so the run was not replayed there",
    }
)


def harness_reason(facts: Facts) -> str:
    assert facts.harness_failure is not None
    sentence = _HARNESS_SENTENCE[facts.harness_failure]
    # The cap in words ("max_files" is "max files"); the time limit's own
    # name would only repeat the sentence.
    cap = clean(facts.cap_detail).replace("_", " ")
    if cap == "wall time" and facts.harness_failure == Reason.TIMEOUT:
        cap = ""
    if cap and facts.harness_failure in {Reason.TIMEOUT, Reason.CAP_FIRED}:
        sentence += f" ({cap})"
    # The sentence supplies its own full stop.
    detail = clean(facts.harness_detail).rstrip(".")
    if detail:
        sentence += f": {detail}"
    return sentence + "."


def base_reason(facts: Facts) -> str:
    if facts.base_source == "first-parent":
        why = (
            "The base commit is only a first-parent guess (the original's parent), "
            "which is never trusted"
        )
    elif facts.base_source == "inferred":
        why = (
            "The base or the original commit was inferred when the transcript was "
            "imported (from a branch and a time, or a commit's author), which is "
            "never trusted"
        )
    elif facts.base_source == "none":
        why = "No base commit could be resolved for the original"
    else:
        why = (
            f"The original commit does not descend from the {facts.base_source} "
            f"base commit"
        )
    if facts.trees_identical:
        why += ", so even identical trees prove nothing"
    return why + "."


def lacks_toolchain(suite: SuiteResult) -> bool:
    """A suite that ran, failed every test, and names what the sandbox lacks."""
    return suite.ran and not suite.passed and bool(suite.missing)


def not_run_reason(
    original: SuiteResult | None,
    judged: SuiteResult | None,
    label: tuple[str, str] = ("replay", "replay tree"),
) -> str:
    original_missing = original is None or not original.ran or lacks_toolchain(original)
    judged_missing = judged is None or not judged.ran
    where = (
        "either tree"
        if original_missing and judged_missing
        else which_trees(original_missing, judged_missing, label[1])
    )
    exits = [
        f"{tree} exit code {suite.exit_code}"
        for tree, suite, missing in (
            ("original", original, original_missing),
            (label[0], judged, judged_missing),
        )
        if missing and suite is not None and suite.exit_code is not None
    ]
    suffix = f" ({', '.join(exits)})" if exits else ""
    lacking = sorted(
        {
            clean(suite.missing)
            for suite, missing in (
                (original, original_missing),
                (judged, judged_missing),
            )
            if missing and suite is not None and suite.missing
        }
    )
    if lacking:
        return (
            f"The test suite could not start on {where}{suffix}: the sandbox lacks "
            f"{' and '.join(lacking)}; give the project a setup phase that "
            "installs it."
        )
    return f"The test suite could not execute on {where}{suffix}."


def floor_shortfalls(
    floor: int, original: SuiteResult, judged: SuiteResult, label: str = "replay tree"
) -> list[str]:
    shortfalls = []
    for tree, suite in (("original tree", original), (label, judged)):
        count = suite.tests_executed
        if count is None:
            if floor > 0:
                shortfalls.append(f"the {tree}'s suite reported no test count")
        elif count == 0:
            shortfalls.append(f"the {tree}'s suite executed no tests")
        elif count < floor:
            shortfalls.append(f"the {tree}'s suite executed {tests_text(count)}")
    return shortfalls


def baseline_reason(facts: Facts) -> str:
    if facts.original_recorded_passed:
        return (
            "The original tree fails its tests in the sandbox although its "
            "recorded result passed, so the sandbox does not reproduce the baseline."
        )
    return (
        "The original tree fails its tests in the sandbox and the record has no "
        "result for it, so the sandbox cannot be shown to reproduce the baseline."
    )


def paths_reason(paths: tuple[str, ...]) -> str:
    named = names_text(paths)
    noun = "path" if len(paths) == 1 else "paths"
    return f"The replay touched {len(paths)} {noun} outside the allowed globs: {named}."


def exit_text(suite: SuiteResult, template: str) -> str:
    return "" if suite.exit_code is None else template.format(suite.exit_code)


def tests_text(count: int) -> str:
    return f"{count} test" if count == 1 else f"{count} tests"


def which_trees(original: bool, judged: bool, label: str = "replay tree") -> str:
    if original and judged:
        return "both trees"
    return "the original tree" if original else f"the {label}"


def judged_label(facts: Facts) -> tuple[str, str]:
    """What the judging run is called in a sentence: a short and a long name."""
    if facts.reference is not None:
        return "reference", "replay's code with the original's tests"
    return "replay", "replay tree"


def names_text(names: tuple[str, ...]) -> str:
    """Untrusted names (paths, test ids) as part of a sentence, the first few."""
    named = ", ".join(clean(name) for name in names[:_PATHS_NAMED])
    rest = len(names) - _PATHS_NAMED
    return f"{named} and {rest} more" if rest > 0 else named


def clean(text: str) -> str:
    """Fold untrusted text (paths, harness messages) into part of one sentence."""
    text = "".join(ch if ch.isprintable() else " " for ch in text[: _DETAIL_LIMIT * 2])
    text = " ".join(text.split())
    if len(text) > _DETAIL_LIMIT:
        text = text[: _DETAIL_LIMIT - 1] + "…"
    return text


def count_text(suite: SuiteResult) -> str:
    if suite.tests_executed is None:
        return "test count unknown"
    return tests_text(suite.tests_executed)
