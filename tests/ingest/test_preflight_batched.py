"""Batched preflight gives every run exactly what preflighting it on its own gives.

One repository holds every shape of history a run's provenance depends on; one
run per case (and per recorded-base variant) is preflighted both ways and the
stored outcome — state, reason, the whole provenance snapshot — compared.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from replayhub.ingest import preflight
from replayhub.ingest.preflight import preflight_pending, preflight_runs
from replayhub.models import Preflight, Run
from replayhub.replay.provenance import resolve_provenance
from tests.factories import make_git_project
from tests.gitrepos import make_repo
from tests.records import PINNED


def build_history(tmp_path):
    """A repository with every shape of history; returns it and named commits."""
    repo = make_repo(tmp_path, {"cart.py": "TOTAL = 0\n"})
    c = {"root": repo.head()}
    c["old_main"] = repo.commit({"a.py": "1\n"}, "main 1")
    c["fork"] = repo.commit({"a.py": "2\n"}, "main 2")
    # An agent branch of two commits off main.
    c["side1"] = repo.commit({"b.py": "1\n"}, "agent 1", branch="agent/side")
    c["side"] = repo.commit({"b.py": "2\n"}, "agent 2")
    # Another branch: its commits are no ancestors of the first.
    repo.checkout("main")
    c["other"] = repo.commit({"c.py": "1\n"}, "other", branch="agent/other")
    # A branch that merged main in after forking: two ways into main's history.
    repo.checkout("main")
    c["twice_fork"] = repo.head()
    repo.commit({"d.py": "1\n"}, "work", branch="agent/twice")
    repo.checkout("main")
    c["main_later"] = repo.commit({"a.py": "3\n"}, "main 3")
    repo.checkout("agent/twice")
    c["twice"] = repo.merge("main", "merge main in")
    # Merged into main with a merge commit.
    repo.checkout("main")
    c["merged"] = repo.commit({"e.py": "1\n"}, "to merge", branch="agent/merged")
    repo.checkout("main")
    repo.commit({"a.py": "4\n"}, "main 4")
    c["merge"] = repo.merge("agent/merged")
    # Fast-forwarded onto main: on its first-parent line.
    c["on_main"] = repo.commit({"f.py": "1\n"}, "straight on main")
    # An unrelated root with one child.
    repo.git("checkout", "--quiet", "--orphan", "lonely")
    c["orphan_root"] = repo.commit({"z.py": "1\n"}, "lonely root")
    c["orphan"] = repo.commit({"z.py": "2\n"}, "lonely child")
    repo.checkout("main")
    c["tip"] = repo.head()
    # An annotated tag: its own sha names a tag object, not a commit.
    repo.git("tag", "--annotate", "--message", "release", "v1", c["side"])
    c["tag"] = repo.git("rev-parse", "v1").strip()
    # A branch named like the prefix of a commit it does not point to.
    prefix = c["side"][:8]
    repo.git("branch", prefix, c["other"])
    c["tree"] = repo.tree(c["side"])
    return repo, c


ORIGINALS = [
    "side",
    "side1",
    "other",
    "twice",
    "merged",
    "on_main",
    "tip",
    "orphan",
    "orphan_root",
    "root",
    "short:side",
    "ambiguous:side",
    "tree",
    "tag",
    "short:tag",
    "missing",
    "invalid",
    None,
]
BASES = [
    None,
    "fork",
    "old_main",
    "root",
    "side1",
    "other",
    "same",
    "main_later",
    "tag",
    "missing",
    "invalid",
]


def value(commits, name, original=None):
    if name is None:
        return None
    if name == "same":
        return original
    if name == "missing":
        return "0123456789" * 4
    if name == "invalid":
        return "not-a-sha"
    kind, _, rest = name.partition(":")
    if kind == "short":
        return commits[rest][:10]
    if kind == "ambiguous":
        return commits[rest][:8]
    return commits[name]


def seed_runs(project, commits):
    number = 0
    for original in ORIGINALS:
        for base in BASES:
            number += 1
            sha = value(commits, original)
            Run.objects.create(
                project=project,
                external_id=f"run-{number}",
                original_commit=sha or "",
                base_sha=value(commits, base, sha) or "",
                sandbox_image=PINNED if number % 3 else "acme/agent:latest",
                sandbox_config_sha256="c" * 64 if number % 5 else "d" * 64,
            )


def outcomes():
    return {
        run.external_id: (run.preflight, run.preflight_reason, run.provenance)
        for run in Run.objects.order_by("pk")
    }


@pytest.mark.parametrize("default_branch", ["", "lonely", "gone"])
def test_batched_preflight_stores_what_one_run_at_a_time_stores(
    db, tmp_path, default_branch
):
    repo, commits = build_history(tmp_path)
    project = make_git_project(repo, default_branch=default_branch)
    seed_runs(project, commits)

    each = preflight_pending(project_ids=[project.pk], batched=False)
    one_by_one = outcomes()
    Run.objects.update(preflight=Preflight.PENDING, preflight_reason="", provenance={})
    batched = preflight_pending(project_ids=[project.pk])

    assert batched.to_dict() == each.to_dict()
    assert outcomes() == one_by_one
    sources = {p["base"]["source"] for _, _, p in one_by_one.values()}
    # The cases reach every base source, and both outcomes.
    if not default_branch:
        assert sources == {"recorded", "fork-point", "first-parent", "none"}
    assert {state for state, _, _ in one_by_one.values()} == {
        Preflight.READY,
        Preflight.UNREPRODUCIBLE,
    }


def test_batched_preflight_on_a_detached_head_matches_too(db, tmp_path):
    repo, commits = build_history(tmp_path)
    repo.git("checkout", "--quiet", "--detach", commits["fork"])
    project = make_git_project(repo)
    seed_runs(project, commits)

    preflight_pending(project_ids=[project.pk], batched=False)
    one_by_one = outcomes()
    Run.objects.update(preflight=Preflight.PENDING, preflight_reason="", provenance={})
    preflight_pending(project_ids=[project.pk])

    assert outcomes() == one_by_one


def test_a_stored_provenance_is_the_dataclass_whole(tmp_path):
    repo, commits = build_history(tmp_path)
    provenance = resolve_provenance(
        repo_path=repo.path,
        original_commit=commits["side"],
        recorded_base=None,
        image="acme/agent:latest",
    )

    assert provenance.to_dict() == asdict(provenance)
    assert provenance.to_dict()["warnings"] is not provenance.warnings


def test_batched_preflight_matches_across_many_chunks(db, tmp_path, monkeypatch):
    """Each chunk's git passes are made while the chunk before is resolved."""
    repo, commits = build_history(tmp_path)
    project = make_git_project(repo)
    seed_runs(project, commits)
    preflight_pending(project_ids=[project.pk], batched=False)
    one_by_one = outcomes()
    Run.objects.update(preflight=Preflight.PENDING, preflight_reason="", provenance={})
    monkeypatch.setattr(preflight, "CHUNK", 16)
    seen = []

    first = preflight_pending(
        project_ids=[project.pk], limit=100, progress=lambda *a: seen.append(a)
    )

    assert first.ready + first.unreproducible == 100
    assert seen == [(n, 100) for n in [*range(16, 100, 16), 100]]
    assert first.pending == len(one_by_one) - 100
    rest = preflight_pending(project_ids=[project.pk])
    assert rest.pending == 0
    assert outcomes() == one_by_one
    # A rerun of chosen runs refreshes them alike, chunk by chunk.
    Run.objects.update(preflight=Preflight.PENDING, preflight_reason="", provenance={})
    ids = list(Run.objects.order_by("-pk").values_list("pk", flat=True))
    preflight_runs(run_ids=ids[::2])
    preflight_runs(run_ids=ids[1::2])
    assert outcomes() == one_by_one


def test_a_tag_is_no_original_nor_base_batched_or_not(db, tmp_path):
    repo, commits = build_history(tmp_path)
    project = make_git_project(repo)
    Run.objects.create(
        project=project, external_id="tagged", original_commit=commits["tag"]
    )
    Run.objects.create(
        project=project,
        external_id="tag-base",
        original_commit=commits["side"],
        base_sha=commits["tag"],
    )

    preflight_pending(project_ids=[project.pk])

    tagged = Run.objects.get(external_id="tagged")
    assert tagged.preflight == Preflight.UNREPRODUCIBLE
    assert "not in the project repository" in tagged.preflight_reason
    based = Run.objects.get(external_id="tag-base")
    assert based.provenance["base"]["source"] == "fork-point"
    assert any("recorded base" in w for w in based.provenance["warnings"])
