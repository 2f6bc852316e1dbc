"""Registering a project from the command line (a project of rollouts: in
``test_project_add_rollouts``)."""

from __future__ import annotations

import subprocess
import uuid
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from replayhub.models import Project
from replayhub.project_setup import ProjectInvalid
from tests.factories import make_superuser
from tests.gitrepos import make_repo
from tests.gitservers import GitDaemon, HttpGitServer, free_port


def add(slug, repo, **kw):
    args = [
        slug,
        "--repo",
        str(repo),
        "--test-command",
        kw.pop("test", "python -m unittest -v"),
        "--agent-command",
        kw.pop("agent", "sh ./agent.sh 'two words'"),
    ]
    for glob in kw.pop("globs", []):
        args += ["--allowed-paths", glob]
    args += kw.pop("extra", [])
    if "time_limit" in kw:
        args += ["--time-limit", str(kw.pop("time_limit"))]
    call_command("project_add", *args, **kw)


def test_a_project_is_registered_with_commands_as_argument_lists(db, repo):
    add("shop", repo, globs=["src/**", "tests/**"], time_limit=120)
    project = Project.objects.get(slug="shop")
    assert project.repo_path == str(repo)
    assert project.test_command == ["python", "-m", "unittest", "-v"]
    assert project.agent_command == ["sh", "./agent.sh", "two words"]
    assert project.allowed_paths == ["src/**", "tests/**"]
    assert project.time_limit_seconds == 120


def test_shell_metacharacters_stay_plain_arguments(db, repo):
    add("shop", repo, test="pytest; rm -rf / && echo ~")
    assert Project.objects.get().test_command == [
        "pytest;",
        "rm",
        "-rf",
        "/",
        "&&",
        "echo",
        "~",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"test": ""}, "--test-command is empty"),
        ({"agent": "   "}, "--agent-command is empty"),
        ({"test": "pytest 'unclosed"}, "cannot split"),
        ({"time_limit": 0}, "--time-limit: at least 1 s"),
        ({"globs": ["../outside"]}, "leaves the repository"),
        ({"globs": ["/abs/**"]}, "is absolute: give a path from the repository"),
        ({"globs": ["src/[unclosed"]}, "'\\[' that is never closed"),
        ({"extra": ["--default-branch", "bad..branch"]}, "not a branch name"),
    ],
)
def test_bad_arguments_are_refused_with_exit_code_2(db, repo, kwargs, message):
    with pytest.raises(CommandError, match=message) as info:
        add("shop", repo, **kwargs)
    assert info.value.returncode == 2
    assert not Project.objects.exists()


def test_a_path_that_is_not_a_git_repository_is_refused(db, tmp_path):
    with pytest.raises(CommandError, match="is not a git repository") as info:
        add("shop", tmp_path)
    assert info.value.returncode == 2
    with pytest.raises(CommandError, match="is not a git repository"):
        add("shop", tmp_path / "missing")


def test_a_bare_repository_is_registered_too(db, tmp_path):
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)

    add("shop", bare)

    assert Project.objects.get().repo_path == str(bare)


def test_a_duplicate_slug_is_refused(db, repo):
    add("shop", repo)
    with pytest.raises(CommandError, match="already exists") as info:
        add("shop", repo)
    assert info.value.returncode == 2
    assert Project.objects.count() == 1


@pytest.mark.parametrize(
    ("slug", "message"),
    [
        ("new", "is reserved"),
        ("shop/edit", "not a valid project name"),
        ("<b>x</b>", "not a valid project name"),
        ("_shop", "not a valid project name"),
        ("s" * 65, "not a valid project name"),
    ],
)
def test_a_slug_that_cannot_name_the_projects_pages_is_refused(db, repo, slug, message):
    with pytest.raises(CommandError, match=message):
        add(slug, repo)
    assert not Project.objects.exists()


def test_the_command_line_prints_one_line_and_exits_2(db, repo, tmp_path):
    import sys

    from tests.conftest import ROOT, child_env

    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "project_add",
            "x",
            "--repo",
            str(tmp_path),
            "--test-command",
            "true",
            "--agent-command",
            "true",
        ],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "is not a git repository" in result.stderr


def test_test_paths_default_to_common_layouts_and_runner_configuration(db, repo):
    add("shop", repo)
    paths = Project.objects.get().test_paths
    assert {"**/tests/**", "**/test_*.py", "**/conftest.py"} <= set(paths)
    assert not Project.objects.get().allow_test_interference


