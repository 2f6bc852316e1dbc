"""Agent profiles: the agent CLIs a project can name instead of a command.

``project_add --agent NAME`` (and ``project_edit``, the project form) gives a
project one of ``PROFILES``; ``custom`` keeps the hand-written
``--agent-command``. A profile is plain data and small pure functions
(``profile.Profile``), one module per agent, with no Django in them, so each
is tested without a database: its argv for a version, its environment, the
files it lays out under ``$HOME``, its state paths.

Modules:

- profile: ``Profile``, ``Transcript``, ``PROFILES`` and ``get``, the wires
  and the install and home-files folders.
- rules: each profile's tape rules (a request's parts set aside before tape
  matching; ``gateway.tape_rules`` applies them).
- install: how the setup phase installs a profile's CLI into the project's
  environment (npm or PyPI, from the agent cache or the registry).
- claude_code, codex, aider, mini_swe_agent, gemini_cli, opencode: one
  module a CLI, each holding its ``PROFILE`` and saying why its flags are
  what they are.

How a profile is run, in order:

1. The setup phase (``environments.build``) installs the CLI at its pinned
   version (or the project's ``--agent-version``) into
   ``$REPLAYHUB_ENV_DIR/agent``, from the worker's agent cache
   (``REPLAYHUB_AGENT_CACHE``, bound read-only) when it holds that release,
   else from the registry through the setup phase's egress proxy, the
   registry's hosts allowed for that install only. The environment key names
   the profile and version.
2. The agent phase (``replay.execute``) runs ``profile.argv(...)``: ``sh -c``
   with a fixed launcher script, the CLI as ``$0`` and its flags as
   arguments, so a record's model is only ever an argument. The profile's
   ``home_files`` wait in the replay's IO bind and the launcher copies them
   into ``$HOME`` (placed where the original's was) before the CLI starts.
   The gateway's variables (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``,
   their placeholder keys) are the same as for a hand-written command; the
   launcher passes them on in the shape the CLI reads.
3. Capture leaves the profile's ``state_paths`` out of both trees, as it
   does the project's ``ignored_paths``.

Departure from the design map: ``env(gateway)`` is ``Profile.environment()``
plus the launcher. The gateway's address and placeholder key are minted when
the agent phase's network starts, after the sandbox's spec is made, so a
profile names the variables it reads them from in its launcher instead of
being handed their values. ``profile.PROFILES`` is filled here, where every
agent module is imported, so ``profile`` imports none of them.
"""

from __future__ import annotations

from replayhub.agents import (
    aider,
    claude_code,
    codex,
    gemini_cli,
    mini_swe_agent,
    opencode,
)
from replayhub.agents.profile import CUSTOM, PROFILES, get

PROFILES.update(
    (module.PROFILE.name, module.PROFILE)
    for module in (claude_code, codex, aider, mini_swe_agent, gemini_cli, opencode)
)

NAMES = (CUSTOM, *PROFILES)
__all__ = ["CUSTOM", "NAMES", "PROFILES", "get"]
