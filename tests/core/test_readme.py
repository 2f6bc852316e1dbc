"""The README's set-up section says what a newcomer needs to know."""

from __future__ import annotations

import re
import shlex
import subprocess
from io import StringIO
from pathlib import Path

from django.core.management import call_command

from tests.conftest import ROOT


def test_the_readme_names_port_and_host_and_they_are_what_dev_run_reads():
    readme = (ROOT / "README.md").read_text()
    start = readme[readme.index("## Start here") : readme.index("## Your own project")]
    assert "`PORT`" in start and "`HOST`" in start
    dev = (ROOT / "dev").read_text()
    run = dev[dev.index("cmd_run() {") : dev.index("cmd_test() {")]
    assert re.search(r"host=\$\{HOST:-[^}]+\}", run)
    assert re.search(r"port=\$\{PORT:-[^}]+\}", run)


def test_the_readme_says_chromium_is_only_for_the_tests_and_run_skips_it():
    readme = (ROOT / "README.md").read_text()
    start = readme[readme.index("## Start here") : readme.index("## Your own project")]
    assert "Chromium is needed only by `./dev test`" in start
    dev = (ROOT / "dev").read_text()
    run = dev[dev.index("cmd_run() {") : dev.index("cmd_test() {")]
    assert "chromium" not in run


def agent_section() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Replaying your agent")
    return readme[start : readme.index("\n## ", start + 1)]


def shell_commands(section: str) -> list[str]:
    """The indented code blocks' commands, continuation lines joined."""
    commands: list[str] = []
    pending = ""
    for line in section.splitlines():
        if not line.startswith("    ") and not pending:
            continue
        text = line.strip()
        pending += text[:-1] + " " if text.endswith("\\") else text
        if not text.endswith("\\"):
            commands.append(pending)
            pending = ""
    return commands


def words(command: str) -> list[str]:
    """``command``'s words as bash splits them (quotes, ``\\$``), run by nothing."""
    script = f"set -- {command}\nprintf '%s\\0' \"$@\""
    out = subprocess.run(
        ["bash", "-c", script], capture_output=True, check=True, timeout=10
    ).stdout
    return out.decode().split("\0")[:-1]


def test_the_replaying_section_keeps_its_place_and_the_recorders_placeholder():
    readme = (ROOT / "README.md").read_text()
    order = [
        readme.index("## Your own project"),
        readme.index("## Replaying your agent"),
        readme.index("## Production"),
    ]
    assert order == sorted(order)
    assert "\n<!-- recorder -->\n" in agent_section()
    for name in ("REPLAYHUB_PROMPT_FILE", "REPLAYHUB_MODEL", "ANTHROPIC_BASE_URL"):
        assert f"`{name}`" in agent_section()


def test_the_sections_variables_are_the_ones_the_sandbox_sets():
    from replayhub.gateway import access
    from replayhub.replay import execute, workspace
    from replayhub.sandbox import network

    section = agent_section()
    sources = "".join(
        Path(module.__file__).read_text() for module in (execute, access, network)
    )
    rows = re.findall(r"^\| (`[A-Z_]+`[^|]*)\|", section, re.MULTILINE)
    named = [name for row in rows for name in re.findall(r"`([A-Z_]+)`", row)]
    assert len(named) == 14
    for name in named:
        assert f'"{name}"' in sources, name
    assert f"`{workspace.IO_DIR}/prompt.txt`" in section


def test_every_option_the_cap_table_names_is_taken_by_both_commands():
    from replayhub.management.commands import project_add, project_edit
    from replayhub.project_setup import SETTINGS

    table = re.findall(r"^\| [^|]+ \| `(--[a-z-]+)` \|", agent_section(), re.M)
    assert set(table) == {setting.option for setting in SETTINGS}
    for command in (project_add, project_edit):
        parser = command.Command().create_parser("manage.py", command.__name__)
        taken = {o for action in parser._actions for o in action.option_strings}
        assert set(table) <= taken, command.__name__


def test_the_sections_commands_give_the_project_those_settings(db, tmp_path):
    from replayhub.models import Project, Provider
    from replayhub.project_setup import SETTINGS, parse_setting

    repo = tmp_path / "shop"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for kind in ("anthropic", "openai"):
        Provider.objects.create(
            name=kind, kind=kind, base_url=f"https://{kind}.test", key_env="KEY"
        )
    last: dict[str, list[str]] = {}
    ran = []
    for command in shell_commands(agent_section()):
        argv = words(command.replace("/srv/git/shop", str(repo)))
        if argv[:2] != [".venv/bin/python", "manage.py"]:
            continue
        name, *args = argv[2:]
        assert name in ("project_add", "project_edit")
        call_command(name, *args, stdout=StringIO())
        ran.append(name)
        option = ""
        for word in args[1:]:
            if word.startswith("--"):
                option, last[option] = word, []
            else:
                last[option].append(word)

    assert ran == ["project_add", "project_edit", "project_edit", "project_edit"]
    shop = Project.objects.get(slug="shop")
    agent = last.pop("--agent-command")[0]
    assert shop.agent_command[:2] == ["sh", "-c"]
    assert shop.agent_command == shlex.split(agent)
    assert "$REPLAYHUB_PROMPT_FILE" in shop.agent_command[2]
    assert "aider --yes-always" in shop.agent_command[2]
    assert [p.name for p in shop.providers.all()] == last.pop("--providers")
    assert shop.test_command == shlex.split(last.pop("--test-command")[0])
    assert shop.repo_path == last.pop("--repo")[0]
    for setting in SETTINGS:
        if setting.option in last:
            given = last.pop(setting.option)
            value = given if setting.kind == "globs" else given[0]
            expected = parse_setting(setting, value)
            assert getattr(shop, setting.field) == expected, setting.option
    assert last == {}
