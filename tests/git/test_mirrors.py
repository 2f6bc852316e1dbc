"""Mirrors of projects whose repository lives on a git remote, served for real
on 127.0.0.1 (git daemon, and git http-backend behind Basic auth)."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from replayhub.git.history import History
from replayhub.git.mirrors import (
    CredentialPolicy,
    Mirror,
    Remote,
    RepoUnreachable,
    credential_env_problem,
    is_remote,
    url_problem,
)
from tests.factories import make_git_project
from tests.gitrepos import Repo, make_repo
from tests.gitservers import GitDaemon, HttpGitServer, free_port

SECRET = "tok-" + uuid.uuid4().hex
TOKENS = CredentialPolicy(allowed=("REPLAYHUB_REPO_TOKEN_*",))


@pytest.fixture
def origin(tmp_path) -> Repo:
    return make_repo(tmp_path / "served", {"app.py": "VALUE = 1\n"}, name="app")


@pytest.fixture
def daemon(origin):
    with GitDaemon(origin.path.parent) as server:
        yield server


def mirror_of(url: str, root: Path, credential_env: str = "") -> Mirror:
    return Mirror(root=root, key="7", remote=Remote(url, credential_env, TOKENS))


def test_urls_are_told_from_paths():
    assert is_remote("https://git.example.com/team/app.git")
    assert is_remote("ssh://git@git.example.com/team/app.git")
    assert is_remote("git@git.example.com:team/app.git")
    assert is_remote("file:///srv/git/app.git")
    assert not is_remote("/srv/git/app")
    assert not is_remote("relative/app")


def test_a_url_with_a_password_is_refused_without_repeating_it():
    problem = url_problem("https://alice:hunter2@git.example.com/app.git")
    assert "password" in problem and "hunter2" not in problem
    assert url_problem("https://alice@git.example.com/app.git") == ""
    assert "transport" in url_problem("ext::sh-c-touch")
    assert "transport" in url_problem("ftp://git.example.com/app.git")
    assert url_problem("ssh://-oProxyCommand=x/app") != ""
    assert url_problem("file://relative/app") != ""


def test_a_credential_variable_is_a_plain_name_for_an_http_url():
    https = "https://git.example.com/app.git"
    assert credential_env_problem("REPLAYHUB_REPO_TOKEN_APP", https) == ""
    assert "not an environment variable" in credential_env_problem("A-B", https)
    assert "not an environment variable" in credential_env_problem("1TOKEN", https)
    assert "git's own" in credential_env_problem("GIT_ASKPASS", https)
    assert "ssh uses" in credential_env_problem("TOKEN", "git@host:app.git")


def test_a_mirror_is_a_bare_copy_with_every_ref_of_the_remote(
    origin, daemon, mirror_dir
):
    origin.git("update-ref", "refs/replayhub/runs/1", origin.head())
    mirror = mirror_of(daemon.url("app"), mirror_dir)

    git_dir = mirror.ready()

    assert git_dir.parent == mirror_dir and git_dir.name.startswith("7-")
    assert (git_dir / "HEAD").is_file() and not (git_dir / ".git").exists()
    with History(git_dir) as history:
        assert history.branch_tip("main") == origin.head()
        assert history.head_branch() == "main"
        assert history.resolve("refs/replayhub/runs/1") == origin.head()


def test_a_commit_pushed_later_is_fetched_when_it_is_named(origin, daemon, mirror_dir):
    mirror = mirror_of(daemon.url("app"), mirror_dir)
    mirror.ready()
    later = origin.commit({"app.py": "VALUE = 2\n"}, "later", branch="agent/x")

    assert mirror.missing([later]) == [later]
    mirror.ready(commits=[later])
    assert mirror.missing([later]) == []


def test_a_commit_only_under_replayhubs_refs_arrives_with_a_refresh(
    origin, daemon, mirror_dir
):
    mirror = mirror_of(daemon.url("app"), mirror_dir)
    mirror.ready()
    origin.commit({"app.py": "VALUE = 3\n"}, "kept", branch="tmp")
    kept = origin.head()
    origin.git("update-ref", "refs/replayhub/runs/2", kept)
    origin.checkout("main")
    origin.git("branch", "-D", "tmp")

    mirror.ready(refresh=True)

    with History(mirror.git_dir) as history:
        assert history.resolve("refs/replayhub/runs/2") == kept


def test_a_commit_the_remote_never_had_is_still_missing_not_an_error(
    daemon, mirror_dir
):
    mirror = mirror_of(daemon.url("app"), mirror_dir)
    absent = "0123456789abcdef0123456789abcdef01234567"

    mirror.ready(commits=[absent])

    assert mirror.missing([absent]) == [absent]


def test_two_workers_asking_at_once_make_one_mirror(origin, daemon, mirror_dir):
    mirror = mirror_of(daemon.url("app"), mirror_dir)
    answers: list[Path] = []
    threads = [
        threading.Thread(target=lambda: answers.append(mirror.ready()))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert answers == [mirror.git_dir] * 3
    assert sorted(p.name for p in mirror_dir.glob("*.git")) == [mirror.git_dir.name]
    assert not list(mirror_dir.glob("*.tmp-*"))


def test_a_changed_url_makes_a_new_mirror_and_the_old_one_goes(
    origin, daemon, mirror_dir, tmp_path
):
    old = mirror_of(daemon.url("app"), mirror_dir)
    old.ready()
    new = mirror_of(f"file://{origin.path}", mirror_dir)

    new.ready()

    assert new.git_dir != old.git_dir
    assert new.git_dir.is_dir() and not old.git_dir.exists()


def test_a_remote_that_is_gone_is_unreachable_in_gits_own_words(
    origin, daemon, mirror_dir
):
    mirror = mirror_of(daemon.url("app"), mirror_dir)
    mirror.ready()
    later = origin.commit({"app.py": "VALUE = 4\n"}, "later")
    daemon.stop()

    with pytest.raises(RepoUnreachable) as caught:
        mirror.ready(commits=[later])

    assert "Connection refused" in caught.value.line
    # What the mirror held before is still there for the commits it has.
    assert mirror.missing([origin.rev("HEAD~1")]) == []


def test_a_private_remote_is_read_with_the_credential_from_the_named_variable(
    origin, mirror_dir, monkeypatch
):
    monkeypatch.setenv("REPLAYHUB_REPO_TOKEN_APP", SECRET)
    with HttpGitServer(origin.path.parent, password=SECRET) as server:
        mirror = mirror_of(server.url("app"), mirror_dir, "REPLAYHUB_REPO_TOKEN_APP")
        mirror.ready()
        later = origin.commit({"app.py": "VALUE = 5\n"}, "later")
        mirror.ready(commits=[later])

    assert mirror.missing([later]) == []
    # The server was asked with the credential, never with it in a URL.
    assert any(auth.startswith("Basic ") for _, _, auth in server.requests)
    assert not any(SECRET in path for _, path, _ in server.requests)
    # Nothing the mirror keeps on disk holds it.
    for path in mirror_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_private_remote_without_its_credential_is_a_clear_failure(
    origin, mirror_dir, monkeypatch
):
    monkeypatch.delenv("REPLAYHUB_REPO_TOKEN_APP", raising=False)
    with HttpGitServer(origin.path.parent, password=SECRET) as server:
        with pytest.raises(RepoUnreachable) as anonymous:
            mirror_of(server.url("app"), mirror_dir).ready()
        with pytest.raises(RepoUnreachable) as unset:
            mirror_of(server.url("app"), mirror_dir, "REPLAYHUB_REPO_TOKEN_APP").ready()
        monkeypatch.setenv("REPLAYHUB_REPO_TOKEN_APP", "wrong")
        with pytest.raises(RepoUnreachable) as wrong:
            mirror_of(server.url("app"), mirror_dir, "REPLAYHUB_REPO_TOKEN_APP").ready()

    assert "could not read Username" in anonymous.value.line
    assert unset.value.line == (
        "the credential variable REPLAYHUB_REPO_TOKEN_APP is not set on this host"
    )
    assert "Authentication failed" in wrong.value.line
    assert "wrong" not in wrong.value.line
    assert not list(mirror_dir.glob("*.git"))


def test_the_credential_goes_only_to_the_remotes_own_origin(origin, mirror_dir):
    env = Remote("https://git.example.com/app.git", "REPLAYHUB_REPO_TOKEN_APP", TOKENS)
    os.environ["REPLAYHUB_REPO_TOKEN_APP"] = SECRET
    try:
        given = env.environment()
    finally:
        del os.environ["REPLAYHUB_REPO_TOKEN_APP"]
    keys = [given[k] for k in given if k.startswith("GIT_CONFIG_KEY_")]
    scoped = [key for key in keys if key.startswith("credential.")]
    assert scoped == ["credential.helper", "credential.https://git.example.com.helper"]
    assert SECRET not in "".join(v for k, v in given.items() if "PASSWORD" not in k)


def test_a_url_project_reads_its_history_from_its_mirror(
    db, origin, daemon, mirror_dir
):
    project = make_git_project(origin, repo_path=daemon.url("app"))

    git_dir = project.repository()

    assert git_dir.parent == Path(settings.REPLAYHUB_MIRROR_DIR)
    with History(git_dir) as history:
        assert history.branch_tip("main") == origin.head()


def test_a_path_project_is_read_where_it_is(db, origin, mirror_dir):
    project = make_git_project(origin)

    assert project.repository() == origin.path
    assert not mirror_dir.exists()


def test_deleting_a_project_removes_its_mirrors(
    db, origin, daemon, mirror_dir, django_capture_on_commit_callbacks
):
    project = make_git_project(origin, repo_path=daemon.url("app"))
    other = make_git_project(origin, slug="other", repo_path=daemon.url("app"))
    mine, theirs = project.repository(), other.repository()

    with django_capture_on_commit_callbacks(execute=True):
        project.delete()

    assert not mine.exists()
    assert theirs.is_dir()


def test_a_hosts_first_mirror_sweeps_those_of_projects_deleted_elsewhere(
    db, origin, daemon, mirror_dir
):
    gone = make_git_project(origin, slug="gone", repo_path=daemon.url("app"))
    left_behind = gone.repository()
    # Deleted by another host: this one never ran the receiver.
    type(gone).objects.filter(pk=gone.pk).delete()
    project = make_git_project(origin, repo_path=f"file://{origin.path}")

    project.repository()

    assert not left_behind.exists()


def test_nothing_listens_means_unreachable(mirror_dir):
    mirror = mirror_of(f"git://127.0.0.1:{free_port()}/app", mirror_dir)

    with pytest.raises(RepoUnreachable) as caught:
        mirror.ready()

    assert "Connection refused" in caught.value.line


# --- where a credential may be read from ----------------------------------------


def test_only_a_variable_the_operator_allows_is_a_credential():
    policy = CredentialPolicy(
        allowed=("REPLAYHUB_REPO_TOKEN_*", "CI_GIT_TOKEN", "SECRET_KEY"),
        denied=(("SECRET_KEY", "one of this deployment's own secrets"),),
    )

    assert policy.problem("REPLAYHUB_REPO_TOKEN_APP") == ""
    assert policy.problem("CI_GIT_TOKEN") == ""
    assert "not a variable this deployment allows" in policy.problem("CI_GIT_TOKENS")
    assert "not a variable this deployment allows" in policy.problem("HOME")
    # Listed, and still never sent.
    assert policy.problem("SECRET_KEY") == (
        "SECRET_KEY holds one of this deployment's own secrets: it is never "
        "sent to a repository."
    )
    assert "not a variable" in CredentialPolicy().problem("REPLAYHUB_REPO_TOKEN_APP")


def test_a_refused_variable_is_never_read_nor_sent(origin, mirror_dir, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_PROVIDER_KEY", SECRET)
    with HttpGitServer(origin.path.parent, password=SECRET) as server:
        mirror = mirror_of(server.url("app"), mirror_dir, "ANTHROPIC_PROVIDER_KEY")
        with pytest.raises(RepoUnreachable) as caught:
            mirror.ready()

    assert server.requests == []
    assert "ANTHROPIC_PROVIDER_KEY is not a variable" in caught.value.line
    assert SECRET not in str(caught.value)


def test_a_project_whose_variable_is_refused_fetches_nothing_whoever_stored_it(
    db, origin, mirror_dir, monkeypatch, settings
):
    """A name stored past the checks (the admin site, a project registered
    before the allow-list) is refused when the secret would be read: neither
    the deployment's secrets nor a provider's key ever leave the host."""
    from replayhub.models import Provider

    settings.REPLAYHUB_REPO_CREDENTIAL_ENVS = ["SECRET_KEY", "ANTHROPIC_*"]
    Provider.objects.create(
        name="anthropic",
        kind="anthropic",
        base_url="https://api.example.com",
        key_env="ANTHROPIC_PROVIDER_KEY",
    )
    monkeypatch.setenv("ANTHROPIC_PROVIDER_KEY", SECRET)
    monkeypatch.setenv("SECRET_KEY", SECRET)
    with HttpGitServer(origin.path.parent, password=SECRET) as server:
        url = server.url("app")
        for slug, name in (("a", "SECRET_KEY"), ("b", "ANTHROPIC_PROVIDER_KEY")):
            project = make_git_project(
                origin, slug=slug, repo_path=url, repo_credential_env=name
            )
            with pytest.raises(RepoUnreachable) as caught:
                project.repository()
            assert caught.value.line.startswith(f"{name} holds ")

    assert server.requests == []
