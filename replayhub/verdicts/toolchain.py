"""What a test suite that could not start is missing, read from its output.

A suite whose interpreter, runner or one of its modules is absent from the
sandbox fails before any test runs, often with the runner's usual exit status
(``python -m pytest`` without pytest exits 1). Counted as a run, it would be
refused for its test count; named, it is a suite that did not run, and the
reason says what the environment lacks. Pure: no Django, no I/O.
"""

from __future__ import annotations

import re

from replayhub.verdicts.text import clean

# The first line that names a missing piece, in the order tools print them.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"No module named ['\"]?([A-Za-z_][\w.]*)['\"]?"),
        "the Python module {}",
    ),
    (re.compile(r"Cannot find module ['\"]([^'\"\n]{1,200})['\"]"), "the module {}"),
    # bash: "x: command not found"; dash: "sh: 1: x: not found"
    (re.compile(r"(?:^|\s)([\w.+-]{1,100}): command not found"), "the command {}"),
    (re.compile(r"^\S*sh: \d+: ([\w.+/-]{1,200}): not found", re.M), "the command {}"),
    # env(1) and bwrap(1) failing to execute the command itself
    (
        re.compile(r"env: ['\u2018]?([^'\u2019\n:]{1,200})['\u2019]?: No such file or"),
        "the command {}",
    ),
    (
        re.compile(r"bwrap: execvp ([^\s:]{1,200}): No such file or directory"),
        "the command {}",
    ),
)
_EXIT_MEANING = {
    126: "an executable (the test command exited 126: found but not executable)",
    127: "a command (the test command exited 127: not found)",
}


def missing_toolchain(output: str, exit_code: int | None) -> str:
    """What the suite lacks, as a phrase ("the Python module pytest"), or "".

    Read from ``output`` first; exit statuses 126 and 127 mean the command (or
    one it ran) could not be started even when the output names nothing.
    """
    for pattern, phrase in _PATTERNS:
        match = pattern.search(output)
        if match:
            return phrase.format(clean(match.group(1)))
    return _EXIT_MEANING.get(exit_code, "") if exit_code is not None else ""