def test_test_paths_and_interference_can_be_set(db, repo):
    call_command(
        "project_add",
        "shop",
        "--repo",
        str(repo),
        "--test-command",
        "make check",
        "--agent-command",
        "./agent.sh",
        "--test-paths",
        "checks/**",
        "Makefile",
        "--allow-test-interference",
    )
    project = Project.objects.get()
    assert project.test_paths == ["checks/**", "Makefile"]
    assert project.allow_test_interference


@pytest.mark.parametrize("option", ["--test-paths", "--allowed-paths"])
def test_a_malformed_glob_is_refused_and_nothing_is_saved(db, repo, option):
    with pytest.raises(CommandError, match=f"{option}: '\\[z-a\\].py' is not a valid"):
        call_command(
            "project_add",
            "shop",
            "--repo",
            str(repo),
            "--test-command",
            "pytest",
            "--agent-command",
            "./agent.sh",
            option,
            "[z-a].py",
        )
    assert not Project.objects.exists()


def test_the_admin_form_refuses_a_malformed_glob(db, repo):
    from django.core.exceptions import ValidationError

    project = Project(slug="shop", repo_path=str(repo), test_paths=["ok/**", "[z-a]"])
    with pytest.raises(ValidationError) as refused:
        project.full_clean()
    assert "test_paths" in refused.value.message_dict


DIGEST = "sha256:" + "ab" * 32


def test_the_setup_phase_and_root_image_are_registered(db, repo):
    call_command(
        "project_add",
        "shop",
        "--repo",
        str(repo),
        "--test-command",
        "python -m pytest -q",
        "--agent-command",
        "./agent.sh",
        "--setup-command",
        "sh -c 'pip install -r requirements.txt'",
        "--setup-inputs",
        "requirements*.txt",
        "--egress-setup",
        "pypi.org:443",
        "files.pythonhosted.org:443",
        "--root-image",
        f"python@{DIGEST}",
        "--require-image-match",
    )
    project = Project.objects.get()
    assert project.setup_command == ["sh", "-c", "pip install -r requirements.txt"]
    assert project.setup_inputs == ["requirements*.txt"]
    assert project.egress_setup == ["pypi.org:443", "files.pythonhosted.org:443"]
    assert (project.root_image, project.require_image_match) == (
        f"python@{DIGEST}",
        True,
    )


def test_setup_inputs_default_to_the_common_lockfiles(db, repo):
    add("shop", repo)
    project = Project.objects.get()
    assert project.setup_command == []
    assert {"requirements*.txt", "poetry.lock", "package-lock.json", "go.sum"} <= set(
        project.setup_inputs
    )


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--root-image", "python:3.12", "not pinned by digest"),
        ("--egress-setup", "pypi.org", "--egress-setup"),
        ("--setup-command", "pip install 'unclosed", "cannot split"),
    ],
)
def test_a_bad_setup_option_is_refused(db, repo, option, value, message):
    with pytest.raises(CommandError, match=message):
        call_command(
            "project_add",
            "shop",
            "--repo",
            str(repo),
            "--test-command",
            "pytest",
            "--agent-command",
            "./agent.sh",
            option,
            value,
        )
    assert not Project.objects.exists()


def test_the_admin_form_refuses_a_floating_root_image_and_a_bad_setup_command(db, repo):
    from django.core.exceptions import ValidationError

    project = Project(
        slug="shop", repo_path=str(repo), root_image="python:3", setup_command="pip"
    )
    with pytest.raises(ValidationError) as refused:
        project.full_clean()
    assert {"root_image", "setup_command"} <= set(refused.value.message_dict)


def test_the_admin_edits_the_setup_phase_and_refuses_a_bad_one(db, repo, client):
    from django.urls import reverse

    client.force_login(make_superuser(email=""))
    add("shop", repo)
    project = Project.objects.get()
    url = reverse("admin:replayhub_project_change", args=[project.pk])

    page = client.get(url).content.decode()

    for field in ("setup_command", "setup_inputs", "egress_setup", "root_image"):
        assert f'name="{field}"' in page
    form = client.get(url).context["adminform"].form
    data = {
        name: form[name].value() if form[name].value() is not None else ""
        for name in form.fields
    }
    data.update(
        {
            "setup_command": '["sh", "setup.sh"]',
            "egress_setup": '["127.0.0.1:8766"]',
            "root_image": "python:3.12",
            "budget-TOTAL_FORMS": "0",
            "budget-INITIAL_FORMS": "0",
        }
    )
    refused = client.post(url, data)
    assert refused.status_code == 200
    assert "pinned by digest" in refused.content.decode()

    data["root_image"] = f"python@{DIGEST}"
    saved = client.post(url, data)
    assert saved.status_code == 302, saved.content.decode()[:2000]
    project.refresh_from_db()
    assert project.setup_command == ["sh", "setup.sh"]
    assert project.root_image == f"python@{DIGEST}"


