"""The shared environment store: an environment built and published on one
worker host is fetched by another without running setup; a damaged or hostile
archive is refused (one log line) and the host builds its own; with no store
nothing is published. Two hosts are two cache directories sharing one store,
with a real setup phase in the real sandbox."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import os
import stat
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.environments import build, store
from replayhub.environments.cache import READY, CacheEntry, EnvCache
from replayhub.environments.images import runner_for
from replayhub.git.scratch import Scratch
from replayhub.lib.fstree import remove_tree
from replayhub.models import Replay
from replayhub.sandbox import SandboxSpec
from tests.factories import make_calc_project, make_calc_run
from tests.gitrepos import Executable
from tests.scripted import original_commit

# Each build leaves a stamp of its own in its environment: a host that ran
# setup has a stamp no other host has.
SETUP = """#!/bin/sh
set -e
python3 -m venv --without-pip "$REPLAYHUB_ENV_DIR"
stamp=$(python3 -c 'import uuid; print(uuid.uuid4().hex)')
hello="$REPLAYHUB_ENV_DIR/bin/hello"
printf '#!/bin/sh\\necho "made by setup %s"\\n' "$stamp" > "$hello"
chmod +x "$hello"
"""
KEY = "ab" * 32
STORE_LOG = "replayhub.environments.store"


@dataclass
class Hosts:
    a: Path
    b: Path
    c: Path
    store: Path


@pytest.fixture
def hosts(settings):
    """Three worker hosts' caches and one store they share, under the work
    dir (the sandbox uid reaches the environments there)."""
    work = Path(settings.REPLAYHUB_WORK_DIR)
    tag = uuid.uuid4().hex[:8]
    made = Hosts(*(work / f"envs-{tag}-{h}" for h in "abc"), work / f"store-{tag}")
    settings.REPLAYHUB_ENV_STORE_DIR = str(made.store)
    yield made
    for path in (made.a, made.b, made.c, made.store):
        remove_tree(path)


@pytest.fixture
def project(calc_repo):
    calc_repo.commit({"setup.sh": Executable(SETUP)}, "setup")
    return make_calc_project(
        calc_repo, setup_command=["sh", "setup.sh"], time_limit_seconds=120
    )


def prepare_on(host: Path, project, repo) -> tuple[build.Environment, int]:
    """The project's environment as the worker host whose cache is ``host``
    prepares it, and how many times it ran setup."""
    settings.REPLAYHUB_ENV_CACHE_DIR = host
    setups: list[int] = []
    scratch = Scratch(
        Path(settings.REPLAYHUB_WORK_DIR) / f"store-{uuid.uuid4().hex}", repo.path
    )
    try:
        env = build.prepare(
            project,
            scratch=scratch,
            base=repo.rev("main"),
            runner=runner_for(project),
            on_setup=lambda: setups.append(1),
        )
    finally:
        scratch.remove()
    assert env is not None
    return env, len(setups)


def run_in(env: build.Environment, project, command: str) -> str:
    """``command``'s output in the sandbox, with the environment mounted."""
    workspace = Path(settings.REPLAYHUB_WORK_DIR) / f"ws-{uuid.uuid4().hex}"
    workspace.mkdir()
    try:
        outcome = env.wrap(runner_for(project)).run(
            SandboxSpec(argv=("sh", "-c", command), workspace=workspace)
        )
    finally:
        remove_tree(workspace)
    assert outcome.exit_code == 0, outcome.output
    return outcome.output


def stamp(env: build.Environment) -> str:
    return (env.path / "bin" / "hello").read_text()


def warnings_from_store(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == STORE_LOG and r.levelno >= logging.WARNING
    ]


# -- two hosts, one store, the real sandbox -------------------------------------


