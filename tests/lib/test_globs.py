"""Allowed-path globs: relative to the repository root, ``**`` crosses directories."""

from __future__ import annotations

import pytest

from replayhub.lib.globs import compile_glob, glob_list_problem, glob_match

GLOB_TABLE = [
    # pattern, path, matches
    ("src/**", "src/app.py", True),
    ("src/**", "src/a/b/c.py", True),
    ("src/**", "src", False),
    ("src/**", "srcx/app.py", False),
    ("src/**", "lib/src/app.py", False),
    ("**/*.py", "app.py", True),
    ("**/*.py", "a/b/app.py", True),
    ("**/*.py", "app.pyc", False),
    ("**/*.py", "a/app.txt", False),
    ("*.py", "app.py", True),
    ("*.py", "src/app.py", False),
    ("docs/*.md", "docs/guide.md", True),
    ("docs/*.md", "docs/api/ref.md", False),
    ("docs/*.md", "docs/.hidden.md", True),
    ("docs/*", "docs/x", True),
    ("docs/*", "docs/x/y", False),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("a/**/b", "a/xb", False),
    ("a/**/b", "ab", False),
    ("**", "anything/at/all", True),
    ("**", "top", True),
    ("**/test_*.py", "tests/engine/test_x.py", True),
    ("tests/**/test_*.py", "tests/test_x.py", True),
    ("tests/**/test_*.py", "tests/engine/x_test.py", False),
    ("src/*/models.py", "src/app/models.py", True),
    ("src/*/models.py", "src/app/sub/models.py", False),
    ("file?.txt", "file1.txt", True),
    ("file?.txt", "file10.txt", False),
    ("dir?x", "dir/x", False),
    ("src*", "src/app.py", False),
    ("src*", "srcfile", True),
    ("a**b", "axxb", True),
    ("a**b", "a/b", False),
    ("[ab].py", "a.py", True),
    ("[ab].py", "c.py", False),
    ("[!ab].py", "c.py", True),
    ("[!ab].py", "a.py", False),
    ("[a-c]/x", "b/x", True),
    ("x[/]y", "x/y", False),
    ("[^a]/x", "/x", False),
    ("[.py", "[.py", True),
    ("a.b", "axb", False),
    ("a+b(c)", "a+b(c)", True),
    (r"\*.md", "*.md", True),
    (r"\*.md", "x.md", False),
    ("/src/**", "src/a.py", True),
    ("./src/**", "src/a.py", True),
    ("docs/", "docs/a/b.md", True),
    ("docs/", "docs", False),
    ("README.md", "README.md", True),
    ("README.md", "docs/README.md", False),
    ("README.md", "readme.md", False),
]


@pytest.mark.parametrize(("pattern", "path", "expected"), GLOB_TABLE)
def test_glob_match_follows_the_allowed_paths_table(pattern, path, expected):
    assert glob_match(path, pattern) is expected


@pytest.mark.parametrize("pattern", ["", "/", "[z-a].py"])
def test_malformed_globs_are_rejected(pattern):
    with pytest.raises(ValueError):
        compile_glob(pattern)


def test_a_list_names_every_bad_glob_at_once():
    said = glob_list_problem(["src/**", "../x", "/abs/**", "src/[unclosed"])

    assert "'../x' leaves the repository" in said
    assert "'/abs/**' is absolute" in said
    assert "'src/[unclosed' has a '[' that is never closed" in said
    assert not said.startswith("'src/**'")  # the good one is not named
    many = glob_list_problem([f"/p{n}" for n in range(8)])
    assert many.count("is absolute") == 5 and many.endswith("and 3 more.")
    assert glob_list_problem(["src/**", "tests/*.py"]) == ""
