"""The base of a session that names no branch: the commit the workspace's
HEAD most likely stood at when the session started.

Gemini CLI and OpenCode write no branch and no commit, and a Claude Code or
Codex session outside a branch names none either. A person reading such a
session takes the commit the checkout was at when it started; the repository
keeps no record of that, so it is worked out from the branches:

- each branch (local or remote-tracking), at its last commit made at or
  before the session's start (following first parents);
- the default branch's is the base, unless other branches had a commit
  newer than it by then: exactly one such commit is the base (the branch
  worked on just before the session), several are too many to choose from.

Several candidates, or no commit at all before the start, leave the run
without a base and with one note naming the candidates and how to give the
run's commits on import. Whatever is taken is recorded as inferred, never
as read. Only the repository is read, by the same git runner as
:mod:`replayhub.ingest.transcripts.repository`; the branch names reach git
as full ref names from ``for-each-ref``, after ``--end-of-options``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from replayhub.git.scratch import git
from replayhub.ingest.transcripts.repository import Lookups, branch_ref
from replayhub.ingest.transcripts.shapes import RecordDraft, iso, shown

TIMEOUT = 60.0
# The most recently committed branches looked at; a repository with more is
# read only that far.
BRANCHES = 1000
# Branches moved on since the start are walked back one git call each: at
# most this many.
WALKS = 64
# Candidates named in a note.
NAMED = 5
HOW = (
    "name the run's original with --original <sha> (its parent is taken as "
    "the base), or import the run as a native record with its base_sha"
)


@dataclass
class _Candidate:
    sha: str
    time: int
    branches: list[str]

    def said(self) -> str:
        when = iso(datetime.fromtimestamp(self.time, UTC))
        return f"{shown(', '.join(self.branches[:3]))} at {self.sha[:12]} ({when})"


def _lines(git_dir: Path, *args: str) -> list[str]:
    result = git(*args, git_dir=git_dir, timeout=TIMEOUT, check=False)
    if result.returncode != 0:
        return []
    return result.stdout.decode("utf-8", "replace").splitlines()


def _short(ref: str) -> str:
    for prefix in ("refs/heads/", "refs/remotes/"):
        if ref.startswith(prefix):
            return ref.removeprefix(prefix)
    return ref


def _default_ref(
    git_dir: Path, default_branch: str, lookups: Lookups | None
) -> str | None:
    """The project's default branch as a full ref, else the repository's
    HEAD branch."""
    if default_branch:
        return branch_ref(git_dir, default_branch, lookups)
    found = _lines(git_dir, "symbolic-ref", "--quiet", "HEAD")
    return found[0] if found and found[0].startswith("refs/") else None


def _at_start(
    git_dir: Path, start: datetime, lookups: Lookups | None
) -> tuple[dict[str, _Candidate], bool]:
    """Each branch's last commit at or before ``start``, by sha; and whether
    every branch was looked at. A branch moved on since is walked back in
    the first-parent history ``lookups`` holds for the import, else by one
    git call."""
    epoch = int(start.timestamp())
    listed = _lines(
        git_dir,
        "for-each-ref",
        "--sort=-committerdate",
        f"--count={BRANCHES}",
        "--format=%(refname) %(objectname) %(committerdate:unix)",
        "refs/heads",
        "refs/remotes",
    )
    whole = len(listed) < BRANCHES
    refs = [line.split(" ") for line in listed if line.count(" ") == 2]
    local = {ref.removeprefix("refs/heads/") for ref, _, _ in refs}
    found: dict[str, _Candidate] = {}
    walks = 0
    for ref, sha, when in refs:
        # A remote-tracking branch beside a local one of its name: the local
        # one is what a checkout stands on.
        tracked = ref.startswith("refs/remotes/") and ref.split("/", 3)[-1] in local
        if ref.endswith("/HEAD") or tracked or not when.isdigit():
            continue
        if int(when) > epoch:
            walks += 1
            if walks > WALKS:
                whole = False
                continue
            sha, when = _walked_back(git_dir, ref, epoch, lookups)
            if not when.isdigit():
                continue
        candidate = found.setdefault(sha, _Candidate(sha, int(when), []))
        candidate.branches.append(_short(ref))
    return found, whole


def _walked_back(
    git_dir: Path, ref: str, epoch: int, lookups: Lookups | None
) -> tuple[str, str]:
    """``ref``'s last first-parent commit at or before ``epoch``, and its
    time (as text), or two empty strings."""
    history = lookups.history(ref) if lookups is not None else None
    if history is not None:
        return next(((sha, str(t)) for t, sha in history if t <= epoch), ("", ""))
    back = _lines(
        git_dir,
        "log",
        "-1",
        "--first-parent",
        f"--before=@{epoch}",
        "--format=%H %ct",
        "--end-of-options",
        ref,
    )
    sha, _, when = back[0].partition(" ") if back else ("", "", "")
    return sha, when


def find_base(
    draft: RecordDraft,
    git_dir: Path,
    default_branch: str,
    lookups: Lookups | None = None,
) -> str:
    """Sets ``base_sha`` (inferred) for a session that names no branch, or
    adds the one note saying why none was taken and how to name the run's
    commits (with no base, the search for the original is not made: the note
    says all) and returns it. The generic search for a base is done with
    either way."""
    search = draft.search
    start = search.start
    search.find_base = False
    if start is None:
        search.find_original = False
        return _note(draft, f"no base commit was found: the session has no time; {HOW}")
    when = iso(start)
    found, whole = _at_start(git_dir, start, lookups)
    default = _default_ref(git_dir, default_branch, lookups)
    name = _short(default) if default else ""
    ours = next((c for c in found.values() if name and name in c.branches), None)
    newer = sorted(
        (
            c
            for c in found.values()
            if c is not ours and (ours is None or c.time > ours.time)
        ),
        key=lambda c: (-c.time, c.sha),
    )
    partly = "" if whole else " (only the most recently committed branches were read)"
    if len(newer) == 1:
        [chosen] = newer
        than = f"newer than {shown(name)}'s" if ours else "made"
        draft.infer(
            "base_sha",
            chosen.sha,
            f"the session names no branch: the last commit of "
            f"{shown(chosen.branches[0])} before it started ({when}), the one "
            f"branch with a commit {than} by then{partly}",
        )
    elif not newer and ours is not None:
        draft.infer(
            "base_sha",
            ours.sha,
            f"the session names no branch: the last commit of the default "
            f"branch {shown(name)} before it started ({when}); no other branch "
            f"had a newer commit by then{partly}",
        )
    elif not newer:
        search.find_original = False
        return _note(
            draft,
            f"no base commit was found: the session names no branch and no "
            f"branch has a commit made before it started ({when}){partly}; {HOW}",
        )
    else:
        search.find_original = False
        listed = [*newer, *([ours] if ours else [])]
        said = "; ".join(c.said() for c in listed[:NAMED])
        more = f" and {len(listed) - NAMED} more" if len(listed) > NAMED else ""
        return _note(
            draft,
            f"no base commit was found: the session names no branch and "
            f"{len(listed)} commits could have been checked out when it started "
            f"({when}): {said}{more}{partly}; {HOW}",
        )
    return ""


def _note(draft: RecordDraft, note: str) -> str:
    draft.notes.append(note)
    return note