def test_the_admin_warns_when_a_rollout_project_is_saved_without_a_verifier(
    db, repo, client
):
    from django.urls import reverse

    client.force_login(make_superuser(email=""))
    add("shop", repo)
    project = Project.objects.get()
    url = reverse("admin:replayhub_project_change", args=[project.pk])
    form = client.get(url).context["adminform"].form
    data = {
        name: form[name].value() if form[name].value() is not None else ""
        for name in form.fields
    }
    data.update(
        {
            "harness_command": '["python3", "harness.py"]',
            "budget-TOTAL_FORMS": "0",
            "budget-INITIAL_FORMS": "0",
        }
    )

    unverified = client.post(url, data, follow=True).content.decode()
    data["verifier_command"] = '["python3", "score.py"]'
    verified = client.post(url, data, follow=True).content.decode()

    assert "Project shop has a rollout harness but no separate verifier" in unverified
    assert "no separate verifier" not in verified
    project.refresh_from_db()
    assert project.verifier_command == ["python3", "score.py"]


# --- a repository on a git remote ------------------------------------------------

SECRET = "tok-" + uuid.uuid4().hex


@pytest.fixture
def served(tmp_path):
    """A repository served by git daemon and, behind a password, git http-backend."""
    origin = make_repo(tmp_path / "served", {"app.py": "VALUE = 1\n"}, name="app")
    with (
        GitDaemon(origin.path.parent) as daemon,
        HttpGitServer(origin.path.parent, password=SECRET) as private,
    ):
        yield daemon, private


def test_a_project_on_a_remote_is_registered_by_its_url(db, served, mirror_dir):
    daemon, _ = served
    out = StringIO()

    add("app", daemon.url("app"), stdout=out)

    project = Project.objects.get(slug="app")
    assert project.repo_path == daemon.url("app")
    assert project.repo_credential_env == ""
    assert f"registered project app ({daemon.url('app')})" in out.getvalue()


def test_a_private_remote_is_registered_with_the_name_of_its_credential(
    db, served, mirror_dir, monkeypatch
):
    _, private = served
    monkeypatch.setenv("REPLAYHUB_REPO_TOKEN_APP", SECRET)

    add(
        "app",
        private.url("app"),
        extra=["--repo-credential-env", "REPLAYHUB_REPO_TOKEN_APP"],
    )

    project = Project.objects.get(slug="app")
    assert project.repo_credential_env == "REPLAYHUB_REPO_TOKEN_APP"
    stored = Project.objects.filter(pk=project.pk).values().get()
    assert SECRET not in repr(stored)


def test_a_remote_that_does_not_answer_is_refused_in_one_line(
    db, served, mirror_dir, monkeypatch
):
    _, private = served
    monkeypatch.delenv("REPLAYHUB_REPO_TOKEN_APP", raising=False)
    with pytest.raises(CommandError) as anonymous:
        add("app", private.url("app"))
    with pytest.raises(CommandError) as unset:
        add(
            "app",
            private.url("app"),
            extra=["--repo-credential-env", "REPLAYHUB_REPO_TOKEN_APP"],
        )
    nowhere = f"git://127.0.0.1:{free_port()}/app"
    with pytest.raises(CommandError) as refused:
        add("app", nowhere)

    assert anonymous.value.returncode == 2
    assert str(anonymous.value) == (
        f"--repo: {private.url('app')} did not answer as a git repository: "
        "fatal: could not read Username for 'http://127.0.0.1:"
        f"{private.port}': terminal prompts disabled"
    )
    assert str(unset.value).endswith(
        "the credential variable REPLAYHUB_REPO_TOKEN_APP is not set on this host"
    )
    assert "\n" not in str(refused.value) and "Connection refused" in str(refused.value)
    assert not Project.objects.exists()


@pytest.mark.parametrize(
    ("repo", "extra", "message"),
    [
        ("https://me:hunter2@git.example.com/app.git", [], "carries a password"),
        ("ftp://git.example.com/app.git", [], "not a transport"),
        (
            "https://git.example.com/app.git",
            ["--repo-credential-env", "MY-TOKEN"],
            "not an environment variable name",
        ),
        (
            "git@git.example.com:app.git",
            ["--repo-credential-env", "MY_TOKEN"],
            "ssh uses the host's own keys",
        ),
    ],
)
def test_a_bad_url_or_credential_variable_is_refused_before_any_network(
    db, mirror_dir, repo, extra, message
):
    with pytest.raises(CommandError, match=message) as info:
        add("app", repo, extra=extra)
    assert "hunter2" not in str(info.value)
    assert info.value.returncode == 2


