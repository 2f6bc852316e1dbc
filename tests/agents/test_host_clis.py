"""The host's kept CLIs are made again when they no longer fit: another
release pinned, or the checkout moved (a Python CLI's scripts name their
venv's path)."""

from __future__ import annotations

import pytest

from replayhub import agents
from tests import hostclis


@pytest.fixture
def installs(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLAYHUB_HOST_CLIS", str(tmp_path / "kept"))
    made: list[str] = []

    def install(name, folder):
        made.append(name)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / hostclis.DONE).write_text(hostclis._marker(name, folder))

    monkeypatch.setattr(hostclis, "_install", install)
    return made


def test_a_kept_cli_is_installed_once_then_reused(installs):
    first = hostclis.host_cli("aider")
    again = hostclis.host_cli("aider")
    assert installs == ["aider"]
    assert first == again
    assert first.parent.name == "bin"


def test_a_cli_kept_at_another_path_or_release_is_made_again(installs, tmp_path):
    profile = agents.PROFILES["aider"]
    folder = tmp_path / "kept" / f"aider-{profile.version}"
    folder.mkdir(parents=True)
    marker = folder / hostclis.DONE
    # Made in a checkout that has since moved: its scripts name the old path.
    marker.write_text(f"{profile.spec()} in /srv/old-checkout/var/host-clis")
    hostclis.host_cli("aider")
    assert installs == ["aider"]
    # An earlier release's install.
    marker.write_text(f"aider-chat==0.1 in {folder.resolve()}")
    hostclis.host_cli("aider")
    assert installs == ["aider", "aider"]
