"""The recorder a user downloads is one standard-library Python 3.9 file: the
package's modules joined, which runs with no module of this project beside it;
a module that would not join is refused when the file is made."""

from __future__ import annotations

import ast
import glob
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from replayhub.recorder import bundle
from tests.recorder.conftest import World


def python_3_9() -> str | None:
    """A Python 3.9 on this machine (CI runners and laptops still have it)."""
    pyenv = Path.home() / ".pyenv" / "versions"
    found = [shutil.which("python3.9"), *glob.glob(f"{pyenv}/3.9*/bin/python3.9")]
    for candidate in filter(None, found):
        done = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0 and done.stdout.strip() == "(3, 9)":
            return candidate
    return None


def test_the_download_is_standard_library_python_3_9():
    source = bundle.source()
    tree = ast.parse(source, feature_version=(3, 9))
    imported = {
        (node.module or "" if isinstance(node, ast.ImportFrom) else alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    tops = {name.split(".")[0] for name in imported}
    assert tops - {"__future__"} <= sys.stdlib_module_names
    assert source.startswith("#!/usr/bin/env python3\n")
    assert ast.get_docstring(tree).startswith("replayhub-record: run a coding agent")
    # Every module is in it, each once, in the order they import each other.
    lines = source.splitlines()
    banners = [line for line in lines if line.startswith("# --- replayhub.")]
    assert [b.split()[2] for b in banners] == [
        f"replayhub.recorder.{name}" for name in bundle.MODULES
    ]


def test_each_module_of_the_download_stays_python_3_9():
    for name in bundle.MODULES:
        path = Path(bundle.HERE, f"{name}.py")
        ast.parse(path.read_text(), feature_version=(3, 9))


@pytest.mark.skipif(python_3_9() is None, reason="no Python 3.9 on this machine")
def test_the_download_records_a_run_on_python_3_9(world: World):
    argv = [python_3_9(), "-I", str(world.recorder), "--server", world.server]
    argv += ["--project", "shop", "--prompt", "Nothing to do"]
    argv += ["--", sys.executable, str(world.agent), "noop"]
    recorded = world.call(argv)
    assert recorded.returncode == 0, recorded.stderr
    assert world.stored(recorded.run_id).record["recorder"]["write_back"] == (
        "unchanged"
    )


def copy_of_the_package(tmp_path: Path) -> Path:
    tmp_path.mkdir(exist_ok=True)
    for name in bundle.MODULES:
        shutil.copy(Path(bundle.HERE, f"{name}.py"), tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("module", "line", "refusal"),
    [
        (
            "scrub",
            "from replayhub.gateway.redact import scrub\n",
            "scrub.py imports replayhub.gateway.redact: the recorder is one "
            "standard-library file",
        ),
        ("exits", "import orjson\n", "exits.py imports orjson"),
        (
            "exits",
            "from replayhub.recorder.record import main\n",
            "exits.py imports replayhub.recorder.record, which is not a module "
            "joined before it",
        ),
        (
            "record",
            "from replayhub.recorder.scrub import MASK as HIDDEN\n",
            "record.py imports 'MASK' from scrub as it cannot be joined",
        ),
        (
            "delivery",
            "MASK = 'xxx'\n",
            "delivery.py binds 'MASK', which another module binds to something else",
        ),
        (
            "record",
            "import json as say\n",
            "record.py binds 'say', which another module binds to something else",
        ),
    ],
)
def test_a_module_that_would_not_join_is_refused(tmp_path, module, line, refusal):
    directory = copy_of_the_package(tmp_path)
    path = directory / f"{module}.py"
    text = path.read_text()
    cut = text.index("\n\n\n") + 3  # after the imports
    path.write_text(text[:cut] + line + text[cut:])
    with pytest.raises(bundle.BundleError, match=refusal.replace("(", r"\(")):
        bundle.join(directory)
    assert bundle.join(copy_of_the_package(tmp_path / "clean")) == bundle.source()