@pytest.mark.django_db
def test_a_second_host_uses_the_published_environment_without_running_setup(
    hosts, project, calc_repo, capsys
):
    built, setups = prepare_on(hosts.a, project, calc_repo)
    built.close()
    assert setups == 1 and "source" not in built.summary()
    archive = store.archive_path(hosts.store, built.key)
    manifest = json.loads(store.manifest_path(hosts.store, built.key).read_text())
    assert manifest["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert manifest["size"] == archive.stat().st_size
    assert [p.name for p in hosts.store.iterdir() if p.name.endswith(".part")] == []

    # Host B's first replay: its cache lacks the key, the store has it.
    settings.REPLAYHUB_ENV_CACHE_DIR = hosts.b
    original = original_commit(calc_repo, GOOD, branch="agent/store")
    run = make_calc_run(
        project, prompt="same", original=original, base=calc_repo.rev("main")
    )
    created = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=created.pk)
    replay = Replay.objects.get(pk=created.pk)

    evidence = replay.evidence["environment"]
    assert evidence["key"] == built.key
    assert evidence["source"] == "store" and evidence["cached"] is True
    assert evidence["fetch_seconds"] > 0
    assert evidence["setup_seconds"] == round(built.setup_seconds, 3)
    assert replay.reason_code not in {"setup_failed", "harness_error"}, replay.reason

    # What host B holds now is host A's build: its stamp, its venv, in use.
    fetched, setups = prepare_on(hosts.b, project, calc_repo)
    with fetched:
        assert setups == 0 and fetched.cached and "source" not in fetched.summary()
        assert stamp(fetched) == stamp(built)
        python = fetched.path / "bin" / "python"
        assert python.is_symlink()
        assert os.readlink(python) == os.readlink(built.path / "bin" / "python")
        output = run_in(
            fetched, project, "hello; python -c 'import sys; print(sys.prefix)'"
        )
    assert stamp(built).split()[-1].strip('"') in output
    assert "/replayhub-env" in output
    with capsys.disabled():
        print(
            f"\nenvironment {built.key[:12]}: setup {built.setup_seconds:.2f} s "
            f"on host A, fetched in {evidence['fetch_seconds']:.2f} s on host B"
        )


def flip_bytes(archive: Path, manifest: Path) -> None:
    data = bytearray(archive.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 16):
        data[i] ^= 0xFF
    archive.write_bytes(bytes(data))


def wrong_sha256(archive: Path, manifest: Path) -> None:
    document = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**document, "sha256": "0" * 64}))


def cut_short(archive: Path, manifest: Path) -> None:
    archive.write_bytes(archive.read_bytes()[:1000])


def archive_missing(archive: Path, manifest: Path) -> None:
    archive.unlink()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (flip_bytes, "sha256 differs"),
        (wrong_sha256, "sha256 differs"),
        (cut_short, "manifest says"),
        (archive_missing, "not its archive"),
    ],
)
def test_a_damaged_store_entry_is_refused_and_the_host_builds_its_own(
    hosts, project, calc_repo, caplog, damage, said
):
    built, _ = prepare_on(hosts.a, project, calc_repo)
    built.close()
    damage(
        store.archive_path(hosts.store, built.key),
        store.manifest_path(hosts.store, built.key),
    )
    caplog.clear()

    own, setups = prepare_on(hosts.b, project, calc_repo)
    own.close()

    assert setups == 1 and own.cached is False and "source" not in own.summary()
    assert stamp(own) != stamp(built)
    (line,) = warnings_from_store(caplog)
    assert built.key[:12] in line and said in line
    # Host B's build was published in its place: a third host fetches it.
    third, setups = prepare_on(hosts.c, project, calc_repo)
    third.close()
    assert setups == 0 and third.summary()["source"] == "store"
    assert stamp(third) == stamp(own)


@pytest.mark.django_db
def test_without_a_store_each_host_builds_and_nothing_is_published(
    hosts, project, calc_repo, settings
):
    settings.REPLAYHUB_ENV_STORE_DIR = ""

    first, setups_a = prepare_on(hosts.a, project, calc_repo)
    second, setups_b = prepare_on(hosts.b, project, calc_repo)
    first.close()
    second.close()

    assert (setups_a, setups_b) == (1, 1)
    assert stamp(first) != stamp(second)
    assert not hosts.store.exists()
    published = [
        name
        for _, _, files in os.walk(settings.REPLAYHUB_WORK_DIR)
        for name in files
        if first.key in name and name.endswith((store.SUFFIX, ".json", ".part"))
    ]
    assert published == []


# -- the archive itself: publish, fetch, and what extraction refuses -------------


