"""The README's set-up section says what a newcomer needs to know."""

from __future__ import annotations

import re
import shlex
import subprocess
from io import StringIO
from pathlib import Path

from django.core.management import call_command

from replayhub.demo import calculator, packaged
from tests.conftest import ROOT


def cmd_run(dev: str) -> str:
    """The body of ``dev``'s ``cmd_run`` function."""
    start = dev.index("cmd_run() {")
    return dev[start : dev.index("\n}\n", start)]


def test_the_readme_names_port_and_host_and_they_are_what_dev_run_reads():
    readme = (ROOT / "README.md").read_text()
    start = readme[readme.index("## Start here") : readme.index("## Your own project")]
    assert "`PORT`" in start and "`HOST`" in start
    dev = (ROOT / "dev").read_text()
    run = cmd_run(dev)
    assert re.search(r"host=\$\{HOST:-[^}]+\}", run)
    assert re.search(r"port=\$\{PORT:-[^}]+\}", run)


def test_the_readme_says_chromium_is_only_for_the_tests_and_run_skips_it():
    readme = (ROOT / "README.md").read_text()
    start = readme[readme.index("## Start here") : readme.index("## Your own project")]
    assert "Chromium is needed only by `./dev test`" in start
    dev = (ROOT / "dev").read_text()
    run = cmd_run(dev)
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


def test_the_replaying_section_keeps_its_place():
    readme = (ROOT / "README.md").read_text()
    order = [
        readme.index("## Your own project"),
        readme.index("## Replaying your agent"),
        readme.index("## Recording where the agent runs"),
        readme.index("## Production"),
    ]
    assert order == sorted(order)
    assert "<!-- recorder -->" not in readme
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
    assert len(named) == 17
    for name in named:
        assert f'"{name}"' in sources, name
    assert f"`{workspace.IO_DIR}/prompt.txt`" in section


def test_the_profile_table_is_each_profiles_package_version_and_provider():
    from replayhub import agents

    rows = re.findall(
        r"^\| `([a-z-]+)` \| ([^|]+) \| (npm|PyPI) `([^`]+)` ([0-9.]+) \| `([a-z]+)`",
        agent_section(),
        re.MULTILINE,
    )
    assert [row[0] for row in rows] == list(agents.PROFILES)
    for name, title, registry, package, version, kind in rows:
        profile = agents.PROFILES[name]
        assert (title.strip(), registry.lower(), package, version, kind) == (
            profile.title,
            profile.registry,
            profile.package,
            profile.version,
            profile.provider_kind,
        )


def test_every_option_the_cap_table_names_is_taken_by_both_commands():
    from replayhub.management.commands import project_add, project_edit
    from replayhub.models.project_settings import SETTINGS

    table = re.findall(r"^\| [^|]+ \| `(--[a-z-]+)` \|", agent_section(), re.M)
    assert set(table) == {setting.option for setting in SETTINGS}
    for command in (project_add, project_edit):
        parser = command.Command().create_parser("manage.py", command.__name__)
        taken = {o for action in parser._actions for o in action.option_strings}
        assert set(table) <= taken, command.__name__


def test_the_sections_commands_give_the_project_those_settings(db, tmp_path):
    from replayhub import agents
    from replayhub.models import Project, Provider
    from replayhub.models.project_settings import SETTINGS
    from replayhub.project_setup import parse_setting

    repo = tmp_path / "shop"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for kind in ("anthropic", "openai", "gemini"):
        Provider.objects.create(
            name=kind, kind=kind, base_url=f"https://{kind}.test", key_env="KEY"
        )
    last: dict[str, list[str]] = {}
    ran = []
    profiles = []
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
        if "--agent" in args:
            # Each command leaves the project running the agent it names.
            shop = Project.objects.get(slug="shop")
            given = args[args.index("--agent") + 1]
            assert shop.agent == given
            if given != "custom":
                assert shop.agent_command == []
                profiles.append(given)
                version = (
                    args[args.index("--agent-version") + 1]
                    if ("--agent-version" in args)
                    else ""
                )
                assert shop.agent_version == version

    assert ran == ["project_add"] + ["project_edit"] * 7
    # Every profile is shown, each with a provider of its kind.
    assert profiles == list(agents.PROFILES)
    shop = Project.objects.get(slug="shop")
    assert last.pop("--agent") == ["custom"]
    last.pop("--agent-version")
    assert shop.agent_version == ""
    agent = last.pop("--agent-command")[0]
    assert shop.agent_command[:2] == ["sh", "-c"]
    assert shop.agent_command == shlex.split(agent)
    assert "$REPLAYHUB_PROMPT_FILE" in shop.agent_command[2]
    # The placeholder is filled by each replay with the project's cap.
    assert "--max-steps {max_turns}" in shop.agent_command[2]
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


