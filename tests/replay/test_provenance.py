from __future__ import annotations

import itertools
import json

import pytest

from replayhub.git.history import History
from replayhub.git.scratch import git
from replayhub.replay.provenance import (
    NO_ORIGINAL,
    BaseResolution,
    choose_base,
    image_is_pinned,
    resolve_provenance,
)
from tests.gitrepos import Repo, make_repo

PINNED = "ghcr.io/acme/agent@sha256:" + "ab" * 32
ENVIRONMENT = {
    "image": PINNED,
    "recorded_config_sha256": "c" * 64,
    "project_config_sha256": "c" * 64,
    "test_command": "pytest -q",
}


def provenance(repo: Repo, original: str | None, recorded: str | None = None, **kw):
    return resolve_provenance(
        repo_path=repo.path,
        original_commit=original,
        recorded_base=recorded,
        **{**ENVIRONMENT, **kw},
    )


@pytest.fixture
def repo(tmp_path) -> Repo:
    return make_repo(tmp_path, {"app.py": "v = 0\n"})


# --- recorded base ---------------------------------------------------------------


def test_a_recorded_base_the_original_descends_from_is_trusted_and_confirmed(repo):
    base = repo.head()
    repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")
    original = repo.commit({"app.py": "v = 2\n"}, "two")

    result = provenance(repo, original, base)

    assert result.reproducible
    assert result.base == BaseResolution(
        base, "recorded", True, True, result.base.reason
    )
    assert "recorded" in result.base.reason
    assert result.warnings == []


def test_a_recorded_short_sha_is_expanded_to_the_full_commit(repo):
    base = repo.head()
    original = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")

    result = provenance(repo, original[:10], base[:7])

    assert result.original_commit == original
    assert result.base.sha == base
    assert result.base.confirmed


def test_a_recorded_base_that_is_not_an_ancestor_is_not_confirmed(repo):
    elsewhere = repo.commit({"other.py": "x\n"}, "unrelated work", branch="other")
    repo.checkout("main")
    original = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")

    result = provenance(repo, original, elsewhere)

    assert result.reproducible
    assert result.base.sha == elsewhere
    assert result.base.source == "recorded"
    assert result.base.trusted
    assert not result.base.confirmed
    assert "is not an ancestor of the original" in result.base.reason
    assert result.base.reason in result.warnings


def test_a_recorded_base_missing_from_the_repository_falls_back_with_a_warning(repo):
    base = repo.head()
    original = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")
    repo.checkout("main")

    result = provenance(repo, original, "0123456789abcdef0123456789abcdef01234567")

    assert result.base.sha == base
    assert result.base.source == "fork-point"
    assert any(
        "is not a commit in the project repository" in w for w in result.warnings
    )


# --- inferred bases ----------------------------------------------------------------


def test_a_multi_commit_write_back_on_a_branch_gets_its_fork_point(repo):
    base = repo.head()
    repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")
    original = repo.commit({"app.py": "v = 2\n"}, "two")
    repo.checkout("main")
    repo.commit({"main.txt": "moved on\n"}, "main moved on")

    result = provenance(repo, original)

    assert result.reproducible
    assert (result.base.sha, result.base.source) == (base, "fork-point")
    assert result.base.trusted and result.base.confirmed
    assert any("inferred" in w and "'main'" in w for w in result.warnings)


def test_an_already_merged_original_gets_its_fork_point_through_the_merge(repo):
    base = repo.head()
    repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")
    original = repo.commit({"app.py": "v = 2\n"}, "two")
    repo.checkout("main")
    repo.commit({"main.txt": "moved on\n"}, "main moved on")
    merge = repo.merge("agent")
    repo.commit({"main.txt": "later\n"}, "later")

    result = provenance(repo, original)

    assert (result.base.sha, result.base.source) == (base, "fork-point")
    assert result.base.confirmed
    assert merge[:12] in result.base.reason


