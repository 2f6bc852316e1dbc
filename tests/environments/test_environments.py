"""A project's setup phase, in the real sandbox: a package its tests import is
installed from a local index into a virtualenv under $REPLAYHUB_ENV_DIR, built
once per key and reused."""

from __future__ import annotations

import json
import tempfile
import threading
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.demo.pkgindex import PackageIndex, pure_wheel, write_index
from replayhub.environments import build
from replayhub.environments.images import runner_for
from replayhub.git.scratch import Scratch
from replayhub.lib.fstree import remove_tree
from replayhub.models import EgressAttempt, Replay
from tests.factories import make_calc_project, make_calc_run
from tests.gitrepos import Executable
from tests.scripted import original_commit

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("env_cache")]

GREET = 'def greet(name):\n    return "hello " + name\n'
SETUP = """#!/bin/sh
set -e
# Anything but the package index is refused by the egress proxy.
python3 -c 'import urllib.request; urllib.request.urlopen("http://packages.example/")' \
  2>/dev/null || echo "packages.example refused"
python3 -m venv "$REPLAYHUB_ENV_DIR"
"$REPLAYHUB_ENV_DIR/bin/pip" install --quiet --no-cache-dir \
  --disable-pip-version-check -r requirements.txt
"""
TESTS = """import os
import unittest

import greetlib

from calc import add


class AddTests(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_the_installed_package_is_importable(self):
        self.assertEqual(greetlib.greet("x"), "hello x")

    def test_the_environment_is_read_only(self):
        env = os.environ["REPLAYHUB_ENV_DIR"]
        self.assertTrue(os.environ["PATH"].startswith(env + "/bin:"))
        with self.assertRaises(OSError):
            with open(os.path.join(env, "planted"), "w") as handle:
                handle.write("x")


if __name__ == "__main__":
    unittest.main()
"""


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("index")
    wheel = pure_wheel("greetlib", "1.0", {"greetlib/__init__.py": GREET})
    write_index(root, {"greetlib-1.0-py3-none-any.whl": wheel})
    with PackageIndex(root) as served:
        yield served


def requirements(index: PackageIndex, extra: str = "") -> str:
    return f"--index-url {index.url}\ngreetlib==1.0\n{extra}"


@pytest.fixture
def repo(calc_repo, index):
    calc_repo.commit(
        {"requirements.txt": requirements(index), "setup.sh": Executable(SETUP)},
        "dependencies",
    )
    return calc_repo


@pytest.fixture
def env_project(repo, index):
    """The calculator project, with a setup phase installing from the index."""
    return make_calc_project(
        repo,
        setup_command=["sh", "setup.sh"],
        egress_setup=[f"127.0.0.1:{index.port}"],
        time_limit_seconds=120,
    )


def replay(run) -> Replay:
    created = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=created.pk)
    return Replay.objects.get(pk=created.pk)


def replay_other(project, repo, name: str) -> Replay:
    base = repo.rev("main")
    original = original_commit(repo, GOOD, branch=f"agent/{name}", tests=TESTS)
    return replay(
        make_calc_run(
            project, prompt="other", original=original, base=base, external_id=name
        )
    )


def test_the_tests_import_what_setup_installed_and_the_next_replay_reuses_it(
    env_project, repo, index
):
    first = replay_other(env_project, repo, "one")

    assert (first.verdict, first.reason_code) == ("equivalent", "tests_agree"), (
        first.reason
    )
    built = first.evidence["environment"]
    assert built["cached"] is False and built["setup_seconds"] > 0
    setup = EgressAttempt.objects.filter(replay=first, phase="setup")
    assert {(a.host, a.port, a.allowed) for a in setup} == {
        ("packages.example", 80, False),
        ("127.0.0.1", index.port, True),
    }

    second = replay_other(env_project, repo, "two")

    assert (second.verdict, second.reason_code) == ("equivalent", "tests_agree")
    reused = second.evidence["environment"]
    assert reused == {**built, "cached": True}
    # No setup ran: it would have asked the index, through the proxy, again.
    assert not EgressAttempt.objects.filter(replay=second, phase="setup").exists()


def test_a_changed_lockfile_builds_a_new_environment(env_project, repo, index):
    first = replay_other(env_project, repo, "one")
    repo.checkout("main")
    repo.commit({"requirements.txt": requirements(index, "# pinned again\n")})

    second = replay_other(env_project, repo, "two")

    assert second.reason_code == "tests_agree"
    assert second.evidence["environment"]["cached"] is False
    assert second.evidence["environment"]["key"] != first.evidence["environment"]["key"]


def test_a_failing_setup_ends_setup_failed_and_is_not_run_for_every_replay(
    env_project, repo
):
    env_project.setup_command = [
        "sh",
        "-c",
        "echo 'no matching distribution' >&2; exit 3",
    ]
    env_project.save()

    first = replay_other(env_project, repo, "one")
    second = replay_other(env_project, repo, "two")

    assert (first.verdict, first.reason_code) == ("inconclusive", "setup_failed")
    assert "status 3" in first.reason and "no matching distribution" in first.reason
    assert first.evidence["environment"]["cached"] is False
    assert "no matching distribution" in first.evidence["environment"]["output_tail"]
    assert second.reason_code == "setup_failed"
    assert second.evidence["environment"]["cached"] is True
    assert "not run again" in second.reason
    assert second.sandbox_seconds == 0


