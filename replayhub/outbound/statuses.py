"""A verdict as a commit status on a forge: the state, the words, the request.

GitHub's statuses (and Gitea's and Forgejo's, which speak the same API) are
``error``, ``failure``, ``pending`` and ``success``; GitLab's ``pending``,
``running``, ``success``, ``failed`` and ``canceled``. A replay that ended
is never ``pending``, and an inconclusive one did not fail the agent's
change: it is ``error`` on GitHub (the check could not say) and ``canceled``
on GitLab (the nearest state that is neither a pass nor a failure), its
reason code in the description. Both keep a merge that requires the status
waiting, as a change that has not reproduced should.
"""

from __future__ import annotations

from urllib.parse import quote

from replayhub.verdicts import Verdict

GITHUB = "github"
GITLAB = "gitlab"
STATES = {
    GITHUB: {
        Verdict.IDENTICAL: "success",
        Verdict.EQUIVALENT: "success",
        Verdict.DIVERGENT: "failure",
        Verdict.INCONCLUSIVE: "error",
    },
    GITLAB: {
        Verdict.IDENTICAL: "success",
        Verdict.EQUIVALENT: "success",
        Verdict.DIVERGENT: "failed",
        Verdict.INCONCLUSIVE: "canceled",
    },
}
# GitHub's limit on a status's description; GitLab takes longer ones.
DESCRIPTION_CHARS = 140
DEFAULT_API = {GITHUB: "https://api.github.com", GITLAB: "https://gitlab.com/api/v4"}


def state_for(kind: str, verdict: str) -> str:
    return STATES[kind][Verdict(verdict)]


def description(
    verdict: str, reason_code: str, *, decision: str = "", before: str = ""
) -> str:
    """What the status says, at most 140 characters: the verdict and its
    reason code, or the settled verdict once a reviewer decided."""
    if decision == "overturn":
        text = f"{verdict} (a reviewer overturned {before})"
    elif decision == "confirm":
        text = f"{verdict}: {reason_code}, confirmed by a reviewer"
    elif decision == "undo":
        text = f"{verdict}: {reason_code} (a reviewer's decision taken back)"
    else:
        text = f"{verdict}: {reason_code}"
    return f"ReplayHub: {text}"[:DESCRIPTION_CHARS]


def status_url(kind: str, api_url: str, repo: str, sha: str) -> str:
    """The endpoint a status on ``sha`` is posted to."""
    base = api_url.rstrip("/")
    if kind == GITLAB:
        return f"{base}/projects/{quote(repo, safe='')}/statuses/{quote(sha)}"
    owner, _, name = repo.partition("/")
    return f"{base}/repos/{quote(owner)}/{quote(name)}/statuses/{quote(sha)}"


def status_body(
    kind: str, *, state: str, context: str, description: str, target_url: str
) -> dict[str, str]:
    body = {"state": state, "description": description}
    # GitLab calls the context "name" (it takes "context" as an alias).
    body["name" if kind == GITLAB else "context"] = context
    if target_url:
        body["target_url"] = target_url
    return body


def auth_headers(kind: str, token: str) -> dict[str, str]:
    if kind == GITLAB:
        return {"PRIVATE-TOKEN": token}
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
    }


def repo_problem(kind: str, repo: str) -> str:
    """Why ``repo`` cannot name a repository on the forge ("" when it can)."""
    if kind == GITHUB:
        owner, slash, name = repo.partition("/")
        if not (slash and owner and name) or "/" in name:
            return f"{repo!r} is not owner/repo."
    elif not repo.strip("/") or repo != repo.strip():
        return f"{repo!r} is not a project path or id."
    return ""
