"""Hunk classes: what kind of difference two versions of one file have."""

from __future__ import annotations

import shutil
import time

import pytest

from replayhub import services
from replayhub.demo.calculator import GOOD
from replayhub.git import blobs
from replayhub.git.hunks import (
    MAX_BYTES,
    NOISE,
    PYTHON_EQUIVALENT,
    REORDERED,
    SUBSTANTIVE,
    WHITESPACE,
    classify,
    classify_all,
    count_substantive,
)
from replayhub.git.scratch import Scratch, compare
from replayhub.models import Comparison
from replayhub.replay.capture import capture_workspace
from tests.factories import make_calc_project, make_calc_run
from tests.gitrepos import Executable, Symlink, make_repo, write_files
from tests.scripted import make_project_repo, original_commit

MODULE = b'''\
"""Prices."""

import os


class Cart:
    """A cart."""

    def total(self, items):
        """Sum of the items."""
        # Plain sum: no discounts yet.
        return sum(item.price for item in items)


def tax(amount):
    return amount * 0.2
'''


def test_noise_is_the_three_harmless_classes():
    assert {WHITESPACE, REORDERED, PYTHON_EQUIVALENT} == NOISE
    assert SUBSTANTIVE not in NOISE


# --- whitespace -----------------------------------------------------------------


def test_trailing_spaces_and_blank_lines_are_whitespace():
    old = b"alpha\nbeta\n"
    new = b"alpha   \n\n\nbeta\t\n\n"

    assert classify("notes.txt", old, new) == WHITESPACE


def test_crlf_against_lf_is_whitespace():
    old = b"first line\nsecond line\n"
    new = b"first line\r\nsecond line\r\n"

    assert classify("notes.txt", old, new) == WHITESPACE
    assert classify("app.py", MODULE, MODULE.replace(b"\n", b"\r\n")) == WHITESPACE


def test_runs_of_whitespace_inside_a_line_are_collapsed_but_not_removed():
    assert classify("a.js", b"let x  =\t1;\n", b"let x = 1;\n") == WHITESPACE
    assert classify("a.js", b"let x = 1;\n", b"letx = 1;\n") == SUBSTANTIVE


def test_reindenting_plain_text_is_whitespace():
    old = b"<ul>\n<li>one</li>\n</ul>\n"
    new = b"<ul>\n    <li>one</li>\n</ul>\n"

    assert classify("page.html", old, new) == WHITESPACE


def test_indentation_in_yaml_and_makefiles_is_not_whitespace():
    old = b"jobs:\n  test:\n    runs-on: linux\n"
    new = b"jobs:\n  test:\nruns-on: linux\n"

    assert classify("ci.yml", old, new) == SUBSTANTIVE
    assert classify("ci.yml", old, old.replace(b": linux", b":   linux ")) == WHITESPACE
    assert classify("Makefile", b"all:\n\tcc x.c\n", b"all:\ncc x.c\n") == SUBSTANTIVE


def test_python_blank_lines_and_reindenting_that_keep_the_tree_are_whitespace():
    reindented = MODULE.replace(b"    ", b"  ").replace(b"\n\n\n", b"\n\n")

    assert classify("shop/cart.py", MODULE, reindented) == WHITESPACE


def test_an_indentation_change_that_changes_python_is_substantive():
    old = b"for item in items:\n    log(item)\n    save(item)\n"
    new = b"for item in items:\n    log(item)\nsave(item)\n"

    assert classify("jobs.py", old, new) == SUBSTANTIVE


def test_whitespace_inside_a_python_string_is_substantive():
    old = b'GREETING = "hello  world"\n'
    new = b'GREETING = "hello world"\n'

    assert classify("greet.py", old, new) == SUBSTANTIVE


# --- python_equivalent --------------------------------------------------------------


def test_python_that_differs_only_in_comments_is_equivalent():
    new = MODULE.replace(b"# Plain sum: no discounts yet.", b"# TODO: discounts")
    new = new.replace(b"import os\n", b"import os  # for later\n")

    assert classify("shop/cart.py", MODULE, new) == PYTHON_EQUIVALENT


