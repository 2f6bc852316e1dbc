"""A host's kept agent installs: keyed by what an install depends on and
never by the project, copied without what a package should not leave (a FIFO,
a setuid bit), and bounded in number."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from replayhub import agents
from replayhub.environments import agent_installs
from replayhub.environments.agent_setup import install_plan
from replayhub.lib.fstree import remove_tree
from replayhub.models import Project
from tests.hostclis import cache_root

AGENT_CACHE = cache_root()
REQUIRE_SANDBOX = os.environ.get("REPLAYHUB_REQUIRE_SANDBOX") == "1"

ARGV = ("sh", "-c", "script", "replayhub-install", "pkg==1.0", "pkg")


@pytest.fixture
def kept_under(settings, tmp_path):
    settings.REPLAYHUB_ENV_CACHE_DIR = tmp_path / "envs"
    settings.REPLAYHUB_AGENT_INSTALLS_DIR = ""
    return tmp_path / "envs" / "agent-installs"


def key(**changed) -> str:
    fields = {"spec": "pkg==1.0", "argv": ARGV, "cache": None, "root": "host"}
    return agent_installs.install_key(**{**fields, **changed})


def test_the_key_changes_with_the_release_the_source_the_script_and_the_root(
    tmp_path,
):
    cache = tmp_path / "pkg-1.0"
    cache.mkdir()
    (cache / ".fetched").write_text("pkg==1.0 3.11\n")
    keys = {
        key(),
        key(spec="pkg==1.1"),
        key(cache=cache),
        key(argv=(*ARGV[:2], "another script", *ARGV[3:])),
        key(root="image:sha256:" + "a" * 64),
    }
    assert len(keys) == 5
    assert key() == key()  # nothing of the project in it


def test_an_install_is_kept_and_copied_without_fifos_or_setuid_bits(
    kept_under, tmp_path
):
    made = tmp_path / "env" / "agent"
    (made / "bin").mkdir(parents=True)
    (made / "bin" / "pkg").write_text("#!/bin/sh\n")
    (made / "bin" / "pkg").chmod(0o4755)
    (made / "bin" / "python").symlink_to("/usr/bin/python3")
    os.mkfifo(made / "pipe")

    agent_installs.keep("k" * 64, made)
    copied = tmp_path / "other-env" / "agent"
    assert agent_installs.take("k" * 64, copied)

    assert (copied / "bin" / "pkg").read_text() == "#!/bin/sh\n"
    assert stat.S_IMODE((copied / "bin" / "pkg").stat().st_mode) == 0o755
    assert os.readlink(copied / "bin" / "python") == "/usr/bin/python3"
    assert not (copied / "pipe").exists()


def test_a_copied_install_keeps_its_bytecode_valid(kept_under, tmp_path):
    """The copy keeps each file's mtime, which a ``.pyc`` names: Python in the
    read-only environment loads the compiled module instead of compiling
    its source again on every start."""
    made = tmp_path / "env" / "agent"
    made.mkdir(parents=True)
    module = made / "mod.py"
    module.write_text("VALUE = 1\n")
    os.utime(module, (1_600_000_000, 1_600_000_000))  # installed long ago
    subprocess.run(
        [sys.executable, "-c", "import py_compile; py_compile.compile('mod.py')"],
        cwd=made,
        check=True,
    )
    # The source changed but kept its size and mtime: only a compile of the
    # source would see the 2, so a 1 proves the cache was used.
    times = module.stat()
    module.write_text("VALUE = 2\n")
    os.utime(module, ns=(times.st_atime_ns, times.st_mtime_ns))

    agent_installs.keep("p" * 64, made)
    copied = tmp_path / "other-env" / "agent"
    assert agent_installs.take("p" * 64, copied)

    value = subprocess.run(
        [sys.executable, "-B", "-c", "import mod; print(mod.VALUE)"],
        cwd=copied,
        capture_output=True,
        text=True,
        check=True,
    )
    assert value.stdout == "1\n"


def test_nothing_is_taken_from_an_install_left_half_kept(kept_under, tmp_path):
    (kept_under / ("h" * 64) / "tree").mkdir(parents=True)  # no marker
    destination = tmp_path / "env" / "agent"
    assert not agent_installs.take("h" * 64, destination)
    assert not destination.exists()


def test_the_least_recently_used_beyond_the_limit_are_removed(kept_under, tmp_path):
    made = tmp_path / "made"
    made.mkdir()
    (made / "cli").write_text("x")
    for n in range(agent_installs.KEEP + 2):
        agent_installs.keep(f"{n:064d}", made)
        os.utime(kept_under / f"{n:064d}", (n, n))
    left = sorted(p.name for p in Path(kept_under).iterdir())
    assert len(left) == agent_installs.KEEP
    assert f"{0:064d}" not in left and f"{1:064d}" not in left


def test_a_named_folder_is_shared_by_workers_whose_environments_are_apart(
    settings, tmp_path
):
    settings.REPLAYHUB_AGENT_INSTALLS_DIR = str(tmp_path / "shared")
    made = tmp_path / "made"
    (made / "bin").mkdir(parents=True)
    (made / "bin" / "agent").write_text("#!/bin/sh\n")
    agent_installs.keep("s" * 64, made)

    settings.REPLAYHUB_ENV_CACHE_DIR = tmp_path / "another-workers-envs"
    copied = tmp_path / "copied"
    assert agent_installs.take("s" * 64, copied)
    assert (copied / "bin" / "agent").read_text() == "#!/bin/sh\n"
    assert not (tmp_path / "another-workers-envs").exists()


def test_a_second_worker_needing_the_same_install_waits_for_the_first(kept_under):
    order = []
    first_in = threading.Event()

    def first():
        with agent_installs.one_at_a_time("w" * 64):
            first_in.set()
            time.sleep(0.3)
            order.append("first done")

    def second():
        first_in.wait()
        with agent_installs.one_at_a_time("w" * 64):
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert order == ["first done", "second in"]
    with agent_installs.one_at_a_time("x" * 64):  # another key never waits
        pass


@pytest.fixture
def reachable(settings):
    """An environment cache the sandbox's user can reach, as a worker's is."""
    root = Path(settings.REPLAYHUB_WORK_DIR) / f"installs-{uuid.uuid4().hex[:8]}"
    settings.REPLAYHUB_ENV_CACHE_DIR = root / "envs"
    settings.REPLAYHUB_AGENT_INSTALLS_DIR = ""
    yield root / "envs" / "agent-installs"
    remove_tree(root)


def test_agent_install_keeps_a_release_ahead_then_says_it_has_it(reachable, settings):
    """``manage.py agent_install``: the install a first environment would
    have made, made ahead in the sandbox and kept; asked again, nothing runs."""
    kept_under = reachable
    release = AGENT_CACHE / f"codex-{agents.PROFILES['codex'].version}"
    if not (release / ".fetched").is_file():
        if REQUIRE_SANDBOX:
            pytest.fail(f"no {release} (./dev test fetches it)")
        pytest.skip(f"needs {release} (./dev test fetches it)")
    settings.REPLAYHUB_AGENT_CACHE = str(AGENT_CACHE)
    _, key = install_plan(Project(name="calc", agent="codex"))

    out = StringIO()
    call_command("agent_install", "codex", stdout=out)
    assert out.getvalue().startswith(f"codex: kept in {kept_under} ("), out.getvalue()
    assert agent_installs.kept(key)
    assert any(path.name == "codex" for path in (kept_under / key).rglob("*"))

    again = StringIO()
    call_command("agent_install", "codex", stdout=again)
    assert again.getvalue() == f"codex: kept in {kept_under} already\n"


@pytest.mark.parametrize(
    "words, said",
    [
        ([], "name an agent (NAME or NAME@VERSION) or give --all."),
        (["nope"], "no agent profile 'nope' (known: claude-code, codex, aider,"),
        (["codex@^1.0"], "codex@^1.0: "),
    ],
)
def test_agent_install_refuses_what_names_no_release_in_one_line(
    kept_under, words, said
):
    with pytest.raises(CommandError) as refused:
        call_command("agent_install", *words)
    assert str(refused.value).startswith(said)
    assert "\n" not in str(refused.value)
    assert not kept_under.exists() or not any(kept_under.iterdir())