def make_tree(env: Path) -> Path:
    (env / "bin").mkdir(parents=True)
    (env / "lib").mkdir()
    (env / "share").mkdir(mode=0o750)
    (env / "bin" / "tool").write_text("#!/bin/sh\necho tool\n")
    (env / "bin" / "tool").chmod(0o755)
    (env / "lib" / "a.txt").write_text("contents")
    os.utime(env / "lib" / "a.txt", (1_600_000_000, 1_600_000_000))
    os.link(env / "lib" / "a.txt", env / "lib" / "b.txt")
    os.symlink("/usr/bin/python3", env / "bin" / "python")
    os.symlink("../lib/a.txt", env / "bin" / "relative")
    return env


def test_a_published_tree_comes_back_whole_with_its_links(tmp_path, caplog):
    env = make_tree(tmp_path / "env")
    shared = tmp_path / "store"

    manifest = store.publish(shared, KEY, env, setup_seconds=2.5, label="calc")
    dest = tmp_path / "fetched"
    dest.mkdir()
    got = store.fetch(shared, KEY, dest, max_bytes=10**7, max_entries=100)

    assert sorted(p.name for p in shared.iterdir()) == [f"{KEY}.json", f"{KEY}.tar.gz"]
    assert got == manifest and got.setup_seconds == 2.5
    assert os.readlink(dest / "bin" / "python") == "/usr/bin/python3"
    assert os.readlink(dest / "bin" / "relative") == "../lib/a.txt"
    assert (dest / "bin" / "tool").stat().st_mode & 0o777 == 0o755
    assert (dest / "share").stat().st_mode & 0o777 == 0o750
    assert (dest / "lib" / "b.txt").read_text() == "contents"
    assert (dest / "lib" / "a.txt").stat().st_mtime == 1_600_000_000
    assert (dest / "lib" / "a.txt").stat().st_ino == (
        dest / "lib" / "b.txt"
    ).stat().st_ino
    assert warnings_from_store(caplog) == []


def test_an_environment_holding_a_fifo_is_not_published(tmp_path, caplog):
    cache = EnvCache(tmp_path / "envs", max_bytes=10**7, failure_ttl=60)
    with cache.exclusive(KEY, timeout=1):
        built = cache.new_build(KEY)
        remove_tree(built / "env")
        os.mkfifo(make_tree(built / "env") / "pipe")
        cache.commit(built, CacheEntry(KEY, READY, 0.0, 1.0))

    assert store.share_from_cache(tmp_path / "store", cache, KEY) is None

    (line,) = warnings_from_store(caplog)
    assert "not published" in line and "FIFO" in line
    assert not list((tmp_path / "store").glob(f"*{KEY}*"))


def tar_of(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    return out.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, **fields) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = fields.pop("mode", 0o644)
    for field, value in fields.items():
        setattr(info, field, value)
    return info


def hostile(outside: Path) -> dict[str, bytes]:
    secret = outside / "secret"
    return {
        "dot-dot": tar_of((entry("../x"), b"planted")),
        "dot-dot-inside": tar_of((entry("lib/../../x"), b"planted")),
        "absolute": tar_of((entry(str(outside / "x")), b"planted")),
        "char-device": tar_of(
            (entry("null", tarfile.CHRTYPE, devmajor=1, devminor=3), b"")
        ),
        "block-device": tar_of(
            (entry("sda", tarfile.BLKTYPE, devmajor=8, devminor=0), b"")
        ),
        "fifo": tar_of((entry("pipe", tarfile.FIFOTYPE), b"")),
        "setuid": tar_of((entry("su", mode=0o4755), b"#!/bin/sh\n")),
        "setgid-dir": tar_of((entry("d", tarfile.DIRTYPE, mode=0o2755), b"")),
        "hard-link-absolute": tar_of(
            (entry("x", tarfile.LNKTYPE, linkname=str(secret)), b"")
        ),
        "hard-link-climbing": tar_of(
            (entry("x", tarfile.LNKTYPE, linkname="../outside/secret"), b"")
        ),
        "hard-link-to-symlink": tar_of(
            (entry("s", tarfile.SYMTYPE, linkname=str(secret)), b""),
            (entry("x", tarfile.LNKTYPE, linkname="s"), b""),
        ),
        "through-a-symlink": tar_of(
            (entry("esc", tarfile.SYMTYPE, linkname=str(outside)), b""),
            (entry("esc/x"), b"planted"),
        ),
        "over-a-symlink": tar_of(
            (entry("esc", tarfile.SYMTYPE, linkname=str(secret)), b""),
            (entry("esc"), b"planted"),
        ),
        "too-big": tar_of((entry("big"), b"x" * 20_000)),
        "huge-header": tar_of(
            (entry("h", pax_headers={"comment": "x" * (2 << 20)}), b"")
        ),
    }


