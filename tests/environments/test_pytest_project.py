"""A pytest project whose dependencies are not on the host replays to a verdict.

The sandbox's own Python has no pytest. The project's setup phase makes a
virtualenv in $REPLAYHUB_ENV_DIR and installs pytest (and what it needs) from
a package index on the worker's loopback, whose wheels this test writes from
the distributions installed in the test's own environment; the test command
is ``python3 -m pytest``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import io
import subprocess
import zipfile
from pathlib import Path

import pytest

from replayhub import services
from replayhub.demo.calculator import GOOD, STUB
from replayhub.demo.pkgindex import PackageIndex, write_index
from replayhub.models import Replay
from tests.factories import make_calc_project, make_calc_run
from tests.gitrepos import Executable, make_repo
from tests.scripted import original_commit

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("env_cache")]

DISTRIBUTIONS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")
_SKIPPED_DIST_FILES = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}

SETUP = """#!/bin/sh
set -e
python3 -m venv "$REPLAYHUB_ENV_DIR"
"$REPLAYHUB_ENV_DIR/bin/pip" install --quiet --no-cache-dir \
  --disable-pip-version-check -r requirements-dev.txt
"""
TESTS = """from calc import add


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-2, -3) == -5
"""
AGENT = """#!/bin/sh
case "$(head -n 1 "$REPLAYHUB_PROMPT_FILE")" in
  other) printf 'def add(a, b):\\n    return sum((a, b))\\n' > calc.py ;;
  bad) printf 'def add(a, b):\\n    return a - b\\n' > calc.py ;;
esac
"""


def installed_wheel(name: str) -> tuple[str, bytes]:
    """A pure wheel of an installed distribution, from its files on disk."""
    dist = importlib.metadata.distribution(name)
    files: dict[str, bytes] = {}
    info_dir = ""
    for entry in dist.files or ():
        path = str(entry)
        if path.startswith("..") or "__pycache__" in path:
            continue
        top = path.split("/")[0]
        if top.endswith(".dist-info"):
            info_dir = top
            if path.split("/")[-1] in _SKIPPED_DIST_FILES:
                continue
        files[path] = Path(str(entry.locate())).read_bytes()
    record = "".join(
        f"{path},sha256="
        f"{base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()}"
        f",{len(data)}\n"
        for path, data in files.items()
    )
    files[f"{info_dir}/RECORD"] = (record + f"{info_dir}/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    stem = info_dir.removesuffix(".dist-info")
    return f"{stem}-py3-none-any.whl", buffer.getvalue()


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("pytest-index")
    write_index(root, dict(installed_wheel(name) for name in DISTRIBUTIONS))
    with PackageIndex(root) as served:
        yield served


def test_the_host_python_has_no_pytest():
    found = subprocess.run(
        ["/usr/bin/python3", "-c", "import pytest"], capture_output=True, check=False
    )
    assert found.returncode != 0


def replay(run) -> Replay:
    created = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=created.pk)
    return Replay.objects.get(pk=created.pk)


def test_a_pytest_project_reaches_a_verdict_with_its_environment(tmp_path, index):
    repo = make_repo(
        tmp_path,
        {
            "calc.py": STUB,
            "test_calc.py": TESTS,
            "agent.sh": Executable(AGENT),
            "setup.sh": Executable(SETUP),
            "requirements-dev.txt": f"--index-url {index.url}\npytest\n",
        },
    )
    base = repo.rev("main")
    original = original_commit(repo, GOOD, branch="agent/good", tests=TESTS)
    project = make_calc_project(
        repo,
        test_command=["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        setup_command=["sh", "setup.sh"],
        egress_setup=[f"127.0.0.1:{index.port}"],
        time_limit_seconds=180,
    )

    other = replay(make_calc_run(project, prompt="other", original=original, base=base))
    bad = replay(make_calc_run(project, prompt="bad", original=original, base=base))

    assert (other.verdict, other.reason_code) == ("equivalent", "tests_agree"), (
        other.reason
    )
    assert "2 passed" in other.test_outcomes.get(tree="original").output_tail
    assert (bad.verdict, bad.reason_code) == ("divergent", "replay_fails_tests")
    assert other.evidence["environment"]["cached"] is False
    assert bad.evidence["environment"]["cached"] is True
