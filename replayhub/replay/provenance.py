"""Reconstruct a replay's input state: the base commit, the image, what drifted.

The project repository is only read, through :class:`replayhub.git.history.History`
(GitPython with the same pinned environment as the git CLI wrapper). Nothing a
record says reaches git unless it is a hex sha.

The base rule (:func:`choose_base`) is a pure function; :func:`resolve_provenance`
gathers its inputs from the repository.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from replayhub.git.history import History
from replayhub.lib import boundedjson

BaseSource = Literal["recorded", "fork-point", "first-parent", "inferred", "none"]

TRUSTED_SOURCES: frozenset[str] = frozenset({"recorded", "fork-point"})

NO_ORIGINAL = (
    "the run has no original commit: it ran on the host or its write-back was lost"
)

_RECORD_SHA = re.compile(r"[0-9a-f]{7,64}")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}")


def short(sha: str | None) -> str:
    return (sha or "")[:12]


@dataclass(frozen=True)
class BaseResolution:
    """The base commit a replay starts from, and how far it can be believed.

    ``trusted`` is about the source: a recorded base or an observed fork point is,
    a first-parent guess never is. ``confirmed`` additionally needs the original
    commit to strictly descend from the base.
    """

    sha: str | None
    source: BaseSource
    trusted: bool
    confirmed: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose_base(
    *,
    original: str | None,
    recorded: str | None,
    fork_point: str | None,
    first_parent: str | None,
    descends_from: Callable[[str], bool] | Mapping[str, bool],
    fork_point_merge: str | None = None,
) -> BaseResolution:
    """Pick the base in trust order: recorded, then fork point, then first parent.

    Every argument is a full sha known to exist, or None. ``descends_from(sha)``
    answers whether the original strictly descends from ``sha`` (a mapping of
    precomputed answers works too; a missing key means no). ``fork_point_merge``
    names the merge that brought an already merged original into the default
    branch, when the fork point was found through it.
    """
    lookup = descends_from.get if isinstance(descends_from, Mapping) else descends_from

    def descends(sha: str) -> bool:
        return sha != original and bool(lookup(sha))

    if original is None:
        return BaseResolution(
            None, "none", False, False, "there is no original commit to find a base for"
        )

    if recorded is not None:
        if recorded == original:
            reason = (
                f"the recorded base {short(recorded)} is the original commit itself, "
                "so the original adds nothing on top of it"
            )
            return BaseResolution(recorded, "recorded", True, False, reason)
        if descends(recorded):
            reason = (
                f"the base {short(recorded)} is recorded in the run and the original "
                "commit descends from it"
            )
            return BaseResolution(recorded, "recorded", True, True, reason)
        reason = (
            f"the recorded base {short(recorded)} is not an ancestor of the original "
            f"commit {short(original)}: the record and the repository disagree"
        )
        return BaseResolution(recorded, "recorded", True, False, reason)

    if fork_point is not None and fork_point != original:
        if fork_point_merge is not None:
            how = (
                f"where the branch that merge {short(fork_point_merge)} brought into "
                "the default branch forked from it"
            )
        else:
            how = "where the original's branch forked from the default branch"
        if descends(fork_point):
            reason = f"the base {short(fork_point)} was inferred as the point {how}"
            return BaseResolution(fork_point, "fork-point", True, True, reason)
        reason = (
            f"the fork point {short(fork_point)} ({how}) is not an ancestor of the "
            "original commit"
        )
        return BaseResolution(fork_point, "fork-point", True, False, reason)

    if first_parent is not None:
        reason = (
            f"the base {short(first_parent)} is a guess: the original commit's first "
            "parent, right only when the write-back was a single commit"
        )
        return BaseResolution(first_parent, "first-parent", False, False, reason)

    reason = (
        "no base could be found: the run records none, the original has no fork "
        "point from the default branch, and it has no parent"
    )
    return BaseResolution(None, "none", False, False, reason)


@dataclass
class Provenance:
    """The input state reconstructed for a replay; ``to_dict`` stores as a snapshot."""

    reproducible: bool
    not_reproducible_reason: str
    original_commit: str | None
    recorded_base: str | None
    base: BaseResolution
    default_branch: str | None
    image: str | None
    image_pinned: bool
    sandbox_config_sha256: str | None
    project_config_sha256: str | None
    test_command: str | None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        # asdict(self), without its generic deep copy (preflight stores many).
        return {
            **self.__dict__,
            "base": dict(self.base.__dict__),
            "warnings": list(self.warnings),
        }


def valid_record_sha(value: object) -> bool:
    """Whether a value from a record may be used as a commit sha at all."""
    return isinstance(value, str) and _RECORD_SHA.fullmatch(value) is not None


@functools.lru_cache(maxsize=1024)
def image_is_pinned(image: str | None) -> bool:
    """Whether an image reference carries a ``@sha256:`` digest."""
    return bool(image and _DIGEST.search(image))


def resolve_provenance(
    *,
    repo_path: Path | str,
    original_commit: str | None,
    recorded_base: str | None,
    default_branch: str | None = None,
    image: str | None = None,
    recorded_config_sha256: str | None = None,
    project_config_sha256: str | None = None,
    test_command: str | None = None,
    history: History | None = None,
    inferred: str | None = None,
    import_notes: str | None = None,
    patched: bool = False,
) -> Provenance:
    """Work out the base and the provenance warnings for one run.

    A run that cannot be reproduced (no original commit, original not in the
    repository, no base at all) is answered with ``reproducible=False`` and a
    reason, not an exception. GitError is raised only when the repository itself
    cannot be read.

    ``inferred`` (JSON text: field name to how it was found) names the
    record's fields an import worked out rather than read; each is a warning,
    and when the base or the original commit is one of them the base's source
    is ``inferred``, never trusted. ``import_notes`` (JSON text: a list) are
    what that import could not find, warnings too.

    ``patched`` says the original is a patch stored with the run, applied
    at the recorded base: it is in no repository (each replay makes it), so
    only the base is looked up, and the original descends from it.

    ``history`` is an open History of ``repo_path`` the caller keeps for several
    runs (on the calling thread only: a History is not thread-safe); without
    one, a History is opened for this call and closed before it returns, so
    threads resolving runs side by side never share one.
    """
    opened = History(repo_path) if history is None else nullcontext(history)
    with opened as repo:
        provenance = _resolve(
            repo,
            original_commit=original_commit,
            recorded_base=recorded_base,
            default_branch=default_branch,
            image=image,
            recorded_config_sha256=recorded_config_sha256,
            project_config_sha256=project_config_sha256,
            test_command=test_command,
            patched=patched,
        )
    return with_inferred(provenance, inferred, import_notes)


def with_inferred(
    provenance: Provenance, inferred: str | None, import_notes: str | None
) -> Provenance:
    """``provenance`` with the record's inferred fields and import notes said
    as warnings; a base resting on an inferred base or original is
    ``inferred``, never trusted."""
    fields = _json_object(inferred)
    notes = _json_list(import_notes)
    for name, how in sorted(fields.items()):
        provenance.warnings.append(
            f"{name} was inferred by the import, not read from the transcript: {how}"
        )
    provenance.warnings.extend(f"import: {note}" for note in notes)
    base = provenance.base
    if base.sha is not None and ({"base_sha", "original_commit"} & fields.keys()):
        provenance.base = BaseResolution(
            base.sha,
            "inferred",
            False,
            base.confirmed,
            f"{base.reason}; the "
            + " and the ".join(
                f"{name} was inferred"
                for name in sorted(fields)
                if name != "started_at"
            ),
        )
    return provenance


def _json_object(text: str | None) -> dict[str, str]:
    try:
        value = boundedjson.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _json_list(text: str | None) -> list[str]:
    try:
        value = boundedjson.loads(text) if text else []
    except ValueError:
        return []
    return [str(item) for item in value] if isinstance(value, list) else []


def _resolve(
    repo: History,
    *,
    original_commit: str | None,
    recorded_base: str | None,
    default_branch: str | None,
    image: str | None,
    recorded_config_sha256: str | None,
    project_config_sha256: str | None,
    test_command: str | None,
    patched: bool = False,
) -> Provenance:
    warnings = list(
        _environment_warnings(
            image, recorded_config_sha256, project_config_sha256, test_command
        )
    )

    def result(
        *, original: str | None, base: BaseResolution, reason: str = ""
    ) -> Provenance:
        return Provenance(
            reproducible=not reason,
            not_reproducible_reason=reason,
            original_commit=original,
            recorded_base=recorded_base,
            base=base,
            default_branch=default_branch,
            image=image or None,
            image_pinned=image_is_pinned(image),
            sandbox_config_sha256=recorded_config_sha256,
            project_config_sha256=project_config_sha256,
            test_command=test_command,
            warnings=warnings,
        )

    default_branch, default_tip = _default_tip(repo, default_branch, warnings)

    if not original_commit:
        return result(original=None, base=_no_base(NO_ORIGINAL), reason=NO_ORIGINAL)
    if not valid_record_sha(original_commit):
        reason = f"the original commit {original_commit!r} is not a hex commit sha"
        return result(original=None, base=_no_base(reason), reason=reason)
    if patched:
        return _patched(repo, original_commit, recorded_base, result)
    original = repo.commit(original_commit)
    if original is None:
        reason = (
            f"the original commit {original_commit} is not in the project repository "
            "(the write-back was never pushed there, or was removed)"
        )
        return result(original=None, base=_no_base(reason), reason=reason)

    recorded = None
    if recorded_base:
        if not valid_record_sha(recorded_base):
            warnings.append(
                f"the recorded base {recorded_base!r} is not a hex commit sha; "
                "it was ignored"
            )
        elif (recorded := repo.commit(recorded_base)) is None:
            warnings.append(
                f"the recorded base {recorded_base} is not a commit in the project "
                "repository; it was ignored"
            )

    fork_point, merge = (None, None)
    if default_tip is not None:
        fork_point, merge = _fork_point(repo, default_tip, original)
    base = choose_base(
        original=original,
        recorded=recorded,
        fork_point=fork_point,
        first_parent=repo.commit(f"{original}^1"),
        descends_from=lambda sha: repo.is_ancestor(sha, original),
        fork_point_merge=merge,
    )

    if base.source == "fork-point":
        warnings.append(
            "the run records no usable base, so it was inferred from the default "
            f"branch {default_branch!r}: {base.reason}"
        )
    elif base.source == "first-parent":
        warnings.append(f"the base was guessed and is never trusted: {base.reason}")
    elif base.source == "recorded" and not base.confirmed:
        warnings.append(base.reason)
    if base.sha is None:
        return result(original=original, base=base, reason=base.reason)
    return result(original=original, base=base)


def _default_tip(
    repo: History, default_branch: str | None, warnings: list[str]
) -> tuple[str | None, str | None]:
    """The default branch (HEAD's when none is set) and its tip, each None
    when there is none; what is missing goes on ``warnings``."""
    if default_branch is None:
        default_branch = repo.head_branch()
        if default_branch is None:
            warnings.append(
                "the repository's HEAD is not on a branch, so there is no default "
                "branch to infer a fork point from"
            )
    default_tip = repo.branch_tip(default_branch) if default_branch else None
    if default_branch and default_tip is None:
        warnings.append(
            f"the default branch {default_branch!r} does not name a commit in the "
            "repository, so no fork point can be inferred"
        )
    return default_branch, default_tip


def _patched(
    repo: History,
    original_commit: str,
    recorded_base: str | None,
    result: Callable[..., Provenance],
) -> Provenance:
    """The provenance of a run whose original is its patch at the recorded
    base: the base must be in the repository, the original is made from it."""
    base = (
        repo.commit(recorded_base)
        if recorded_base and valid_record_sha(recorded_base)
        else None
    )
    if base is None:
        reason = (
            f"the base {short(recorded_base)} the run's patch applies at is not in "
            "the project repository"
        )
        return result(original=None, base=_no_base(reason), reason=reason)
    resolution = choose_base(
        original=original_commit,
        recorded=base,
        fork_point=None,
        first_parent=base,
        descends_from={base: True},
    )
    return result(original=original_commit, base=resolution)


def _no_base(reason: str) -> BaseResolution:
    return BaseResolution(None, "none", False, False, reason)


# The runs of one project share a few images and configurations: a batch of
# them works out the same warnings again and again.
@functools.lru_cache(maxsize=1024)
def _environment_warnings(
    image: str | None,
    recorded_config_sha256: str | None,
    project_config_sha256: str | None,
    test_command: str | None,
) -> tuple[str, ...]:
    warnings = []
    if not image:
        warnings.append("the record names no sandbox image")
    elif not image_is_pinned(image):
        warnings.append(
            f"the sandbox image {image!r} is a floating tag with no @sha256: digest; "
            "the replay may not run the same image"
        )
    if (
        recorded_config_sha256
        and project_config_sha256
        and recorded_config_sha256.strip().lower()
        != project_config_sha256.strip().lower()
    ):
        warnings.append(
            "the sandbox configuration drifted: the run recorded "
            f"{short(recorded_config_sha256)}, the project now has "
            f"{short(project_config_sha256)}"
        )
    if not (test_command or "").strip():
        warnings.append("the project has no test command, so no test gate can run")
    return tuple(warnings)


def _fork_point(
    repo: History, default_tip: str, original: str
) -> tuple[str | None, str | None]:
    """Where the original's line of work left the default branch.

    Returns ``(fork_point, merge)``; ``merge`` is set when the original was
    already merged and the fork point was found through the merge commit.
    ``(None, None)`` when the original sits on the default branch's
    first-parent line (committed straight onto it, or fast-forwarded), where
    no fork point exists.
    """
    merge_base = repo.merge_base(default_tip, original)
    if merge_base is None:
        return None, None
    if merge_base != original:
        return merge_base, None
    merge = _merging_commit(repo, default_tip, original)
    if merge is None:
        return None, None
    first_parent = repo.commit(f"{merge}^1")
    if first_parent is None:
        return None, None
    return repo.merge_base(first_parent, original), merge


def _merging_commit(repo: History, default_tip: str, original: str) -> str | None:
    """The commit on the default branch's first-parent line that merged it in.

    The candidates are the commits descending from the original and reachable
    from the default tip (the ancestry path). Walking first parents from the
    tip through them, the last one reached is the first point of the default
    branch's own line that contains the original. It is the merge that brought
    the original in, unless its first parent is the original itself (then the
    original is on that line). Merges elsewhere on the ancestry path, such as
    merges inside the feature branch or later merges into the default branch,
    are never picked.
    """
    if default_tip == original:
        return None
    parents = repo.ancestry_path(original, default_tip)
    if default_tip not in parents:
        return None
    current = default_tip
    while (first := parents[current][0] if parents[current] else None) in parents:
        current = first
    if first is None or first == original or len(parents[current]) < 2:
        return None
    return current
