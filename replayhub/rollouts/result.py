"""The result files of a rollout replay: the harness's
``{"completion": …, "reward": …}`` and a separate verifier's ``{"reward": …}``.

Both are written inside a sandbox, by the environment's code (and, for the
harness, whatever the model made it run), so nothing in them is trusted: each is
read without
following links and only when it is a regular file of at most
``RESULT_MAX_BYTES``; it must be one JSON object with no repeated key, a
``completion`` (the harness's) that is a string or a list of chat messages, and
a ``reward`` that is a finite number. Anything else is a ``ResultProblem``,
which the replay turns into an inconclusive verdict naming it.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from replayhub.lib import boundedjson
from replayhub.rollouts.completions import MalformedCompletion, Message, normalise
from replayhub.verdicts import Reason

RESULT_MAX_BYTES = 4 * 1024 * 1024


class ResultProblem(Exception):
    """The result is missing or malformed; ``reason`` is the verdict's code and
    the message one line saying what is wrong."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class RolloutResult:
    """The harness's result. ``reward`` is None only when it was not required
    (a separate verifier scores the completion) and the file had no finite
    numeric one."""

    completion: tuple[Message, ...]
    reward: float | None


def read_result(
    path: Path, max_bytes: int = RESULT_MAX_BYTES, *, reward_required: bool = True
) -> RolloutResult:
    """Read and parse the harness's result file at ``path``; ``ResultProblem``
    if it is missing, not a regular file, too large or malformed. With
    ``reward_required`` false the reward is not judged: it is returned when it
    is a finite number and is None otherwise."""
    return parse_result(
        _read_bytes(path, max_bytes, "the harness"), reward_required=reward_required
    )


def read_reward(path: Path, max_bytes: int = RESULT_MAX_BYTES) -> float:
    """The reward in a separate verifier's result file ``{"reward": …}`` at
    ``path``, read as strictly as the harness's; ``ResultProblem`` otherwise."""
    value = _parse_object(_read_bytes(path, max_bytes, "the verifier"))
    if "reward" not in value:
        raise ResultProblem(Reason.RESULT_MALFORMED, 'the result has no "reward"')
    return _reward(value["reward"])


def _read_bytes(path: Path, max_bytes: int, writer: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ResultProblem(
            Reason.RESULT_MISSING, f"{writer} wrote no result file"
        ) from None
    except OSError as error:
        # ELOOP: a symbolic link (to a host file, perhaps) in place of the file.
        raise ResultProblem(
            Reason.RESULT_MALFORMED,
            f"the result file could not be opened as a file ({error.strerror})",
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ResultProblem(
                Reason.RESULT_MALFORMED, "the result file is not a regular file"
            )
        if info.st_size > max_bytes:
            raise ResultProblem(
                Reason.RESULT_MALFORMED,
                f"the result file has {info.st_size:,} bytes, over the "
                f"{max_bytes:,} accepted",
            )
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew after the size was read
        raise ResultProblem(
            Reason.RESULT_MALFORMED,
            f"the result file has more than the {max_bytes:,} bytes accepted",
        )
    return data


def _malformed(detail: str) -> ResultProblem:
    return ResultProblem(Reason.RESULT_MALFORMED, detail)


def parse_result(data: bytes, *, reward_required: bool = True) -> RolloutResult:
    """The harness's result in ``data``, strictly (see the module docstring)."""
    value = _parse_object(data)
    reward: float | None = None
    if reward_required and "reward" not in value:
        raise _malformed('the result has no "reward"')
    if "completion" not in value:
        raise _malformed('the result has no "completion"')
    if reward_required:
        reward = _reward(value["reward"])
    elif "reward" in value:
        try:
            reward = _reward(value["reward"])
        except ResultProblem:
            reward = None  # not judged: a separate verifier scores the completion
    try:
        completion = normalise(value["completion"])
    except MalformedCompletion as error:
        raise _malformed(f"the result's completion is malformed: {error}") from None
    return RolloutResult(completion=completion, reward=reward)


def _reward(reward: object) -> float:
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise _malformed('the result\'s "reward" is not a number')
    try:
        number = float(reward)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise _malformed('the result\'s "reward" is not a finite number')
    return number


def _parse_object(data: bytes) -> dict:
    """One JSON object, strictly: UTF-8, no repeated key, no NaN/Infinity."""
    malformed = _malformed
    if not data.strip():
        raise malformed("the result file is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise malformed("the result file is not UTF-8 text") from None
    try:
        value = json.loads(
            text, object_pairs_hook=_no_repeated_keys, parse_constant=_no_constant
        )
    except _Refused as error:
        raise malformed(str(error)) from None
    except RecursionError:
        raise malformed(f"the result file: {boundedjson.too_deep()}") from None
    except ValueError as error:
        raise malformed(f"the result file is not JSON ({_first_line(error)})") from None
    try:
        openers = text.count("[") + text.count("{")
        boundedjson.check_depth(value, openers=openers)
    except boundedjson.Refused as refused:
        raise malformed(f"the result file: {refused}") from None
    if not isinstance(value, dict):
        raise malformed("the result is not a JSON object")
    return value


class _Refused(ValueError):
    pass


def _no_repeated_keys(pairs: list[tuple[str, object]]) -> dict:
    # With a repeated key, which value counts depends on the parser: the
    # harness could show ReplayHub one reward and another tool a different one.
    result: dict = {}
    for key, item in pairs:
        if key in result:
            raise _Refused(f"the result repeats the key {key[:40]!r}")
        result[key] = item
    return result


def _no_constant(name: str) -> object:
    raise _Refused(f"the result file holds {name}, which is not JSON")


def _first_line(error: Exception) -> str:
    lines = str(error).splitlines()
    return lines[0][:200] if lines else type(error).__name__
