"""The options of ``project_add`` and ``project_edit``, defined once.

Both commands take the same options. An option not given is absent from the
parsed options (``argparse.SUPPRESS``): ``project_add`` then stores the
default, ``project_edit`` keeps what the project has. The replay settings'
options are made from ``models.project_settings.SETTINGS``.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from replayhub import agents
from replayhub.models import Project, Provider, RolloutAnchor, RolloutMode
from replayhub.models.project_settings import SETTINGS, Setting
from replayhub.project_setup import (
    ProjectInvalid,
    ProjectProblems,
    default_branch_problem,
    parse_setting,
    project_fields,
    remote_check,
    sandbox_fields,
)
from replayhub.replicates.stopping import ReplicatePolicy
from replayhub.rollouts.seeds import DRAW_FIELDS, draw_problems

# Commands given as "" are stored empty (no setup phase, no separate verifier);
# the others must not be empty.
EMPTY_IS_NONE = ("setup_command", "verifier_command")
COMMANDS = (
    "test_command",
    "agent_command",
    "setup_command",
    "harness_command",
    "verifier_command",
)
LISTS = (
    "allowed_paths",
    "test_paths",
    "providers",
    "egress_agent",
    "egress_tests",
    "setup_inputs",
    "egress_setup",
)


def add_options(parser: argparse.ArgumentParser, *, editing: bool) -> None:
    """Every project option; ``--repo`` is required unless ``editing``."""
    add = _adder(parser)
    _add_repository_options(add, editing)
    add("--test-command", metavar="CMD", help=_or_harness(editing))
    _add_agent_options(add, editing)
    add("--default-branch", metavar="NAME", help="Empty: the repository's HEAD.")
    _add_reach_options(add)
    paths = _adder(parser.add_argument_group("paths", "Globs, separated by spaces."))
    _add_path_options(paths)
    groups = _add_setting_options(parser, paths)
    _add_setup_options(_adder(groups["Setup limits"]))
    _add_sandbox_options(_adder(groups["Sandbox"]))
    _add_rollout_options(
        _adder(
            parser.add_argument_group(
                "rollouts",
                "For verifiers rollout records: how seeds are derived and judged.",
            )
        )
    )
    # The budget's, not the project's: given apart (``replicate_policy``).
    _adder(parser)(
        "--replicates",
        metavar="P0,CONFIDENCE,K[,MARGIN]",
        help="Replay undecided runs again until each is decided to reproduce "
        "at least P0 of the time or not, at CONFIDENCE, with at most K samples "
        "(e.g. 0.8,0.9,10; MARGIN, half the indifference zone, 0.15 unless "
        "given); off: no replicates (the default). See docs/replicates.md.",
    )


def _add_repository_options(add, editing: bool) -> None:
    add(
        "--repo",
        required=not editing,
        metavar="PATH_OR_URL",
        help="The git repository: a path on this host, or an https://, "
        "http://, ssh://, git://, file:// or git@host:path URL that each host "
        "mirrors.",
    )
    add(
        "--repo-credential-env",
        metavar="VAR",
        help="Name of the environment variable that holds the credential (a "
        "token or password) for an https:// URL on each host. Only the name "
        "is stored.",
    )


def _add_agent_options(add, editing: bool) -> None:
    add(
        "--agent",
        choices=agents.NAMES,
        metavar="NAME",
        help="An agent profile: "
        + ", ".join(
            f"{p.name} ({p.title} {p.version})" for p in agents.PROFILES.values()
        )
        + "; the setup phase installs it and the replay runs it headless against "
        "the gateway, with no --agent-command. Default: custom (the "
        "--agent-command).",
    )
    add(
        "--agent-version",
        metavar="VERSION",
        help="The profile's release to install (an exact version). Default: "
        "its pinned one.",
    )
    add(
        "--agent-command",
        metavar="CMD",
        help=_or_harness(editing) + " Not with an --agent profile.",
    )


def _add_reach_options(add) -> None:
    """The providers and hosts a replay may reach, and what its tests may see."""
    add(
        "--providers",
        nargs="*",
        action="extend",
        metavar="NAME",
        help="Model providers (provider_add) the agent may call.",
    )
    add(
        "--egress-agent",
        nargs="*",
        action="extend",
        metavar="HOST:PORT",
        help="Hosts the agent may reach through the egress proxy "
        "(e.g. pypi.org:443, *.pythonhosted.org:443). Default: none.",
    )
    add(
        "--egress-tests",
        nargs="*",
        action="extend",
        metavar="HOST:PORT",
        help="Hosts the test runs may reach. Default: none.",
    )
    add(
        "--allow-test-interference",
        action=argparse.BooleanOptionalAction,
        help="Let a replay whose change could report a test run's success "
        "itself still be equivalent.",
    )


def _add_path_options(paths) -> None:
    paths("--allowed-paths", nargs="*", action="extend", metavar="GLOB")
    paths(
        "--test-paths",
        nargs="*",
        action="extend",
        metavar="GLOB",
        help="The test files and the test runner's configuration (default: "
        "the common layouts, conftest.py, pytest.ini, package.json, ...). "
        "When a replay's differ from the original's, the original's are run "
        "on the replay's code, and that run decides.",
    )


def _add_setting_options(parser: argparse.ArgumentParser, paths) -> dict[str, Any]:
    """The options of ``SETTINGS``, each in its group's (the paths' in
    ``paths``); the groups by name."""
    groups = {
        setting.group: parser.add_argument_group(setting.group.lower())
        for setting in SETTINGS
        if setting.group != "Paths"
    }
    for setting in SETTINGS:
        where = paths if setting.group == "Paths" else _adder(groups[setting.group])
        where(setting.option, dest=setting.field, **_setting_options(setting))
    return groups


def _add_setup_options(setup) -> None:
    setup(
        "--setup-command",
        metavar="CMD",
        help="Run once per environment (per lockfile contents) on a clean "
        "checkout of the base; what it leaves in $REPLAYHUB_ENV_DIR is "
        "mounted read-only into the agent and test phases, its bin/ first "
        'on PATH. Default (or ""): no setup phase.',
    )
    setup(
        "--setup-inputs",
        nargs="*",
        action="extend",
        metavar="GLOB",
        help="The files whose contents decide the environment (default: the "
        "common lockfiles: requirements*.txt, poetry.lock, package-lock.json, "
        "go.sum, ...).",
    )
    setup(
        "--egress-setup",
        nargs="*",
        action="extend",
        metavar="HOST:PORT",
        help="Hosts the setup phase may reach (a package index). Default: none.",
    )


def _add_sandbox_options(sandbox) -> None:
    sandbox(
        "--root-image",
        metavar="REF",
        help="An image pinned by digest (name@sha256:...) whose root file "
        "system the sandbox runs on, once imported with image_import.",
    )
    sandbox(
        "--require-image-match",
        action=argparse.BooleanOptionalAction,
        help="A record whose image digest differs from --root-image is "
        "inconclusive (image_mismatch), not only warned about.",
    )


def _adder(group: Any):
    def add(*names: str, **kwargs: Any) -> None:
        group.add_argument(*names, default=argparse.SUPPRESS, **kwargs)

    return add


def _or_harness(editing: bool) -> str:
    if editing:
        return "Split like a shell would; never run through one."
    return "Required unless --harness-command is given."


def _setting_options(setting: Setting) -> dict[str, Any]:
    default = setting.default
    if setting.kind == "globs":
        shown = " ".join(default) or "none"
        return {
            "nargs": "*",
            "action": "extend",
            "metavar": "GLOB",
            "help": f"{setting.help} Default: {shown}.",
        }
    help_text = setting.help or setting.label + "."
    if setting.kind == "choice":
        choices = [str(value) for value, _ in setting.model_field.choices or ()]
        return {
            "choices": choices,
            "help": f"{help_text} Default: {default}.",
        }
    shown = "none" if default is None else f"{default:,}".replace(",", "_")
    words = [
        "" if setting.help.startswith(setting.label) else f"{setting.label}.",
        setting.help,
        "'none' empties it." if setting.optional else "",
        f"Default: {shown}.",
    ]
    return {
        "metavar": "USD" if setting.kind == "money" else "N",
        "help": " ".join(word for word in words if word),
    }


def _add_rollout_options(add) -> None:
    add(
        "--harness-command",
        metavar="CMD",
        help="Runs a seed in the sandbox: reads the messages in "
        "$REPLAYHUB_SEED_FILE, writes {completion, reward} to "
        "$REPLAYHUB_RESULT_FILE.",
    )
    add(
        "--verifier-command",
        metavar="CMD",
        help="Scores a replay's completion in a second, fresh sandbox with "
        "no network: reads $REPLAYHUB_SEED_FILE and "
        "$REPLAYHUB_COMPLETION_FILE, writes {reward} to "
        "$REPLAYHUB_RESULT_FILE. Without it the harness's own reward is "
        "used, and it can never make a replay equivalent.",
    )
    add(
        "--rollout-mode",
        choices=RolloutMode.values,
        metavar="MODE",
        help="continue (resume at an anchor) or recheck (verify the final "
        "attempt). Default: continue.",
    )
    add(
        "--anchor",
        choices=RolloutAnchor.values,
        metavar="A",
        help="Where continue seeds re-enter: compaction or tool-call. "
        "Default: compaction.",
    )
    add(
        "--max-anchors",
        metavar="N",
        help="Tool-call anchors drawn per rollout, or 'all'. Default: 1.",
    )
    add("--min-source-reward", type=float, metavar="X")
    add("--max-source-reward", type=float, metavar="Y")
    add(
        "--pass-threshold",
        type=float,
        metavar="T",
        help="A reward at or above this passes. Default: 1.0.",
    )
    add("--verification-turn", metavar="TEXT")
    add("--max-seed-tokens", type=int, metavar="N")
    add(
        "--rollout-seed",
        type=int,
        metavar="N",
        help="Salt of the deterministic draw of tool-call anchors.",
    )


# The options' names in the parsed options: the dests of every option above.
DESTS = frozenset(
    {
        "repo",
        "repo_credential_env",
        "agent",
        "agent_version",
        "default_branch",
        "allow_test_interference",
        "root_image",
        "require_image_match",
        "rollout_mode",
        "anchor",
        "max_anchors",
        "min_source_reward",
        "max_source_reward",
        "pass_threshold",
        "verification_turn",
        "max_seed_tokens",
        "rollout_seed",
        *COMMANDS,
        *LISTS,
        *(setting.field for setting in SETTINGS),
    }
)


def given(options: dict[str, Any]) -> dict[str, Any]:
    """The project options given on the command line."""
    return {name: value for name, value in options.items() if name in DESTS}


def current(project: Project) -> dict[str, Any]:
    """``project``'s settings as the options give them (an unsaved project:
    the defaults)."""
    values: dict[str, Any] = {
        "repo": project.repo_path,
        "repo_credential_env": project.repo_credential_env,
        "agent": project.agent,
        "agent_version": project.agent_version,
        "default_branch": project.default_branch,
        "allow_test_interference": project.allow_test_interference,
        "root_image": project.root_image,
        "require_image_match": project.require_image_match,
        "rollout_mode": project.rollout_mode,
        "anchor": project.rollout_anchor,
        "max_anchors": "all" if project.max_anchors is None else project.max_anchors,
        "min_source_reward": project.min_source_reward,
        "max_source_reward": project.max_source_reward,
        "pass_threshold": project.pass_threshold,
        "verification_turn": project.verification_turn,
        "max_seed_tokens": project.max_seed_tokens,
        "rollout_seed": project.rollout_seed,
        "providers": (
            sorted(project.providers.values_list("name", flat=True))
            if project.pk
            else []
        ),
    }
    for name in COMMANDS:
        values[name] = shlex.join(getattr(project, name)) or None
    for name in LISTS:
        if name != "providers":
            values[name] = list(getattr(project, name))
    for setting in SETTINGS:
        values[setting.field] = getattr(project, setting.field)
    return values


def project_values(
    *, slug: str, options: dict[str, Any], project: Project | None = None
) -> tuple[dict[str, Any], list[Provider]]:
    """The checked fields of the project the options describe, and its
    providers: ``project``'s own values (or the defaults, for a new project)
    where an option is not given. Raises ProjectInvalid. A repository on a
    remote is asked whether it answers last, once every other value passed."""
    chosen = given(options)
    values = {**current(project or Project()), **chosen}
    for name in EMPTY_IS_NONE:
        values[name] = values[name] or None
    if "agent" in chosen:
        had = project.agent if project else agents.CUSTOM
        if "agent_version" not in chosen and chosen["agent"] != had:
            # Another agent: its own pinned version unless one is given.
            values["agent_version"] = ""
        if chosen["agent"] != agents.CUSTOM:
            # A profile chosen now replaces the command the project had,
            # unless one is given with it (which is refused).
            values["agent_command"] = chosen.get("agent_command")
    settings = {
        setting.field: parse_setting(setting, chosen[setting.field])
        for setting in SETTINGS
        if setting.field in chosen
    }
    fields = project_fields(
        slug=slug,
        repo=values["repo"],
        repo_credential_env=values["repo_credential_env"] or "",
        test_command=values["test_command"],
        agent_command=values["agent_command"],
        agent=values["agent"],
        agent_version=values["agent_version"] or "",
        allowed_paths=values["allowed_paths"],
        test_paths=values["test_paths"],
        egress_agent=values["egress_agent"],
        egress_tests=values["egress_tests"],
        providers=values["providers"],
        setup_command=values["setup_command"],
        setup_inputs=values["setup_inputs"],
        egress_setup=values["egress_setup"],
        harness_command=values["harness_command"],
        verifier_command=values["verifier_command"],
        settings=settings,
        editing=project,
    )
    providers = fields.pop("providers")
    sandbox = sandbox_fields(
        root_image=values["root_image"] or "",
        require_image_match=bool(values["require_image_match"]),
        allow_test_interference=bool(values["allow_test_interference"]),
        env_share_group=project.env_share_group if project else "",
    )
    default_branch = (values["default_branch"] or "").strip()
    if problem := default_branch_problem(default_branch):
        raise ProjectInvalid("--default-branch", problem)
    fields.update(default_branch=default_branch, **sandbox, **_rollout_settings(values))
    if problem := ignored_by_mode(values, chosen):
        raise ProjectInvalid(problem.split(":", 1)[0], problem)
    remote_check(fields, slug=slug, editing=project)
    return fields, providers


def ignored_by_mode(values: dict[str, Any], chosen: dict[str, Any]) -> str:
    """Why an option given would be stored but never used by the project's
    rollout mode and anchor (``values``, after the options), or "".

    Only options given now are refused: a project edited from tool-call to
    recheck keeps its stored draw settings for when it goes back.
    """
    mode, anchor = values["rollout_mode"], values["anchor"]
    if mode == RolloutMode.RECHECK:
        for name in ("anchor", "max_anchors", "rollout_seed"):
            if name in chosen:
                option = "--" + name.replace("_", "-")
                return f"{option}: only continue seeds have anchors; recheck has none."
    elif anchor != RolloutAnchor.TOOL_CALL:
        for name in ("max_anchors", "rollout_seed"):
            if name in chosen:
                option = "--" + name.replace("_", "-")
                return (
                    f"{option}: only tool-call anchors are drawn; the project "
                    f"continues at {anchor} anchors (give --anchor tool-call)."
                )
    return ""


def _rollout_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The project's rollout fields from the options, checked as the project
    form checks them (``rollouts.seeds.draw_problems``)."""
    raw = str(values["max_anchors"]).strip().lower()
    max_anchors: int | None = None
    if raw not in ("all", "none", ""):
        try:
            max_anchors = int(raw)
        except ValueError:
            raise ProjectInvalid(
                "--max-anchors", "--max-anchors takes a positive number, or 'all'."
            ) from None
    fields = {
        "rollout_mode": values["rollout_mode"],
        "rollout_anchor": values["anchor"],
        "max_anchors": max_anchors,
        **{name: values[name] for name in DRAW_FIELDS if name != "max_anchors"},
    }
    problems = [
        ProjectInvalid(
            option := "--" + name.replace("_", "-"),
            f"{option}: {problem[:1].lower()}{problem[1:]}",
        )
        for name, problem in draw_problems(
            **{n: fields[n] for n in DRAW_FIELDS}
        ).items()
    ]
    if problems:
        raise ProjectProblems(problems)
    return fields


def replicate_policy(text: str) -> ReplicatePolicy | None:
    """``--replicates``: ``P0,CONFIDENCE,K[,MARGIN]`` as a policy, ``off`` as
    None; ProjectInvalid in one line for anything else."""
    if text.strip().lower() in ("off", "none", ""):
        return None
    parts = [part.strip() for part in text.split(",")]
    if len(parts) not in (3, 4):
        raise ProjectInvalid(
            "--replicates",
            f"--replicates {text!r}: give P0,CONFIDENCE,K[,MARGIN] (e.g. "
            "0.8,0.9,10) or off.",
        )
    try:
        margin = float(parts[3]) if len(parts) == 4 else ReplicatePolicy.margin
        return ReplicatePolicy(
            threshold=float(parts[0]),
            confidence=float(parts[1]),
            most=int(parts[2]),
            margin=margin,
        )
    except ValueError as exc:
        raise ProjectInvalid("--replicates", f"--replicates {text!r}: {exc}") from None