def test_python_that_differs_only_in_docstrings_is_equivalent():
    new = MODULE.replace(b'"""Sum of the items."""', b'"""The total price."""')
    new = new.replace(b'"""Prices."""', b'"""Prices, and\n\nhow to compute them."""')
    new = new.replace(b'    """A cart."""\n', b"")

    assert classify("shop/cart.py", MODULE, new) == PYTHON_EQUIVALENT


def test_a_string_that_is_not_a_docstring_still_counts():
    new = MODULE.replace(b"return amount * 0.2", b'return amount * 0.2\n    "rate"')

    assert classify("shop/cart.py", MODULE, new) == SUBSTANTIVE


def test_python_rewrapped_across_lines_is_equivalent():
    old = b"total = compute(alpha, beta, gamma)\n"
    new = b"total = compute(\n    alpha,\n    beta,\n    gamma\n)\n"

    assert classify("calc.py", old, new) == PYTHON_EQUIVALENT


def test_whitespace_wins_over_an_equal_syntax_tree():
    assert classify("calc.py", b"x = 1\n", b"x = 1   \n\n") == WHITESPACE


def test_stub_files_are_python_too():
    assert classify(
        "api.pyi", b"def f() -> int: ...\n", b"def f(\n) -> int: ...\n"
    ) == (PYTHON_EQUIVALENT)


# --- reordered ---------------------------------------------------------------------


def test_the_same_lines_in_another_order_are_reordered():
    old = b"requests==2.31\nflask==3.0\n\ndjango==5.2\n"
    new = b"django==5.2\nflask==3.0\n  requests==2.31\n"

    assert classify("requirements.txt", old, new) == REORDERED


def test_reordered_lines_need_the_same_count_of_each_line():
    old = b"a\na\nb\n"
    new = b"b\na\nb\n"

    assert classify("list.txt", old, new) == SUBSTANTIVE


def test_python_imports_in_another_order_are_reordered():
    old = b"import os\nimport sys\n\nprint(os, sys)\n"
    new = b"import sys\nimport os\n\nprint(os, sys)\n"

    assert classify("main.py", old, new) == REORDERED


def test_python_lines_moved_between_blocks_are_not_reordered():
    old = b"if ready:\n    go()\nstop()\n"
    new = b"if ready:\n    stop()\ngo()\n"

    assert classify("main.py", old, new) == SUBSTANTIVE


# --- substantive --------------------------------------------------------------------


def test_a_real_change_is_substantive():
    new = MODULE.replace(b"0.2", b"0.25")

    assert classify("shop/cart.py", MODULE, new) == SUBSTANTIVE
    assert classify("README.md", b"Use it.\n", b"Do not use it.\n") == SUBSTANTIVE


def test_a_file_on_one_side_only_is_substantive():
    assert classify("new.txt", None, b"") == SUBSTANTIVE
    assert classify("gone.txt", b"", None) == SUBSTANTIVE
    assert classify("gone.py", MODULE, None) == SUBSTANTIVE


def test_binary_content_is_substantive():
    assert classify("logo.png", b"\x89PNG\0\1", b"\x89PNG\0\1 ") == SUBSTANTIVE
    assert classify("data.txt", b"a\n", b"a\0\n") == SUBSTANTIVE


def test_text_that_is_not_utf8_is_substantive():
    assert classify("latin.txt", b"caf\xe9\n", b"caf\xe9 \n") == SUBSTANTIVE


def test_python_that_does_not_parse_is_substantive_even_for_whitespace():
    broken = b"def f(:\n    return 1\n"

    assert classify("broken.py", broken, broken + b"\n\n") == SUBSTANTIVE
    assert classify("broken.py", b"x = 1\n", b"x = (1\n") == SUBSTANTIVE