def test_a_credential_variable_is_refused_for_a_path(db, repo):
    with pytest.raises(CommandError, match="is for a repository given as an https"):
        add("shop", repo, extra=["--repo-credential-env", "MY_TOKEN"])


def test_every_replay_setting_is_taken_at_registration(db, repo):
    call_command(
        "project_add",
        "shop",
        "--repo",
        str(repo),
        "--test-command",
        "pytest",
        "--agent-command",
        "./agent.sh",
        "--test-time-limit",
        "120",
        "--memory-mb",
        "1024",
        "--max-processes",
        "64",
        "--max-output-bytes",
        "65536",
        "--max-requests",
        "25",
        "--max-tokens",
        "100000",
        "--max-turns",
        "12",
        "--max-cost-usd",
        "0.75",
        "--max-disk-mb",
        "512",
        "--max-files",
        "10000",
        "--cap-grace",
        "4",
        "--setup-time-limit",
        "600",
        "--setup-memory-mb",
        "2048",
        "--setup-max-disk-mb",
        "1024",
        "--setup-max-files",
        "5000",
        "--runner",
        "docker",
        "--ignored-paths",
        ".aider*",
        "notes/**",
        stdout=StringIO(),
    )
    project = Project.objects.get()
    assert project.test_time_limit_seconds == 120
    assert (project.memory_limit_mb, project.max_processes) == (1024, 64)
    assert project.max_output_bytes == 65536
    assert (project.max_requests, project.max_tokens, project.max_turns) == (
        25,
        100_000,
        12,
    )
    assert str(project.max_cost_usd) == "0.7500"
    assert (project.max_disk_mb, project.max_files, project.cap_grace_seconds) == (
        512,
        10_000,
        4,
    )
    assert (
        project.setup_time_limit_seconds,
        project.setup_memory_mb,
        project.setup_max_disk_mb,
        project.setup_max_files,
    ) == (600, 2048, 1024, 5000)
    assert project.runner == "docker"
    assert project.ignored_paths == [".aider*", "notes/**"]


def test_the_agents_files_are_ignored_by_default_and_a_bad_glob_is_refused(db, repo):
    from replayhub.models.projects import DEFAULT_IGNORED_PATHS

    add("shop", repo)
    assert Project.objects.get().ignored_paths == list(DEFAULT_IGNORED_PATHS)
    with pytest.raises(CommandError, match="--ignored-paths: '\\[z-a\\]' is not a"):
        call_command(
            "project_add",
            "cart",
            "--repo",
            str(repo),
            "--test-command",
            "pytest",
            "--agent-command",
            "./agent.sh",
            "--ignored-paths",
            "[z-a]",
        )
    assert not Project.objects.filter(slug="cart").exists()
    project = Project.objects.get()
    project.ignored_paths = ["ok/**", "[z-a]"]
    with pytest.raises(ValidationError) as refused:
        project.full_clean()
    assert "ignored_paths" in refused.value.message_dict


def test_a_remotes_default_branch_must_be_one_of_its_branches(db, served, mirror_dir):
    daemon, _ = served

    with pytest.raises(CommandError) as missing:
        add("app", daemon.url("app"), extra=["--default-branch", "nope"])
    add("app", daemon.url("app"), extra=["--default-branch", "main"])

    assert str(missing.value) == (
        f"--default-branch: {daemon.url('app')} has no branch 'nope' "
        "(its branches: main)."
    )
    assert Project.objects.get(slug="app").default_branch == "main"


def test_a_remote_that_is_no_repository_is_refused_with_gits_reason(
    db, tmp_path, mirror_dir
):
    nowhere = f"file://{tmp_path}/nowhere"

    with pytest.raises(CommandError) as refused:
        add("app", nowhere)

    assert str(refused.value) == (
        f"--repo: {nowhere} did not answer as a git repository: fatal: "
        f"'{tmp_path}/nowhere' does not appear to be a git repository"
    )


@pytest.mark.parametrize(
    ("message", "beside_its_field"),
    [
        ("--repo: file:///x did not answer", "file:///x did not answer"),
        ("--repo: https://h/x did not answer", "https://h/x did not answer"),
        ("--time-limit: must be at least 1", "Must be at least 1"),
    ],
)
def test_a_problem_beside_its_field_starts_a_sentence_but_keeps_a_url(
    message, beside_its_field
):
    option = message.split(":", 1)[0]

    assert ProjectInvalid(option, message).detail == beside_its_field