def recording_section() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Recording where the agent runs")
    return readme[start : readme.index("\n## ", start + 1)]


def test_the_recording_section_followed_word_for_word_delivers_a_run(
    transactional_db, live_server, tmp_path, mirror_dir, monkeypatch, settings
):
    """The section's commands, run as written, the example hosts swapped for a
    git server behind a password and this test's ReplayHub: the project is
    registered by URL, the token made, the recorder fetched and run in a clone,
    and the run arrives; a worker's preflight fetches its commit into the
    server's mirror."""
    import os
    import sys
    import urllib.request

    from replayhub.ingest.preflight import preflight_runs
    from replayhub.models import Preflight, Project, Run
    from tests.gitrepos import make_repo
    from tests.gitservers import HttpGitServer

    secret = "tok-readme"
    # The section's variable is allowed by the default allow-list.
    monkeypatch.setenv("REPLAYHUB_REPO_TOKEN_SHOP", secret)
    served = tmp_path / "served"
    seed = make_repo(tmp_path, {"app.py": "TOTAL = 1\n"}, name="seed")
    (served / "acme").mkdir(parents=True)
    git = ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com"]
    clone = [*git, "clone", "-q"]
    subprocess.run(
        [*clone, "--bare", str(seed.path), str(served / "acme" / "shop.git")]
    )
    with HttpGitServer(served, password=secret) as server:
        remote = server.url("acme/shop.git")
        swaps = {
            "https://git.example.com/acme/shop.git": remote,
            "https://replayhub.example.com": live_server.url,
            "/tmp/replayhub-record.py": str(tmp_path / "replayhub-record.py"),
        }
        checkout = tmp_path / "checkout"
        helper = f"!f() {{ echo username=git; echo password={secret}; }}; f"
        subprocess.run(
            [*clone, "-c", f"credential.helper={helper}", remote, str(checkout)],
            check=True,
        )
        (checkout / "agent.sh").write_text("echo 'TOTAL = 2' > app.py\n")
        (checkout / "agent.sh").chmod(0o755)
        subprocess.run([*git, "add", "agent.sh"], cwd=checkout, check=True)
        subprocess.run([*git, "commit", "-qm", "the agent"], cwd=checkout, check=True)
        subprocess.run([*git, "push", "-q", "origin", "HEAD"], cwd=checkout, check=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("REPLAYHUB_", "GIT_"))
        }
        env.update(
            GIT_AUTHOR_NAME="Dev",
            GIT_AUTHOR_EMAIL="dev@example.com",
            GIT_COMMITTER_NAME="Dev",
            GIT_COMMITTER_EMAIL="dev@example.com",
        )
        token = ""
        ran = []
        for command in shell_commands(recording_section()):
            for example, here in swaps.items():
                command = command.replace(example, here)
            argv = words(command)
            if argv[:2] == [".venv/bin/python", "manage.py"]:
                out = StringIO()
                call_command(*argv[2:], stdout=out, stderr=StringIO())
                token = out.getvalue().strip() or token
            elif argv[0] == "curl":
                # curl -fsS -o FILE URL, with no curl needed on the machine.
                url = argv[-1]
                assert url.startswith(live_server.url), url
                with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310
                    Path(argv[argv.index("-o") + 1]).write_bytes(answer.read())
            elif argv[0] == "export":
                name, _, _ = argv[1].partition("=")
                env[name] = token
            else:
                assert argv[0] == "python3", argv
                done = subprocess.run(
                    [sys.executable, *argv[1:]],
                    cwd=checkout,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert done.returncode == 0, done.stderr
            ran.append(argv[0] if argv[0] != ".venv/bin/python" else argv[2])
        # What the preflight task does on a worker (the server's request never
        # runs git against the remote).
        preflight_runs(run_ids=list(Run.objects.values_list("pk", flat=True)))

    assert ran == ["project_add", "ingest_token", "curl", "export", "python3"]
    shop = Project.objects.get(slug="shop")
    assert (shop.repo_path, shop.repo_credential_env) == (
        remote,
        "REPLAYHUB_REPO_TOKEN_SHOP",
    )
    run = Run.objects.get(project=shop)
    assert run.prompt == "Round invoice totals half-even"
    assert run.preflight == Preflight.READY, run.preflight_reason
    assert shop.mirror().missing([run.original_commit]) == []
    # The developer's clone: the agent's edit, on the branch it was on.
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=checkout, capture_output=True, text=True
    ).stdout
    assert status.strip() == "M app.py"


def test_the_demo_is_described_by_its_real_size():
    readme = (ROOT / "README.md").read_text()
    said = re.search(r"\((\d+) runs in two projects", readme)
    assert said, "the README no longer says how many runs the demo loads"
    assert int(said[1]) == len(calculator.RUNS) + len(packaged.RUNS)