def test_without_its_environment_the_missing_package_is_named(env_project, repo):
    env_project.setup_command = []
    env_project.save()

    result = replay_other(env_project, repo, "one")

    # Named for what is missing, not refused for its test count.
    assert (result.verdict, result.reason_code) == ("inconclusive", "tests_not_run")
    assert "the sandbox lacks the Python module greetlib" in result.reason
    assert "environment" not in result.evidence


def test_concurrent_replays_with_one_key_build_it_once(env_project, repo):
    base = repo.rev("main")
    results: list[build.Environment] = []
    errors: list[BaseException] = []

    def prepare(n: int) -> None:
        scratch = Scratch(
            Path(settings.REPLAYHUB_WORK_DIR) / f"concurrent-{uuid.uuid4().hex}",
            repo.path,
        )
        try:
            results.append(
                build.prepare(
                    env_project,
                    scratch=scratch,
                    base=base,
                    runner=runner_for(env_project),
                )
            )
        except BaseException as error:
            errors.append(error)
        finally:
            scratch.remove()

    threads = [threading.Thread(target=prepare, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    assert sorted(env.cached for env in results) == [False, True]
    assert len({env.key for env in results}) == 1
    for env in results:
        env.close()


def test_a_deep_work_directory_still_reaches_the_index(
    env_project, repo, settings, monkeypatch
):
    # A unix socket path may be 107 bytes: a replay's scratch this deep cannot
    # hold the egress proxy's socket, which then goes in a short directory of
    # its own, gone with the phase.
    deep = Path(settings.REPLAYHUB_WORK_DIR) / ("d" * 60) / ("e" * 60)
    scratch = Scratch(deep / f"replay-{uuid.uuid4().hex}", repo.path)
    made: list[Path] = []

    def mkdtemp(*args, **kwargs) -> str:
        made.append(Path(real_mkdtemp(*args, **kwargs)))
        return str(made[-1])

    real_mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    try:
        env = build.prepare(
            env_project,
            scratch=scratch,
            base=repo.rev("main"),
            runner=runner_for(env_project),
        )
    finally:
        scratch.remove()
        remove_tree(deep.parent)
    assert env is not None and not env.cached
    assert (env.path / "bin" / "python").exists()
    assert [a.allowed for a in env.attempts if a.host == "packages.example"] == [False]
    env.close()
    # One short directory held the setup phase's sockets; it went with the phase.
    assert [path.name.startswith("replayhub-net-") for path in made] == [True]
    assert not made[0].exists()


def test_env_build_builds_ahead_and_a_replay_reuses_it(env_project, repo, capsys):
    call_command("env_build", "calc")
    built = capsys.readouterr().out
    call_command("env_build", "calc")
    again = capsys.readouterr().out
    call_command("env_list", "--json")
    listed = json.loads(capsys.readouterr().out)

    assert "built: environment" in built and "cached: environment" in again
    (entry,) = listed
    assert entry["state"] == "ready" and entry["label"] == "calc"
    assert entry["size_bytes"] > 0

    base = repo.rev("main")
    original = original_commit(repo, GOOD, branch="agent/json", tests=TESTS)
    run = make_calc_run(env_project, prompt="other", original=original, base=base)
    call_command("reproduce", str(run.pk), "--sync", "--json")
    out = json.loads(capsys.readouterr().out)

    assert out["reason_code"] == "tests_agree"
    assert out["environment"] == {
        "key": entry["key"],
        "cached": True,
        "setup_seconds": round(entry["setup_seconds"], 3),
        # What the key was made of: the files whose contents decided it, the
        # repository's root commit, and who may share it.
        "inputs": ["agent.sh", "requirements.txt", "setup.sh"],
        "inputs_count": 3,
        "repository": [repo.git("rev-list", "--max-parents=0", base).strip()],
        "scope": f"project:{env_project.pk}",
    }

    call_command("env_prune", "--all")
    assert "evicted 1 environments" in capsys.readouterr().out
    call_command("env_list", "--json")
    assert json.loads(capsys.readouterr().out) == []


def test_a_record_from_another_image_is_image_mismatch_when_required(
    calc_project, calc_base, calc_good
):
    calc_project.root_image = "registry.example/py@sha256:" + "a" * 64
    calc_project.require_image_match = True
    calc_project.save()
    run = make_calc_run(
        calc_project,
        prompt="same",
        original=calc_good,
        base=calc_base,
        sandbox_image="registry.example/py@sha256:" + "b" * 64,
    )

    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "image_mismatch")
    assert "differs from the project's root image" in result.reason


def test_a_record_from_another_image_is_a_provenance_warning_by_default(
    calc_project, calc_base, calc_good
):
    calc_project.root_image = "registry.example/py@sha256:" + "a" * 64
    calc_project.save()
    run = make_calc_run(
        calc_project,
        prompt="same",
        original=calc_good,
        base=calc_base,
        sandbox_image="registry.example/py@sha256:" + "b" * 64,
    )

    result = replay(run)

    assert result.reason_code == "same_tree"
    warnings = " ".join(result.provenance["warnings"])
    assert "differs from the project's root image" in warnings
    assert "not unpacked on this worker" in warnings
