"""Test paths and test-file changes (changed code that could decide a test run
is in ``test_testpaths_interference``)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from replayhub.testgate import paths
from replayhub.testgate.paths import (
    DEFAULT_TEST_PATHS,
    TestChanges,
    is_test_path,
)

# --- default test paths -------------------------------------------------------

TEST_PATH_TABLE = [
    # Python
    ("tests/test_calc.py", True),
    ("tests/__init__.py", True),
    ("tests/fixtures/orders.json", True),
    ("test/helpers.py", True),
    ("test_root.py", True),
    ("src/pkg/test_util.py", True),
    ("src/pkg/calc_test.py", True),
    ("shop/tests.py", True),
    ("shop/tests/factories.py", True),
    ("services/api/tests/test_views.py", True),
    ("src/calc.py", False),
    ("src/contest.py", False),
    ("src/latest_results.py", False),
    ("src/attest_run.py", False),
    ("testing/helpers.py", False),
    ("src/testsuite.py", False),
    ("setup.py", False),
    # Go
    ("pkg/calc/calc_test.go", True),
    ("pkg/calc/testdata/input.txt", True),
    ("pkg/calc/calc.go", False),
    ("cmd/testify/main.go", False),
    # JavaScript and TypeScript, nested packages
    ("packages/ui/src/Button.test.tsx", True),
    ("packages/ui/src/__tests__/Button.jsx", True),
    ("packages/api/src/user.spec.ts", True),
    ("packages/ui/src/__snapshots__/Button.test.tsx.snap", True),
    ("src/app.test.js", True),
    ("packages/ui/src/Button.tsx", False),
    ("packages/ui/src/testing-library.ts", False),
    ("package-lock.json", False),
    ("packages/ui/tsconfig.json", False),
    # Ruby and Java
    ("spec/models/user_spec.rb", True),
    ("gems/billing/spec/invoice_spec.rb", True),
    ("src/test/java/com/shop/CartTest.java", True),
    ("src/main/java/com/shop/Cart.java", False),
    # Runner configuration at the root
    ("conftest.py", True),
    ("pytest.ini", True),
    (".pytest.ini", True),
    ("tox.ini", True),
    ("setup.cfg", True),
    ("pyproject.toml", True),
    ("noxfile.py", True),
    ("package.json", True),
    ("jest.config.js", True),
    ("jest.setup.ts", True),
    ("vitest.config.ts", True),
    ("vitest.workspace.ts", True),
    ("vite.config.mts", True),
    (".mocharc.yml", True),
    (".mocharc.json", True),
    ("karma.conf.js", True),
    ("Makefile", True),
    ("makefile", True),
    ("GNUmakefile", True),
    ("justfile", True),
    ("Justfile", True),
    # Runner configuration nested
    ("src/pkg/conftest.py", True),
    ("services/api/pyproject.toml", True),
    ("services/api/setup.cfg", True),
    ("packages/ui/package.json", True),
    ("packages/ui/jest.config.cjs", True),
    ("packages/ui/vitest.config.mts", True),
    ("packages/ui/.mocharc.js", True),
    ("lib/makefile", True),
    ("build/rules.mk", True),
    ("docs/Makefile", True),
    # Not configuration
    ("README.md", False),
    ("requirements.txt", False),
    ("tsconfig.json", False),
    ("Dockerfile", False),
    ("src/makefile_helpers.py", False),
]


@pytest.mark.parametrize(("path", "expected"), TEST_PATH_TABLE)
def test_default_test_paths_on_realistic_layouts(path, expected):
    assert is_test_path(path, DEFAULT_TEST_PATHS) is expected


def test_every_default_pattern_matches_a_path_in_the_table():
    matched = {
        pattern
        for path, expected in TEST_PATH_TABLE
        if expected
        for pattern in DEFAULT_TEST_PATHS
        if is_test_path(path, [pattern])
    }
    assert matched == set(DEFAULT_TEST_PATHS)


def test_a_project_can_name_its_own_test_paths():
    patterns = ["checks/**", "src/**/*_check.py"]

    assert is_test_path("checks/test_calc.py", patterns)
    assert is_test_path("src/a/b/calc_check.py", patterns)
    assert not is_test_path("tests/test_calc.py", patterns)


def test_no_patterns_means_no_test_paths():
    assert not is_test_path("tests/test_calc.py", [])


def test_a_malformed_pattern_is_an_error():
    with pytest.raises(ValueError):
        is_test_path("tests/test_calc.py", [""])


# --- test changes ---------------------------------------------------------------

ORIGINAL = {
    "tests/test_calc.py": "a1",
    "tests/test_io.py": "b1",
    "tests/conftest.py": "c1",
    "src/calc.py": "d1",
}


def test_identical_test_files_are_no_change():
    changes = paths.test_changes(ORIGINAL, dict(ORIGINAL), DEFAULT_TEST_PATHS)

    assert changes == TestChanges()
    assert not changes.any
    assert changes.summary() == "no test file differs from the original's"


def test_non_test_files_are_ignored():
    replay = {**ORIGINAL, "src/calc.py": "d2", "src/new.py": "e1"}

    changes = paths.test_changes(ORIGINAL, replay, DEFAULT_TEST_PATHS)

    assert not changes.any


def test_an_added_test_file():
    replay = {**ORIGINAL, "tests/test_new.py": "f1"}

    changes = paths.test_changes(ORIGINAL, replay, DEFAULT_TEST_PATHS)

    assert changes == TestChanges(added=("tests/test_new.py",))
    assert changes.any
    assert changes.summary() == "the replay added 1 test file (tests/test_new.py)"


def test_changed_test_files():
    replay = {**ORIGINAL, "tests/test_io.py": "b2", "tests/conftest.py": "c2"}

    changes = paths.test_changes(ORIGINAL, replay, DEFAULT_TEST_PATHS)

    assert changes.changed == ("tests/conftest.py", "tests/test_io.py")
    assert changes.summary() == (
        "the replay changed 2 test files the original has "
        "(tests/conftest.py, tests/test_io.py)"
    )


def test_a_deleted_test_file():
    replay = {p: sha for p, sha in ORIGINAL.items() if p != "tests/test_calc.py"}

    changes = paths.test_changes(ORIGINAL, replay, DEFAULT_TEST_PATHS)

    assert changes == TestChanges(deleted=("tests/test_calc.py",))
    assert changes.summary() == "the replay deleted 1 test file (tests/test_calc.py)"


def test_deletions_changes_and_additions_together():
    replay = {
        "tests/test_io.py": "b2",
        "tests/conftest.py": "c2",
        "tests/test_new.py": "f1",
        "src/calc.py": "d1",
    }

    changes = paths.test_changes(ORIGINAL, replay, DEFAULT_TEST_PATHS)

    assert changes == TestChanges(
        added=("tests/test_new.py",),
        changed=("tests/conftest.py", "tests/test_io.py"),
        deleted=("tests/test_calc.py",),
    )
    assert changes.summary() == (
        "the replay deleted 1 test file, changed 2 the original has and added 1 "
        "(tests/test_calc.py, tests/conftest.py, tests/test_io.py, tests/test_new.py)"
    )


def test_the_summary_names_at_most_five_paths():
    original = {f"tests/test_{n}.py": "x" for n in range(7)}

    changes = paths.test_changes(original, {}, DEFAULT_TEST_PATHS)

    assert changes.summary() == (
        "the replay deleted 7 test files (tests/test_0.py, tests/test_1.py, "
        "tests/test_2.py, tests/test_3.py, tests/test_4.py, …)"
    )


def test_the_given_patterns_decide_what_is_compared():
    original = {"checks/a.py": "1", "tests/b.py": "2"}
    replay = {"checks/a.py": "9", "tests/b.py": "9"}

    changes = paths.test_changes(original, replay, ["checks/**"])

    assert changes == TestChanges(changed=("checks/a.py",))


def test_test_changes_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TestChanges().added = ("x",)


def test_the_module_imports_no_django():
    source = Path(paths.__file__).read_text()
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }

    assert not any(name and name.startswith("django") for name in imported)