REFUSED_FOR = {
    "dot-dot": "climbs out",
    "dot-dot-inside": "climbs out",
    "absolute": "absolute path",
    "char-device": "a device",
    "block-device": "a device",
    "fifo": "a FIFO",
    "setuid": "setuid",
    "setgid-dir": "setgid",
    "hard-link-absolute": "absolute path",
    "hard-link-climbing": "climbs out",
    "hard-link-to-symlink": "not to a file extracted before it",
    "through-a-symlink": "below 'esc', a symlink",
    "over-a-symlink": "appears twice",
    "too-big": "10000 bytes",
    "huge-header": "header record",
}


def snapshot(root: Path, skip: Path) -> dict[str, bytes]:
    found = {}
    for path in sorted(root.rglob("*")):
        if skip in path.parents or path == skip or path.is_symlink():
            continue
        found[str(path)] = path.read_bytes() if path.is_file() else b"dir"
    return found


@pytest.mark.parametrize("case", sorted(REFUSED_FOR))
def test_a_hostile_archive_is_refused_without_writing_outside(tmp_path, case):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("the host's")
    dest = tmp_path / "cache" / "env"
    dest.mkdir(parents=True)
    before = snapshot(tmp_path, dest)

    with pytest.raises(store.ArchiveRefused, match=REFUSED_FOR[case]):
        store.extract(
            io.BytesIO(hostile(outside)[case]),
            dest,
            max_bytes=10_000,
            max_entries=100,
        )

    assert snapshot(tmp_path, dest) == before
    assert (outside / "secret").read_text() == "the host's"
    for path in dest.rglob("*"):
        mode = path.lstat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID)
        assert stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)


def test_more_entries_than_the_cap_are_refused(tmp_path):
    many = tar_of(*((entry(f"f{n}"), b"") for n in range(20)))
    dest = tmp_path / "env"
    dest.mkdir()

    with pytest.raises(store.ArchiveRefused, match="more than 10 entries"):
        store.extract(io.BytesIO(many), dest, max_bytes=10**6, max_entries=10)


def test_a_hostile_archive_in_the_store_is_one_log_line_and_no_environment(
    tmp_path, caplog
):
    shared = tmp_path / "store"
    shared.mkdir()
    packed = gzip.compress(tar_of((entry("ok"), b"fine"), (entry("../x"), b"out")))
    store.archive_path(shared, KEY).write_bytes(packed)
    store.manifest_path(shared, KEY).write_text(
        json.dumps(
            {
                "key": KEY,
                "sha256": hashlib.sha256(packed).hexdigest(),
                "size": len(packed),
            }
        )
    )
    dest = tmp_path / "env"
    dest.mkdir()

    got = store.fetch(shared, KEY, dest, max_bytes=10**6, max_entries=100)

    assert got is None
    assert not (tmp_path / "x").exists()
    (line,) = warnings_from_store(caplog)
    assert "refused" in line and "'../x'" in line


def test_a_key_the_store_lacks_is_no_warning(tmp_path, caplog):
    dest = tmp_path / "env"
    dest.mkdir()

    assert store.fetch(tmp_path, KEY, dest, max_bytes=10**6, max_entries=10) is None
    assert warnings_from_store(caplog) == []


@pytest.mark.parametrize(
    "text", ["[" * 30_000 + "]" * 30_000, '{"key": 1e999999}', "not json", "[]"]
)
def test_a_manifest_that_is_no_manifest_is_refused_not_a_crash(tmp_path, text):
    store.manifest_path(tmp_path, KEY).write_text(text)

    with pytest.raises(store.ArchiveRefused, match="not a manifest"):
        store.read_manifest(tmp_path, KEY)
