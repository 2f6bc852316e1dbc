"""The one table of a project's replay settings (caps, the test gate's
numbers, setup limits, the runner, ignored paths): each ``Project`` field with
its command-line option, the group it is shown in, its label and, for a
number, the bounds it must keep.

The commands' options (``management.project_options``), the project form's
fields and the budgets page's bounds are made from ``SETTINGS``; reading and
checking the values given is ``project_setup``'s (``parse_setting``,
``checked_settings``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import models

from replayhub.models.projects import Project

CAPS = "Caps per replay"
TESTS = "Test gate"
SETUP = "Setup limits"
PATHS = "Paths"
SANDBOX = "Sandbox"


@dataclass(frozen=True)
class Setting:
    """One setting of a project's replays: its ``Project`` field, its
    command-line option, the group it is shown in, and for a number the
    bounds it must keep (``least`` to ``most``, ``unit`` for the message).
    The help text is the model field's."""

    field: str
    option: str
    group: str
    label: str
    least: int = 0
    most: int = 0
    unit: str = ""

    @property
    def model_field(self) -> models.Field:
        return Project._meta.get_field(self.field)  # type: ignore[return-value]

    @property
    def kind(self) -> str:
        """``number``, ``money``, ``choice`` or ``globs``."""
        model_field = self.model_field
        if isinstance(model_field, models.JSONField):
            return "globs"
        if isinstance(model_field, models.DecimalField):
            return "money"
        return "choice" if model_field.choices else "number"

    @property
    def optional(self) -> bool:
        """Whether it may be empty (no cap)."""
        return bool(self.model_field.null)

    @property
    def default(self) -> Any:
        return self.model_field.get_default()

    @property
    def help(self) -> str:
        """The model field's help text, saying what empty means when it may be."""
        text = str(self.model_field.help_text)
        if self.optional and "Empty:" not in text:
            text = f"{text} Empty: no cap.".strip()
        return text

    @property
    def bounds(self) -> tuple[int, int, str]:
        return self.least, self.most, self.unit


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "time_limit_seconds",
        "--time-limit",
        CAPS,
        "Agent time limit (s)",
        1,
        86_400,
        " s",
    ),
    Setting(
        "test_time_limit_seconds",
        "--test-time-limit",
        CAPS,
        "Test run time limit (s)",
        1,
        86_400,
        " s",
    ),
    Setting(
        "memory_limit_mb", "--memory-mb", CAPS, "Memory (MiB)", 64, 1_048_576, " MiB"
    ),
    Setting(
        "max_processes", "--max-processes", CAPS, "Processes", 1, 100_000, " processes"
    ),
    Setting(
        "max_output_bytes",
        "--max-output-bytes",
        CAPS,
        "Output kept (bytes)",
        1024,
        1 << 30,
        " bytes",
    ),
    Setting(
        "max_requests",
        "--max-requests",
        CAPS,
        "Model calls per replay",
        1,
        1_000_000,
        " calls",
    ),
    Setting(
        "max_tokens",
        "--max-tokens",
        CAPS,
        "Tokens per replay",
        1,
        1_000_000_000,
        " tokens",
    ),
    Setting("max_turns", "--max-turns", CAPS, "Turns per replay", 1, 100_000, " turns"),
    Setting(
        "max_cost_usd",
        "--max-cost-usd",
        CAPS,
        "Money per replay (USD)",
        0,
        100_000,
        " USD",
    ),
    Setting("max_disk_mb", "--max-disk-mb", CAPS, "Disk (MiB)", 16, 1_048_576, " MiB"),
    Setting("max_files", "--max-files", CAPS, "Files", 100, 100_000_000, " files"),
    Setting(
        "cap_grace_seconds",
        "--cap-grace",
        CAPS,
        "Grace after a refused call (s)",
        0,
        3_600,
        " s",
    ),
    Setting("flake_reruns", "--flake-reruns", TESTS, "Flake reruns", 0, 10, " reruns"),
    Setting("evidence_floor", "--evidence-floor", TESTS, "Evidence floor", 0, 1_000),
    Setting("max_attempts", "--max-attempts", TESTS, "Attempts", 1, 20, " attempts"),
    Setting(
        "setup_time_limit_seconds",
        "--setup-time-limit",
        SETUP,
        "Setup time limit (s)",
        1,
        86_400,
        " s",
    ),
    Setting(
        "setup_memory_mb",
        "--setup-memory-mb",
        SETUP,
        "Setup memory (MiB)",
        64,
        1_048_576,
        " MiB",
    ),
    Setting(
        "setup_max_disk_mb",
        "--setup-max-disk-mb",
        SETUP,
        "Setup disk (MiB)",
        16,
        1_048_576,
        " MiB",
    ),
    Setting(
        "setup_max_files",
        "--setup-max-files",
        SETUP,
        "Setup files",
        100,
        100_000_000,
        " files",
    ),
    Setting("runner", "--runner", SANDBOX, "Runner"),
    Setting("ignored_paths", "--ignored-paths", PATHS, "Ignored paths"),
)
SETTING = {setting.field: setting for setting in SETTINGS}


def bound_problem(value, least: int, most: int, unit: str) -> str:
    """The one-line complaint about a number outside its bounds, or ""."""
    if value is None:
        return ""
    if value < least and least == 0:
        return "Cannot be negative."
    if value < least:
        return f"At least {_count(least, unit)}."
    if value > most:
        return f"At most {_count(most, unit)}."
    return ""


def setting_problem(setting: Setting, value) -> str:
    """The one-line complaint about a setting's number (``bound_problem``'s),
    or "": a money cap of 0 is refused as a count's is, for it refuses every
    model call (empty is no cap)."""
    if problem := bound_problem(value, *setting.bounds):
        return problem
    if setting.kind == "money" and value == 0:
        return (
            f"More than 0{setting.unit}: a cap of 0 refuses every model call "
            "(empty: no cap)."
        )
    return ""


def long_tests_problem(
    test_limit: int | None, time_limit: int, night_seconds: int
) -> str:
    """Why a replay's test runs could spend past a whole night ("" when they
    cannot): each is given the test time limit whole (the agent's time limit
    when it is empty), never cut to what the night has left, as the agent's
    time is. A tier with no sandbox time (0) runs nothing to compare with."""
    limit = test_limit or time_limit
    if not night_seconds or limit <= night_seconds:
        return ""
    night = (
        f"a night's whole sandbox time of {night_seconds:,} s (the agentic "
        f"tier's {night_seconds // 60:,} minutes)"
    )
    if test_limit:
        return (
            f"The test time limit, {limit:,} s, is longer than {night}: shorten "
            "it, or give the night more sandbox minutes."
        )
    return (
        f"Empty, the test time limit is the agent's, {limit:,} s, longer than "
        f"{night}: give a shorter one."
    )


def _count(number: int, unit: str) -> str:
    """``1 attempt``, ``3 attempts``, ``1 s``: a word's plural s only past one."""
    if number == 1 and len(unit.strip()) > 1:
        unit = unit[:-2] if unit.endswith("sses") else unit.removesuffix("s")
    return f"{number:,}{unit}"