def test_the_merge_that_brought_the_original_in_is_told_apart_from_other_merges(repo):
    # main:  B --- m1 ------- m2 ------------ C ---- D --- m3
    #         \      \                       /      /
    # agent:   a1 -- a2=original -- X ---- a3      /
    #                              (merges m1)    /
    # other:                       m2 -- o1 -----/
    base = repo.head()
    repo.commit({"app.py": "v = 1\n"}, "a1", branch="agent")
    original = repo.commit({"app.py": "v = 2\n"}, "a2")
    repo.checkout("main")
    repo.commit({"m.txt": "1\n"}, "m1")
    repo.checkout("agent")
    repo.merge("main", "merge main into agent")
    repo.commit({"app.py": "v = 3\n"}, "a3")
    repo.checkout("main")
    repo.commit({"m.txt": "2\n"}, "m2")
    repo.commit({"o.txt": "o\n"}, "o1", branch="other")
    repo.checkout("main")
    merge = repo.merge("agent")
    repo.merge("other")
    repo.commit({"m.txt": "3\n"}, "m3")

    result = provenance(repo, original)

    assert (result.base.sha, result.base.source) == (base, "fork-point")
    assert result.base.confirmed
    assert merge[:12] in result.base.reason


def test_an_original_committed_straight_onto_main_gets_an_untrusted_guess(repo):
    parent = repo.head()
    original = repo.commit({"app.py": "v = 1\n"}, "straight onto main")
    repo.commit({"app.py": "v = 2\n"}, "after")

    result = provenance(repo, original)

    assert result.reproducible
    assert result.base == BaseResolution(
        parent, "first-parent", False, False, result.base.reason
    )
    assert any("guessed" in w and "never trusted" in w for w in result.warnings)


def test_a_fast_forwarded_branch_is_only_guessed_and_the_guess_can_be_wrong(repo):
    base = repo.head()
    first = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")
    original = repo.commit({"app.py": "v = 2\n"}, "two")
    repo.checkout("main")
    repo.merge("agent", fast_forward=True)

    result = provenance(repo, original)

    assert result.base.sha == first != base
    assert result.base.source == "first-parent"
    assert not result.base.trusted


def test_a_root_commit_with_no_recorded_base_is_not_reproducible(repo):
    result = provenance(repo, repo.head())

    assert not result.reproducible
    assert result.base.source == "none"
    assert "no base could be found" in result.not_reproducible_reason


# --- the original commit -----------------------------------------------------------


@pytest.mark.parametrize("original", [None, ""])
def test_a_run_without_an_original_commit_is_not_reproducible(repo, original):
    result = provenance(repo, original)

    assert not result.reproducible
    assert result.not_reproducible_reason == NO_ORIGINAL
    assert result.base.sha is None


def test_an_original_missing_from_the_repository_is_not_reproducible(repo):
    result = provenance(repo, "89abcdef" * 5)

    assert not result.reproducible
    assert "is not in the project repository" in result.not_reproducible_reason
    assert result.original_commit is None


@pytest.mark.parametrize(
    "value",
    ["HEAD", "main", "--output=/tmp/pwned", "ABCDEF1234", "abc123", "a" * 65, "ab cd"],
)
def test_values_that_are_not_hex_shas_are_rejected(repo, value):
    original = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")
    repo.checkout("main")

    as_original = provenance(repo, value)
    as_base = provenance(repo, original, value)

    assert not as_original.reproducible
    assert "is not a hex commit sha" in as_original.not_reproducible_reason
    assert as_base.base.source == "fork-point"
    assert any("is not a hex commit sha" in w for w in as_base.warnings)


def test_a_branch_named_like_a_short_sha_does_not_stand_in_for_it(repo):
    base = repo.head()
    original = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")
    repo.checkout("main")
    repo.git("branch", "abcdef1", base)

    result = provenance(repo, original, "abcdef1")

    assert result.base.source == "fork-point"
    assert any(
        "the recorded base abcdef1 is not a commit" in w for w in result.warnings
    )


# --- environment -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        (PINNED, True),
        ("python:3.12@sha256:" + "0" * 64, True),
        ("python:3.12", False),
        ("python@sha256:abc", False),
        ("python@sha256:" + "G" * 64, False),
        ("", False),
        (None, False),
    ],
)
def test_only_an_image_with_a_sha256_digest_counts_as_pinned(image, pinned):
    assert image_is_pinned(image) is pinned


