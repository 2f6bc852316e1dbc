"""The workspace and HOME where the original run had them: every runner mounts
the workspace at the spec's ``workspace_at`` (the working directory and
``$PWD``) and an empty HOME at ``home``; a path that is not a plain one
outside the system folders is refused by the spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from replayhub.sandbox.base import (
    SandboxSpec,
    SandboxUnavailable,
    place_refusal,
    zone_link,
)
from replayhub.sandbox.bwrap import BwrapRunner
from replayhub.sandbox.docker import DockerRunner
from replayhub.sandbox.gvisor import GvisorRunner
from tests.sandbox.engines import Podman

# Globs, not ls: gVisor answers ls's statx with EINVAL.
PROBE = (
    'pwd; echo "PWD=$PWD"; echo "HOME=$HOME"; (cd "$HOME" && echo * .[!.]*); '
    'cat marker.txt; touch "$HOME/written" && echo home-writable'
)
CWD = "/home/alice/src/shop"
HOME_AT = "/home/alice"


@pytest.fixture(params=["bwrap", "docker", "gvisor"])
def any_runner(request):
    if request.param == "bwrap":
        return BwrapRunner()
    if request.param == "docker":
        podman: Podman = request.getfixturevalue("podman")
        return DockerRunner(podman.image, host=podman.host)
    runner = GvisorRunner()
    try:
        runner.check()
    except SandboxUnavailable as error:
        pytest.skip(str(error))
    return runner


def test_every_runner_mounts_the_workspace_and_home_where_the_original_had_them(
    any_runner, workspace: Path
) -> None:
    (workspace / "marker.txt").write_text("the checkout\n")
    spec = SandboxSpec(
        argv=("sh", "-c", PROBE),
        workspace=workspace,
        workspace_at=CWD,
        home=HOME_AT,
    )
    outcome = any_runner.run(spec)
    assert outcome.exit_code == 0, outcome.output
    lines = outcome.output.splitlines()
    assert lines[:3] == [CWD, f"PWD={CWD}", f"HOME={HOME_AT}"]
    # HOME is empty but for the way down to the workspace.
    assert lines[3] == "src .[!.]*"
    assert lines[4:] == ["the checkout", "home-writable"]


def test_the_default_places_stay_workspace_and_the_sandbox_home(
    workspace: Path,
) -> None:
    spec = SandboxSpec(argv=("sh", "-c", 'pwd; echo "$PWD $HOME"'), workspace=workspace)
    outcome = BwrapRunner().run(spec)
    assert outcome.output.splitlines() == ["/workspace", "/workspace /home/sandbox"]


@pytest.mark.parametrize(
    "path",
    [
        "relative/path",
        "/",
        "/usr/local/src",
        "/etc",
        "/lib64/x",
        "/libexec/x",
        "/proc/self",
        "/sys/x",
        "/dev/shm/x",
        "/run/user/1000",
        "/boot/x",
        "/var/lib/x",
        "/tmp/work",
        "/home/sandbox",
        "/replayhub",
        "/replayhub-env/bin",
        "/a/../usr",
        "/a/./b",
        "/a//b",
        "/a/b/",
        "/a/\nb",
        "/a/\x1bb",
        "/" + "a" * 4096,
        None,
    ],
)
def test_a_path_that_is_not_plain_or_is_a_system_folder_is_refused(path) -> None:
    assert place_refusal(path)


@pytest.mark.parametrize(
    "path", ["/home/alice/src/shop", "/Users/bob/code", "/srv/ci/work", "/var/www/x"]
)
def test_a_plain_path_outside_the_system_folders_is_a_place(path: str) -> None:
    assert place_refusal(path) == ""


def test_a_spec_refuses_a_system_place_and_home_inside_the_workspace(
    workspace: Path,
) -> None:
    with pytest.raises(ValueError, match="workspace_at"):
        SandboxSpec(argv=("true",), workspace=workspace, workspace_at="/usr/x")
    with pytest.raises(ValueError, match="home"):
        SandboxSpec(argv=("true",), workspace=workspace, workspace_at="/w", home="/w/h")


def checked_runner(kind: str):
    """The runner of ``kind`` when this host runs it, else a skip."""
    runner = BwrapRunner() if kind == "bwrap" else GvisorRunner()
    try:
        runner.check()
    except SandboxUnavailable as error:
        pytest.skip(str(error))
    return runner


@pytest.mark.parametrize("kind", ["bwrap", "gvisor"])
def test_etc_localtime_links_to_the_specs_zone(kind: str, workspace: Path) -> None:
    runner = checked_runner(kind)
    probe = "readlink /etc/localtime; env -u TZ date +%Z"
    spec = SandboxSpec(
        argv=("sh", "-c", probe), workspace=workspace, env={"TZ": "Asia/Tokyo"}
    )
    outcome = runner.run(spec)
    assert outcome.output.splitlines() == ["/usr/share/zoneinfo/Asia/Tokyo", "JST"]


@pytest.mark.parametrize("kind", ["bwrap", "gvisor"])
def test_etc_localtime_links_to_the_specs_zone_apart_from_tz(
    kind: str, workspace: Path
) -> None:
    runner = checked_runner(kind)
    probe = 'readlink /etc/localtime; echo "$TZ"'
    spec = SandboxSpec(
        argv=("sh", "-c", probe),
        workspace=workspace,
        env={"TZ": "Asia/Tokyo"},
        zone="Europe/Paris",
    )
    outcome = runner.run(spec)
    assert outcome.output.splitlines() == [
        "/usr/share/zoneinfo/Europe/Paris",
        "Asia/Tokyo",
    ]


@pytest.mark.parametrize("kind", ["bwrap", "gvisor"])
@pytest.mark.parametrize(
    ("shell", "recorded", "login"),
    [
        ("/bin/bash", None, "/bin/bash"),
        (None, None, "/bin/sh"),
        ("/bin/sh:x:0", None, "/bin/sh"),
        (None, "/bin/bash", "/bin/bash"),
        ("/bin/sh", "/bin/bash", "/bin/bash"),
    ],
)
def test_the_login_shell_is_the_specs_shell(
    kind: str, shell: str | None, recorded: str | None, login: str, workspace: Path
) -> None:
    """Codex reads its shell from the password database, Claude Code from
    ``$SHELL``: the passwd entry names the recorded login shell, else
    ``$SHELL``'s, and ``$SHELL`` stays as the spec set it (unset included)."""
    runner = checked_runner(kind)
    env = {"SHELL": shell} if shell else {}
    spec = SandboxSpec(
        argv=("sh", "-c", 'grep "^sandbox:" /etc/passwd; echo "${SHELL-unset}"'),
        workspace=workspace,
        env=env,
        home="/home/alice",
        login_shell=recorded,
    )
    entry, variable = runner.run(spec).output.strip().splitlines()
    assert entry.split(":")[5:] == ["/home/alice", login]
    assert variable == (shell or "unset")


@pytest.mark.parametrize("tz", ["", "../../etc/shadow", "Nowhere/Atlantis", "/UTC"])
def test_a_zone_that_is_not_a_zone_file_keeps_the_hosts_localtime(tz: str) -> None:
    assert zone_link(Path("/"), tz) is None
