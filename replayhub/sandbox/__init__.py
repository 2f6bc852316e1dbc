"""Isolated execution of recorded agent runs; see `base` for the runner contract."""

from __future__ import annotations

from replayhub.sandbox.base import (
    WORKSPACE,
    Bind,
    Limits,
    Runner,
    SandboxOutcome,
    SandboxSpec,
    SandboxUnavailable,
    get_runner,
)

__all__ = [
    "WORKSPACE",
    "Bind",
    "Limits",
    "Runner",
    "SandboxOutcome",
    "SandboxSpec",
    "SandboxUnavailable",
    "get_runner",
]