def test_a_floating_image_tag_is_a_warning(repo):
    original = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")

    floating = provenance(repo, original, image="python:3.12")
    missing = provenance(repo, original, image=None)
    pinned = provenance(repo, original)

    assert not floating.image_pinned
    assert any("floating tag" in w for w in floating.warnings)
    assert any("names no sandbox image" in w for w in missing.warnings)
    assert pinned.image_pinned
    assert not any("image" in w for w in pinned.warnings)


@pytest.mark.parametrize(
    ("recorded", "project", "drift"),
    [
        ("a" * 64, "b" * 64, True),
        ("a" * 64, "A" * 64, False),
        ("a" * 64, "a" * 64, False),
        (None, "b" * 64, False),
        ("a" * 64, None, False),
    ],
)
def test_sandbox_config_drift_warns_only_when_both_hashes_differ(
    repo, recorded, project, drift
):
    original = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")

    result = provenance(
        repo,
        original,
        recorded_config_sha256=recorded,
        project_config_sha256=project,
    )

    assert any("drifted" in w for w in result.warnings) is drift


@pytest.mark.parametrize("command", [None, "", "   "])
def test_a_missing_test_command_is_a_warning(repo, command):
    original = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")

    result = provenance(repo, original, test_command=command)

    assert any("no test command" in w for w in result.warnings)


def test_environment_warnings_are_given_even_when_the_run_cannot_be_reproduced(repo):
    result = provenance(repo, None, image="python:3", test_command=None)

    assert any("floating tag" in w for w in result.warnings)
    assert any("no test command" in w for w in result.warnings)


# --- default branch ----------------------------------------------------------------


def test_the_default_branch_is_the_repositorys_head_branch(tmp_path):
    repo = make_repo(tmp_path, branch="trunk")
    base = repo.head()
    original = repo.commit({"a.txt": "a\n"}, "one", branch="agent")
    repo.checkout("trunk")

    result = provenance(repo, original)

    assert result.default_branch == "trunk"
    assert result.base.sha == base


def test_a_default_branch_given_by_the_project_wins_over_head(repo):
    base = repo.head()
    repo.commit({"a.txt": "a\n"}, "release work", branch="release")
    release = repo.head()
    original = repo.commit({"b.txt": "b\n"}, "one", branch="agent")
    repo.checkout("release")

    from_head = provenance(repo, original)
    from_project = provenance(repo, original, default_branch="main")

    assert (from_head.default_branch, from_head.base.sha) == ("release", release)
    assert (from_project.default_branch, from_project.base.sha) == ("main", base)


def test_a_detached_head_leaves_no_default_branch_and_says_so(repo):
    original = repo.commit({"a.txt": "a\n"}, "one", branch="agent")
    repo.git("checkout", "--quiet", "--detach", "main")

    result = provenance(repo, original)

    assert result.default_branch is None
    assert result.base.source == "first-parent"
    assert any("not on a branch" in w for w in result.warnings)


def test_an_unknown_default_branch_is_a_warning(repo):
    original = repo.commit({"a.txt": "a\n"}, "one", branch="agent")

    result = provenance(repo, original, default_branch="--no-such-branch")

    assert result.base.source == "first-parent"
    assert any("does not name a commit" in w for w in result.warnings)


def test_a_bare_repository_works_too(repo, tmp_path):
    base = repo.head()
    original = repo.commit({"a.txt": "a\n"}, "one", branch="agent")
    repo.checkout("main")
    bare = tmp_path / "bare.git"
    git("clone", "--quiet", "--bare", str(repo.path), str(bare))

    result = resolve_provenance(
        repo_path=bare, original_commit=original, recorded_base=None
    )

    assert result.default_branch == "main"
    assert (result.base.sha, result.base.source) == (base, "fork-point")


def test_a_history_the_caller_keeps_open_is_used_and_left_open(repo):
    base = repo.head()
    original = repo.commit({"a.txt": "a\n"}, "one", branch="agent")
    repo.checkout("main")

    with History(repo.path) as history:
        first = provenance(repo, original, history=history)
        second = provenance(repo, original[:10], history=history)
        assert history.commit(original) == original

    assert first == second
    assert (first.base.sha, first.base.source) == (base, "fork-point")


