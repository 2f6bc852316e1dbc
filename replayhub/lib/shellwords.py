"""A command as words, run with no shell: which ``$VAR`` typed in it would
reach the program as typed. Pure: no Django."""

from __future__ import annotations

import re
from pathlib import Path

# A shell's variable as typed: ``$NAME`` or ``${NAME}``.
_VARIABLE = re.compile(r"\$(?:\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")
# Programs that expand variables themselves in the script after their ``-c``.
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})


def unexpanded_variable(words: list[str]) -> str:
    """The first ``$VAR`` of a command that no shell would expand ("" when
    none would): no shell runs the command, so only a script a shell is
    given to run (``sh -c '…'``) expands one."""
    script = -1
    if words and Path(words[0]).name in _SHELLS:
        flags = [i for i, w in enumerate(words) if re.fullmatch(r"-[a-z]*c[a-z]*", w)]
        script = flags[0] + 1 if flags else -1
    for i, word in enumerate(words):
        if i != script and (found := _VARIABLE.search(word)):
            return found.group()
    return ""
