"""A verdict as a commit status: the state on each forge, the words, the URL."""

from __future__ import annotations

import pytest

from replayhub.outbound import statuses
from replayhub.verdicts import Verdict


@pytest.mark.parametrize(
    ("verdict", "github", "gitlab"),
    [
        ("identical", "success", "success"),
        ("equivalent", "success", "success"),
        ("divergent", "failure", "failed"),
        ("inconclusive", "error", "canceled"),
    ],
)
def test_each_verdict_has_a_state_on_each_forge_and_none_is_pending(
    verdict, github, gitlab
):
    assert statuses.state_for("github", verdict) == github
    assert statuses.state_for("gitlab", verdict) == gitlab


def test_every_verdict_is_mapped():
    for kind in ("github", "gitlab"):
        assert set(statuses.STATES[kind]) == set(Verdict)


def test_the_description_names_the_reason_and_fits_in_140_characters():
    said = statuses.description("inconclusive", "flaky_tests")
    assert said == "ReplayHub: inconclusive: flaky_tests"
    long = statuses.description("inconclusive", "x" * 300)
    assert len(long) == statuses.DESCRIPTION_CHARS
    overturned = statuses.description(
        "divergent", "same_tree", decision="overturn", before="identical"
    )
    assert overturned == "ReplayHub: divergent (a reviewer overturned identical)"


def test_the_endpoints_are_the_forges_own():
    sha = "a" * 40
    assert (
        statuses.status_url("github", "https://api.github.com/", "acme/shop", sha)
        == f"https://api.github.com/repos/acme/shop/statuses/{sha}"
    )
    assert (
        statuses.status_url("gitlab", "https://gitlab.com/api/v4", "acme/x/shop", sha)
        == f"https://gitlab.com/api/v4/projects/acme%2Fx%2Fshop/statuses/{sha}"
    )


def test_gitlab_names_the_context_name():
    body = statuses.status_body(
        "gitlab",
        state="failed",
        context="replayhub/shop",
        description="d",
        target_url="",
    )
    assert body == {"state": "failed", "description": "d", "name": "replayhub/shop"}


@pytest.mark.parametrize(
    ("kind", "repo", "ok"),
    [
        ("github", "acme/shop", True),
        ("github", "shop", False),
        ("github", "acme/shop/extra", False),
        ("gitlab", "acme/tools/shop", True),
        ("gitlab", "42", True),
        ("gitlab", "", False),
    ],
)
def test_a_repository_is_named_the_forges_way(kind, repo, ok):
    assert (statuses.repo_problem(kind, repo) == "") is ok