def test_the_snapshot_is_json_serialisable(repo):
    original = repo.commit({"a.txt": "a\n"}, "one", branch="agent")
    repo.checkout("main")

    snapshot = json.loads(json.dumps(provenance(repo, original).to_dict()))

    assert snapshot["base"]["source"] == "fork-point"
    assert snapshot["original_commit"] == original
    assert snapshot["image_pinned"] is True


# --- choose_base, the pure rule ----------------------------------------------------

ORIGINAL, R, F, P, M = "0" * 40, "1" * 40, "2" * 40, "3" * 40, "4" * 40


@pytest.mark.parametrize(
    ("candidates", "ancestors", "expected"),
    [
        # candidates: recorded, fork point, first parent
        ((R, F, P), {R, F, P}, (R, "recorded", True, True)),
        ((R, F, P), {F, P}, (R, "recorded", True, False)),
        ((R, None, None), set(), (R, "recorded", True, False)),
        ((ORIGINAL, F, P), {F, P}, (ORIGINAL, "recorded", True, False)),
        ((None, F, P), {F, P}, (F, "fork-point", True, True)),
        ((None, F, P), {P}, (F, "fork-point", True, False)),
        ((None, F, None), {F}, (F, "fork-point", True, True)),
        ((None, ORIGINAL, P), {P}, (P, "first-parent", False, False)),
        ((None, None, P), {P}, (P, "first-parent", False, False)),
        ((None, None, P), set(), (P, "first-parent", False, False)),
        ((None, None, None), set(), (None, "none", False, False)),
    ],
)
def test_choose_base_rule_table(candidates, ancestors, expected):
    recorded, fork_point, first_parent = candidates

    base = choose_base(
        original=ORIGINAL,
        recorded=recorded,
        fork_point=fork_point,
        first_parent=first_parent,
        descends_from=lambda sha: sha in ancestors,
    )

    assert (base.sha, base.source, base.trusted, base.confirmed) == expected
    assert base.reason


def test_choose_base_without_an_original_has_no_base():
    base = choose_base(
        original=None, recorded=R, fork_point=F, first_parent=P, descends_from={}
    )

    assert base == BaseResolution(None, "none", False, False, base.reason)


def test_choose_base_names_the_merge_a_fork_point_was_found_through():
    base = choose_base(
        original=ORIGINAL,
        recorded=None,
        fork_point=F,
        first_parent=P,
        descends_from={F: True},
        fork_point_merge=M,
    )

    assert base.confirmed
    assert M[:12] in base.reason


@pytest.mark.parametrize(
    ("recorded", "fork_point", "first_parent", "ancestors"),
    [
        (recorded, fork_point, first_parent, set(ancestors))
        for recorded in (None, R, ORIGINAL)
        for fork_point in (None, F, ORIGINAL)
        for first_parent in (None, P)
        for size in range(4)
        for ancestors in itertools.combinations((R, F, P, ORIGINAL), size)
    ],
)
def test_choose_base_invariants_hold_for_every_combination(
    recorded, fork_point, first_parent, ancestors
):
    base = choose_base(
        original=ORIGINAL,
        recorded=recorded,
        fork_point=fork_point,
        first_parent=first_parent,
        descends_from={sha: True for sha in ancestors},
    )

    available = [
        source
        for source, sha in (
            ("recorded", recorded),
            ("fork-point", fork_point if fork_point != ORIGINAL else None),
            ("first-parent", first_parent),
        )
        if sha is not None
    ]
    assert base.source == (available[0] if available else "none")
    assert base.trusted == (base.source in {"recorded", "fork-point"})
    assert base.confirmed == (
        base.trusted and base.sha != ORIGINAL and base.sha in ancestors
    )
    assert base.reason


def test_inferred_fields_nested_past_the_bound_are_left_out_not_a_crash(repo):
    base = repo.head()
    original = repo.commit({"app.py": "v = 1\n"}, "one", branch="agent")
    deep = '{"base_sha": ' + "[" * 50_000 + "]" * 50_000 + "}"

    result = provenance(repo, original, base, inferred=deep, import_notes=deep)

    assert result.reproducible
    assert result.warnings == []
