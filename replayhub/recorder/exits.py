"""How the recorder ends: its exit codes, the one-line refusal, and its voice
on standard error (the agent's output is the agent's)."""

from __future__ import annotations

import sys

PROG = "replayhub-record"
EXIT_USAGE = 2
EXIT_SPOOLED = 75  # EX_TEMPFAIL: recorded, but kept here to be sent later
EXIT_NOT_RUN = 127


class Refusal(Exception):
    """Stop with this one line on standard error and ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