def test_a_side_over_the_cap_is_substantive_without_being_compared():
    big = b"x\n" * (MAX_BYTES // 2 + 1)

    assert len(big) > MAX_BYTES
    assert classify("big.txt", big, big + b"\n") == SUBSTANTIVE
    assert classify("big.txt", b"x\n", big) == SUBSTANTIVE


def test_python_nested_past_what_can_be_compared_is_substantive():
    deep = b"x = " + b"-" * 100_000 + b"1\n"
    chain = b"x = 1" + b" + 1" * 5000 + b"\n"

    assert classify("deep.py", deep, deep + b"\n") == SUBSTANTIVE
    assert classify("chain.py", chain, chain + b"\n") == SUBSTANTIVE


def test_a_file_at_the_cap_is_classified_in_bounded_time():
    line = b"value_%d = compute(%d, 'text')  # note\n"
    body = b"".join(line % (n, n) for n in range(30_000))[: MAX_BYTES - 100]
    body = body[: body.rfind(b"\n") + 1]
    old, new = body, body.replace(b"# note", b"# NOTE")

    started = time.monotonic()
    found = classify("generated.py", old, new)

    assert len(new) <= MAX_BYTES
    assert found == PYTHON_EQUIVALENT
    assert time.monotonic() - started < 30


# --- classify_all -------------------------------------------------------------------


def test_classify_all_sorts_and_caps_the_files_it_reads():
    files = [
        ("b.txt", b"b\n", b"b \n"),
        ("a.txt", b"a\n", b"A\n"),
        ("c.txt", b"c\n", b"c\n\n"),
    ]

    assert classify_all(files) == {
        "a.txt": SUBSTANTIVE,
        "b.txt": WHITESPACE,
        "c.txt": WHITESPACE,
    }
    assert classify_all(files, limit=1) == {
        "a.txt": SUBSTANTIVE,
        "b.txt": WHITESPACE,
        "c.txt": SUBSTANTIVE,
    }
    assert list(classify_all(files)) == ["a.txt", "b.txt", "c.txt"]


def test_a_path_given_twice_keeps_a_class_only_when_both_agree():
    same = [("x.txt", b"x\n", b"x \n"), ("x.txt", b"y\n", b"y \n")]
    differ = [("x.txt", b"x\n", b"x \n"), ("x.txt", b"y\n", b"z\n")]

    assert classify_all(same) == {"x.txt": WHITESPACE}
    assert classify_all(differ) == {"x.txt": SUBSTANTIVE}


@pytest.mark.parametrize(
    ("classes", "count"),
    [
        ({}, 0),
        ({"a": WHITESPACE, "b": REORDERED, "c": PYTHON_EQUIVALENT}, 0),
        ({"a": SUBSTANTIVE, "b": WHITESPACE, "c": SUBSTANTIVE}, 2),
    ],
)
def test_count_substantive(classes, count):
    assert count_substantive(classes) == count


# --- compare: the classes of real trees ----------------------------------------------

ORIGINAL_FILES = {
    "notes.txt": "alpha\nbeta\n",
    "requirements.txt": "django==5.2\nflask==3.0\nrequests==2.31\n",
    "src/cart.py": MODULE,
    "src/calc.py": "def add(a, b):\n    return a + b\n",
    "src/jobs.py": "for job in jobs:\n    log(job)\n    run(job)\n",
    "src/broken.py": "def f(:\n",
    "logo.png": b"\x89PNG\0\1",
    "only_original.txt": "kept by the original\n",
    "run.sh": "#!/bin/sh\necho run\n",
    "link": Symlink("notes.txt"),
}
REPLAY_FILES = {
    "notes.txt": "alpha  \r\nbeta\r\n\r\n",
    "requirements.txt": "requests==2.31\ndjango==5.2\nflask==3.0\n",
    "src/cart.py": MODULE.replace(b"# Plain sum", b"# Simple sum").replace(
        b'"""A cart."""', b'"""A shopping cart."""'
    ),
    "src/calc.py": "def add(a, b):\n    return a - b\n",
    "src/jobs.py": "for job in jobs:\n    log(job)\nrun(job)\n",
    "src/broken.py": "def f(:\n\n",
    "logo.png": b"\x89PNG\0\2",
    "only_original.txt": None,
    "only_replay.txt": "added by the replay\n",
    "run.sh": Executable("#!/bin/sh\necho run\n"),
    "link": Symlink("notes.txt "),
}
EXPECTED = {
    "link": SUBSTANTIVE,
    "logo.png": SUBSTANTIVE,
    "notes.txt": WHITESPACE,
    "only_original.txt": SUBSTANTIVE,
    "only_replay.txt": SUBSTANTIVE,
    "requirements.txt": REORDERED,
    "run.sh": SUBSTANTIVE,
    "src/broken.py": SUBSTANTIVE,
    "src/calc.py": SUBSTANTIVE,
    "src/cart.py": PYTHON_EQUIVALENT,
    "src/jobs.py": SUBSTANTIVE,
}


@pytest.fixture
def trees(tmp_path):
    """A scratch dir, the original commit and the replay's captured tree."""
    project = make_repo(tmp_path, {"README.md": "readme\n"})
    base = project.head()
    original = project.commit(ORIGINAL_FILES, "original", branch="agent")
    scratch = Scratch(tmp_path / "replay", project.path)
    workspace = scratch.provision(base)
    write_files(workspace, {**ORIGINAL_FILES, **REPLAY_FILES})
    tree = capture_workspace(scratch, workspace).tree
    yield scratch, base, original, tree
    scratch.remove()


def test_compare_names_the_class_of_every_differing_path(trees):
    scratch, base, original, tree = trees

    comparison = compare(scratch, base=base, original_commit=original, replay_tree=tree)

    assert comparison.hunk_classes == EXPECTED
    assert list(comparison.hunk_classes) == sorted(EXPECTED)
    assert sorted(comparison.hunk_classes) == comparison.differing_paths
    assert comparison.substantive_files == 8
    assert comparison.to_dict()["hunk_classes"] == EXPECTED


def test_identical_trees_have_no_classes(trees):
    scratch, base, original, _tree = trees

    comparison = compare(
        scratch, base=base, original_commit=original, replay_tree=original
    )

    assert comparison.identical
    assert comparison.hunk_classes == {}
    assert comparison.substantive_files == 0


def test_files_past_the_read_bounds_are_substantive_unread(trees):
    scratch, _base, original, tree = trees
    original_tree = scratch.resolve_tree(original)

    def classes(**bounds):
        return blobs.hunk_classes(scratch, original_tree, tree, **bounds)

    # Sorted by path, notes.txt is the first file that can be read.
    assert classes(limit=3)["notes.txt"] == WHITESPACE
    assert classes(limit=2)["notes.txt"] == SUBSTANTIVE
    # Each side of notes.txt is under 20 bytes; cart.py's are over 300.
    small = classes(blob_cap=100)
    assert small["notes.txt"] == WHITESPACE
    assert small["src/cart.py"] == SUBSTANTIVE
    assert small["requirements.txt"] == REORDERED
    # One budget for all files, spent in path order: enough for cart.py alone
    # is not enough once the files before it were read.
    cart = len(ORIGINAL_FILES["src/cart.py"]) + len(REPLAY_FILES["src/cart.py"])
    assert classes(budget=cart + 1000)["src/cart.py"] == PYTHON_EQUIVALENT
    assert classes(budget=cart)["src/cart.py"] == SUBSTANTIVE
    assert classes(budget=cart)["notes.txt"] == WHITESPACE
    assert set(classes(limit=0).values()) == {SUBSTANTIVE}


def test_blobs_are_read_from_the_scratch_git_dir_not_the_workspace(trees):
    scratch, base, original, tree = trees
    # Whatever the workspace holds now, the captured tree is what is classified.
    write_files(scratch.workspace, {"notes.txt": "something else entirely\n"})
    shutil.rmtree(scratch.workspace / ".git")

    comparison = compare(scratch, base=base, original_commit=original, replay_tree=tree)

    assert comparison.hunk_classes["notes.txt"] == WHITESPACE


@pytest.mark.django_db
def test_a_finished_replay_stores_the_classes_and_the_substantive_count(tmp_path):
    repo = make_project_repo(tmp_path)
    base = repo.rev("main")
    good = original_commit(repo, GOOD, branch="agent/good")
    run = make_calc_run(
        make_calc_project(repo), prompt="other", original=good, base=base
    )
    replay = services.replay_create(run=run, trigger="command")

    services.replay_execute(replay_id=replay.pk)

    stored = Comparison.objects.get(replay=replay)
    assert stored.hunk_classes == {"calc.py": SUBSTANTIVE}
    assert stored.substantive_files == 1
