"""A cached environment is reused only where it would have been built the
same, and the setup phase has limits and a listed way out, in the real sandbox."""

from __future__ import annotations

import pytest

from replayhub.environments import build
from tests.factories import make_calc_project
from tests.gitrepos import Executable
from tests.scripted import make_project_repo

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("env_cache")]

# A setup that plants a python3 reporting every test passed: an environment
# made this way must never serve another project's replays.
PLANT = """#!/bin/sh
mkdir -p "$REPLAYHUB_ENV_DIR/bin"
printf '#!/bin/sh\\necho "Ran 2 tests in 0.001s"; echo; echo OK\\n' \\
  > "$REPLAYHUB_ENV_DIR/bin/python3"
chmod +x "$REPLAYHUB_ENV_DIR/bin/python3"
"""
HONEST = """#!/bin/sh
mkdir -p "$REPLAYHUB_ENV_DIR"
echo honest > "$REPLAYHUB_ENV_DIR/made"
"""


def project_with(tmp_path, name: str, setup: str, **fields):
    repo = make_project_repo(tmp_path / name)
    repo.commit({"setup.sh": Executable(setup)}, "setup")
    project = make_calc_project(
        repo,
        slug=name,
        setup_command=["sh", "setup.sh"],
        setup_inputs=[],  # no lockfile: only what the setup reads counts
        **fields,
    )
    return project, repo


def test_two_repositories_with_one_setup_command_never_share_an_environment(
    tmp_path,
):
    planted, _ = project_with(tmp_path, "planted", PLANT)
    honest, _ = project_with(tmp_path, "honest", HONEST)

    first = build.build_ahead(planted)
    second = build.build_ahead(honest)

    assert first.key != second.key
    assert not second.cached  # its own setup ran
    assert (second.path / "made").read_text() == "honest\n"
    assert not (second.path / "bin" / "python3").exists()
    assert "setup.sh" in second.made_of["inputs"]


def test_a_base_that_edits_the_setup_script_gets_a_new_environment(tmp_path):
    project, repo = project_with(tmp_path, "calc", HONEST)
    before = build.build_ahead(project)
    edited = repo.commit({"setup.sh": Executable(PLANT)}, "another setup")

    after = build.build_ahead(project, edited)

    assert after.key != before.key and not after.cached
    assert (after.path / "bin" / "python3").exists()


def test_a_file_the_setup_command_names_is_part_of_the_key(tmp_path):
    project, repo = project_with(tmp_path, "calc", HONEST)
    project.setup_command = ["sh", "-c", "sh scripts/install.bash && sh setup.sh"]
    project.save()
    repo.commit({"scripts/install.bash": "true\n"}, "installer")
    before = build.build_ahead(project)
    edited = repo.commit({"scripts/install.bash": "echo changed\n"}, "changed")

    after = build.build_ahead(project, edited)

    assert "scripts/install.bash" in before.made_of["inputs"]
    assert after.key != before.key


def test_projects_share_an_environment_only_in_a_group_an_admin_named(tmp_path):
    project, repo = project_with(tmp_path, "calc", HONEST)
    twin = make_calc_project(
        repo, slug="twin", setup_command=["sh", "setup.sh"], setup_inputs=[]
    )
    assert build.build_ahead(project).key != build.build_ahead(twin).key

    project.env_share_group = twin.env_share_group = "calc-team"
    project.save()
    twin.save()
    shared = build.build_ahead(project)
    again = build.build_ahead(twin)

    assert again.key == shared.key and again.cached
    assert again.made_of["scope"] == "group:calc-team"


def test_the_setup_phase_has_a_disk_cap(tmp_path):
    writer = """#!/bin/sh
mkdir -p "$REPLAYHUB_ENV_DIR"
head -c 80000000 /dev/zero > "$REPLAYHUB_ENV_DIR/big"
sleep 2
"""
    project, _ = project_with(tmp_path, "calc", writer, setup_max_disk_mb=20)

    with pytest.raises(build.SetupFailed) as failed:
        build.build_ahead(project)

    assert "disk cap" in failed.value.detail


def test_a_setup_allowed_no_host_runs_behind_the_proxy_and_names_the_host(tmp_path):
    fetch = """#!/bin/sh
python3 -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/")'
"""
    project, _ = project_with(tmp_path, "calc", fetch)

    with pytest.raises(build.SetupFailed) as failed:
        build.build_ahead(project)

    assert "pypi.org:443" in failed.value.detail
    assert [a.host for a in failed.value.attempts] == ["pypi.org"]
