"""One agent's replays on one test worker: its install is made once there and
copied into every later environment (``environments.agent_installs``)."""

from __future__ import annotations

import pytest


def by_agent(*names: str) -> list:
    """``names`` as parameters, each in its agent's xdist group."""
    return [pytest.param(n, marks=pytest.mark.xdist_group(f"agent-{n}")) for n in names]
