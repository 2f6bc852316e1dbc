"""Host-owned scratch repositories: provision a workspace, capture it, compare.

The rule this module exists to keep: **the host never runs git inside a directory an
agent could write.** An agent controls everything in its workspace, including
``.git/config`` (``core.fsmonitor``, ``core.hooksPath``, ``filter.*``,
``diff.external``), ``.git/hooks/`` and ``.gitattributes``; any of these would run a
command on the host the moment host git consulted that repository. So the host:

* runs every git command through :func:`git`, which pins the environment (no system
  or global config, no replace refs) and overrides the dangerous settings on the
  command line, where they outrank any repository config;
* reads the workspace only as a work tree of a ReplayHub-owned git dir
  (``<root>/scratch.git``) with a private index file, so the workspace's ``.git`` is
  never opened as a repository;
* diffs trees inside that bare git dir, where no work tree and no attributes exist.

Layout of one replay under ``root`` (a directory ReplayHub owns)::

    scratch.git/        bare; objects borrowed read-only from the project (alternates)
    workspace/          the agent's checkout at the base commit
    capture/            index and new objects of ``capture.capture_workspace``
    checkout-*.index    private indexes used by :meth:`Scratch.checkout_tree`
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from replayhub.git import blobs, hunks, process
from replayhub.lib.fstree import remove_tree
from replayhub.lib.globs import glob_match

DEFAULT_TIMEOUT = 120.0
# Plumbing output (rev-list, name lists) is parsed whole, so exceeding this is an
# error rather than a silent cut.
DEFAULT_OUTPUT_CAP = 64 * 1024 * 1024
DIFF_CAP = 1024 * 1024
STDERR_TAIL = 4096

# Command-line configuration outranks every config file, so these hold even against
# a repository config that sets the opposite.
SAFE_CONFIG: tuple[str, ...] = (
    # No hook of any repository runs (post-index-change fires on `add`/`read-tree`).
    "core.hooksPath=/dev/null",
    # A configured fsmonitor is a command run on every index refresh.
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    # An empty command fails closed should an external diff ever be allowed;
    # diffs also pass --no-ext-diff.
    "diff.external=",
    # Attributes and ignore rules come from the tree being read, never from files
    # of whoever runs the worker.
    "core.attributesFile=/dev/null",
    "core.autocrlf=false",
    "core.excludesFile=/dev/null",
    # Local clones and fetches between ReplayHub's own repositories.
    "protocol.file.allow=always",
    # Never leave a detached background gc or maintenance process behind.
    "gc.auto=0",
    "maintenance.auto=false",
    "user.name=ReplayHub",
    "user.email=replayhub@localhost",
)

_SHA = re.compile(r"[0-9a-f]{4,64}")

# Written to ``info/attributes`` of every git dir ReplayHub runs git in, where it
# outranks each ``.gitattributes`` of a tree or a work tree: files move between
# trees and directories as their bytes, never converted. A conversion an agent
# chose (``working-tree-encoding`` on a file it cannot encode) would otherwise
# decide what is stored, or fail the capture.
NO_CONVERSION = "* -text -crlf -eol -ident -filter -working-tree-encoding\n"


class GitError(Exception):
    """A git command failed, timed out or produced more output than allowed."""

    def __init__(
        self,
        message: str,
        *,
        argv: Sequence[str] = (),
        returncode: int | None = None,
        stderr: str = "",
    ) -> None:
        super().__init__(message)
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr


class GitStopped(GitError):
    """A git command stopped by its ``watch``; the message is the watch's."""


class GitResult(subprocess.CompletedProcess):
    """A finished git command; ``truncated`` is set when stdout was cut at the cap."""

    truncated: bool = False


def git_environment() -> dict[str, str]:
    """The whole environment git runs with: nothing else of the worker leaks in."""
    return {
        "PATH": os.environ.get("PATH") or os.defpath,
        "LANG": "C",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        # Replace refs would let `rev-parse <commit>^{tree}` answer with another
        # object; identity is decided on real hashes.
        "GIT_NO_REPLACE_OBJECTS": "1",
    }


class GitOptions(TypedDict, total=False):
    """Keyword arguments of :func:`git`, for callers that pass the same ones often."""

    git_dir: Path | str | None
    work_tree: Path | str | None
    index_file: Path | str | None
    cwd: Path | str | None
    timeout: float
    input: bytes | None
    output_cap: int
    truncate: bool
    check: bool
    user: tuple[int, int] | None
    env: dict[str, str] | None
    tethered: bool
    watch: Callable[[], str] | None


def git(
    *args: str,
    git_dir: Path | str | None = None,
    work_tree: Path | str | None = None,
    index_file: Path | str | None = None,
    cwd: Path | str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    input: bytes | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    truncate: bool = False,
    check: bool = True,
    user: tuple[int, int] | None = None,
    env: dict[str, str] | None = None,
    tethered: bool = False,
    watch: Callable[[], str] | None = None,
) -> GitResult:
    """Run one git command with the pinned environment and configuration.

    stdout and stderr are bytes. stdout beyond ``output_cap`` raises
    :class:`GitError`, or with ``truncate=True`` is cut (``result.truncated``) and
    git is stopped by closing the pipe. A non-zero exit raises :class:`GitError`
    with the tail of stderr unless ``check=False``; a timeout always raises.

    ``cwd`` defaults to ``git_dir``: the process never starts inside a work tree.
    ``user`` (uid, gid) runs git as that user with no supplementary group (the
    caller must be root); it then trusts repositories whoever owns them.
    ``env`` adds variables (object directories) to the pinned environment.
    ``tethered`` ties the command and every helper it starts to this process
    (:mod:`replayhub.git.process`): they are killed when it dies, however it
    dies; it takes no ``input``. ``watch`` is called every
    ``process.WATCH_INTERVAL`` seconds while git runs: a non-empty answer kills
    it and raises :class:`GitStopped` with that answer.
    """
    if tethered and input is not None:
        raise ValueError("a tethered git command takes no input")
    argv = ["git"]
    for setting in SAFE_CONFIG:
        argv += ["-c", setting]
    if user is not None:
        # Command-line configuration is one git honours for this setting.
        argv += ["-c", "safe.directory=*"]
    if git_dir is not None:
        argv.append(f"--git-dir={os.fspath(git_dir)}")
    if work_tree is not None:
        argv.append(f"--work-tree={os.fspath(work_tree)}")
    argv += args
    env = {**git_environment(), **(env or {})}
    if index_file is not None:
        env["GIT_INDEX_FILE"] = os.fspath(index_file)
    if cwd is None and git_dir is not None:
        cwd = git_dir

    try:
        proc, lifeline = process.start(
            argv,
            tethered=tethered,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            **_as_user(user),
        )
    except OSError as error:
        raise GitError(f"cannot start git: {error}", argv=argv) from error
    try:
        return _finish(
            proc,
            argv,
            _command_name(args),
            input=input,
            timeout=timeout,
            output_cap=output_cap,
            truncate=truncate,
            check=check,
            watch=watch,
        )
    finally:
        if lifeline:
            lifeline.cut()


def _finish(
    proc: subprocess.Popen,
    argv: list[str],
    name: str,
    *,
    input: bytes | None,
    timeout: float,
    output_cap: int,
    truncate: bool,
    check: bool,
    watch: Callable[[], str] | None,
) -> GitResult:
    """A started git command's output and exit, by :func:`git`'s rules."""
    out = process.CappedReader(proc.stdout, output_cap)
    err = process.TailReader(proc.stderr, STDERR_TAIL)
    threads = [
        threading.Thread(target=out.run, daemon=True),
        threading.Thread(target=err.run, daemon=True),
    ]
    if input is not None:
        threads.append(
            threading.Thread(target=process.feed, args=(proc.stdin, input), daemon=True)
        )
    for thread in threads:
        thread.start()
    try:
        returncode = process.wait(proc, timeout, watch)
    except (subprocess.TimeoutExpired, process.Stopped) as stop:
        process.kill_group(proc)
        for thread in threads:
            thread.join(timeout=5)
        if isinstance(stop, process.Stopped):
            raise GitStopped(str(stop), argv=argv, stderr=err.text()) from None
        raise GitError(
            f"git {name} timed out after {timeout:g}s",
            argv=argv,
            stderr=err.text(),
        ) from None
    for thread in threads:
        thread.join(timeout=5)
    if any(thread.is_alive() for thread in threads):
        # A leftover helper still holds the pipes open.
        process.kill_group(proc)
        for thread in threads:
            thread.join(timeout=5)

    if out.overflowed and not truncate:
        raise GitError(
            f"git {name} printed more than {output_cap} bytes",
            argv=argv,
            stderr=err.text(),
        )
    result = GitResult(argv, returncode, out.data(), err.data())
    result.truncated = out.overflowed
    # Closing the pipe on a cut makes git die of SIGPIPE; that exit is expected.
    if check and returncode != 0 and not out.overflowed:
        stderr = err.text()
        raise GitError(
            f"git {name} failed with exit code {returncode}: "
            f"{stderr.strip()[-1000:] or '(no output)'}",
            argv=argv,
            returncode=returncode,
            stderr=stderr,
        )
    return result


def _as_user(user: tuple[int, int] | None) -> dict[str, Any]:
    if user is None:
        return {}
    uid, gid = user
    return {"user": uid, "group": gid, "extra_groups": []}


def _command_name(args: Sequence[str]) -> str:
    return next((a for a in args if not a.startswith("-")), "")


def require_sha(value: str) -> str:
    """Return ``value`` if it is a hex object name; anything else is a ValueError.

    Object names reach git as arguments, so this also keeps an option-shaped or
    ref-shaped string from ever being interpreted as one.
    """
    if not isinstance(value, str) or not _SHA.fullmatch(value):
        raise ValueError(f"not a hex object name: {value!r}")
    return value


def repository_git_dir(repo: Path | str) -> Path:
    """The git dir of a repository given by its work tree or as a bare repository."""
    repo = Path(repo).absolute()
    dot = repo / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():
        content = dot.read_text(encoding="utf-8", errors="replace").strip()
        if content.startswith("gitdir:"):
            return (repo / content.removeprefix("gitdir:").strip()).resolve()
    if (repo / "HEAD").is_file() and (repo / "objects").is_dir():
        return repo
    raise GitError(f"{repo} is not a git repository")


def objects_dir(git_dir: Path) -> Path:
    """Where a git dir keeps its objects (a linked worktree shares its main repo's)."""
    common = git_dir / "commondir"
    if common.is_file():
        git_dir = (git_dir / common.read_text(encoding="utf-8").strip()).resolve()
    return git_dir / "objects"


def alternates_of(objects: Path, *, depth: int = 5) -> list[Path]:
    """Object directories ``objects`` borrows from, transitively (git stops at 5)."""
    found: list[Path] = []
    pending = [(objects, 0)]
    while pending:
        current, level = pending.pop()
        listing = current / "info" / "alternates"
        if level >= depth or not listing.is_file():
            continue
        for line in listing.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if not line or line.startswith(("#", '"')):
                continue
            path = (current / line).resolve()
            if path not in found:
                found.append(path)
                pending.append((path, level + 1))
    return found


def _init_borrowing(dest: Path, objects: Path, *, bare: bool, timeout: float) -> Path:
    """Create a repository at ``dest`` whose objects are borrowed from ``objects``.

    This is what ``git clone --shared`` does, minus copying the refs: the workspace
    then has no branch or tag pointing past the base, so ``git log --all`` cannot
    show the agent the original solution, and the project's refs are never read.
    New objects are written to ``dest`` only; the project repository stays
    untouched. Returns the new git dir.
    """
    if "\n" in os.fspath(objects):
        raise GitError(f"unusable object directory path: {objects!r}")
    args = ["init", "--quiet", "--template="]
    if bare:
        args.append("--bare")
    git(*args, os.fspath(dest), timeout=timeout)
    git_dir = dest if bare else dest / ".git"
    (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (git_dir / "objects" / "info" / "alternates").write_text(
        f"{objects}\n", encoding="utf-8"
    )
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "attributes").write_text(NO_CONVERSION, encoding="utf-8")
    return git_dir


def branch_name(name: object) -> str | None:
    """``name`` when ``git check-ref-format --branch`` takes it as it is and
    it is at most 255 bytes, else None. Names git would expand (``@``,
    ``@{-1}``) never reach git; a lone surrogate or a control character is
    not printable."""
    if not isinstance(name, str) or not name.isprintable() or "@{" in name:
        return None
    if name.startswith(("-", "@")) or len(name.encode()) > 255:
        return None
    # Run from / with no repository named: nothing of a work tree is read.
    done = git("check-ref-format", "--branch", name, cwd="/", check=False)
    same = done.stdout.decode("utf-8", "replace").strip() == name
    return name if done.returncode == 0 and same else None


class Scratch:
    """The git side of one replay, under a directory ReplayHub owns.

    ``project_repo`` is only ever read: objects are borrowed through alternates.
    Every method that writes runs git with ``--git-dir`` set to a ReplayHub-owned
    directory, never the workspace's ``.git``.
    """

    def __init__(
        self,
        root: Path | str,
        project_repo: Path | str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.root = Path(root).absolute()
        self.project_repo = Path(project_repo).absolute()
        self.timeout = timeout
        self.base: str | None = None
        self.branch: str | None = None  # the workspace's (None: detached)

    @property
    def git_dir(self) -> Path:
        return self.root / "scratch.git"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def project_objects(self) -> Path:
        return objects_dir(repository_git_dir(self.project_repo))

    def git(self, *args: str, **kwargs: Any) -> GitResult:
        """Run git against the scratch git dir."""
        kwargs.setdefault("timeout", self.timeout)
        return git(*args, git_dir=self.git_dir, **kwargs)

    def create(self) -> Path:
        """Create the bare scratch git dir if missing; returns it. Idempotent."""
        if not (self.git_dir / "HEAD").is_file():
            self.root.mkdir(parents=True, exist_ok=True)
            _init_borrowing(
                self.git_dir, self.project_objects, bare=True, timeout=self.timeout
            )
        return self.git_dir

    def resolve_commit(self, rev: str) -> str:
        """Full sha of the commit ``rev`` (a hex name) names; GitError if none."""
        return self._resolve(rev, "commit")

    def resolve_tree(self, rev: str) -> str:
        """Full sha of the tree of ``rev`` (a commit or tree hex name)."""
        return self._resolve(rev, "tree")

    def _resolve(self, rev: str, kind: str) -> str:
        rev = require_sha(rev)
        self.create()
        result = self.git(
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            f"{rev}^{{{kind}}}",
            check=False,
        )
        sha = result.stdout.decode().strip()
        if result.returncode != 0 or not sha:
            raise GitError(f"{rev} does not name a {kind} in {self.project_repo}")
        return sha

    def provision(self, base: str, branch: str | None = None) -> Path:
        """Create ``<root>/workspace``, the agent's checkout of ``base``:
        detached, or on a local branch ``branch`` at ``base`` when that is a
        valid branch name (:func:`branch_name`); :attr:`branch` says which.

        The workspace's git holds only what ``base`` reaches: it is a
        ``--no-local`` clone of the scratch dir, so objects are copied through a
        pack rather than borrowed. Borrowing the project's object store would
        let the agent find the original solution by hash (``git cat-file
        --batch-all-objects``) and "reproduce" it by copying. No host path is
        left in the workspace's git either: the remote is removed, and no reflog
        is written (its first entry would name the scratch dir cloned from), while
        the agent's own ref updates are logged as in any clone. git runs in the
        workspace here only because no agent has touched it yet; the branch is
        made in the scratch dir and cloned. Files are checked out as the base's
        bytes, unconverted, as capture stores them.
        """
        base = self.resolve_commit(base)
        workspace = self.workspace
        if workspace.exists():
            raise FileExistsError(f"{workspace} already exists; a workspace is fresh")
        self.branch = branch_name(branch) if branch else None
        cloned = self.branch or "replay-base"
        try:
            self.git("update-ref", f"refs/heads/{cloned}", base)
        except GitError:  # a name the scratch dir's refs cannot hold: detached
            self.branch, cloned = None, "replay-base"
            self.git("update-ref", "refs/heads/replay-base", base)
        git(
            "clone",
            "--quiet",
            "--no-local",
            "--no-checkout",
            "--no-tags",
            "--single-branch",
            f"--branch={cloned}",
            "--template=",
            "--config=core.logAllRefUpdates=false",
            "--",
            os.fspath(self.git_dir),
            os.fspath(workspace),
            cwd=self.root,
            timeout=self.timeout,
        )
        ws_git = workspace / ".git"
        options: GitOptions = {
            "git_dir": ws_git,
            "work_tree": workspace,
            "timeout": self.timeout,
        }
        attributes = ws_git / "info" / "attributes"
        attributes.parent.mkdir(exist_ok=True)
        attributes.write_text(NO_CONVERSION, encoding="utf-8")
        if self.branch is not None:
            # The name passed check-ref-format --branch: it never starts with "-".
            git("checkout", "--quiet", self.branch, "--", **options)
        else:
            git("checkout", "--quiet", "--detach", base, **options)
            git("branch", "--quiet", "-D", "replay-base", **options)
        remove_tree(attributes.parent)
        git("remote", "remove", "origin", **options)
        git("config", "--replace-all", "core.logAllRefUpdates", "true", **options)
        remove_tree(ws_git / "logs")
        self.base = base
        return workspace

    def commit_tree(self, tree: str, parent: str | None, message: str) -> str:
        """Make a commit of ``tree`` on ``parent`` in the scratch git dir."""
        self.create()
        args = ["commit-tree", require_sha(tree)]
        if parent is not None:
            args += ["-p", require_sha(parent)]
        result = self.git(*args, input=message.encode())
        return result.stdout.decode().strip()

    def checkout_tree(self, tree_or_commit: str, dest: Path | str) -> Path:
        """Write a clean copy of a tree into ``dest`` (new or empty), with no .git.

        Used for the test gate. Attribute-driven filters in the tree stay inert:
        no driver is configured anywhere git looks.
        """
        tree = self.resolve_tree(tree_or_commit)
        dest = Path(dest).absolute()
        dest.mkdir(parents=True, exist_ok=True)
        if any(dest.iterdir()):
            raise FileExistsError(f"{dest} is not empty")
        index = self.root / f"checkout-{uuid.uuid4().hex}.index"
        try:
            self.git("read-tree", tree, index_file=index)
            self.git("checkout-index", "--all", work_tree=dest, index_file=index)
        finally:
            index.unlink(missing_ok=True)
        return dest

    def remove(self) -> None:
        """Delete everything under ``root``. Safe to call twice."""
        remove_tree(self.root)


@dataclass
class TreeComparison:
    """The git-level answer for one replay; texts are capped, see ``truncated``."""

    identical: bool
    base_tree: str
    original_tree: str
    replay_tree: str
    diff_of_diffs: str
    diffstat: str
    files_changed: int
    insertions: int
    deletions: int
    differing_paths: list[str] = field(default_factory=list)
    original_patch: str = ""
    replay_patch: str = ""
    replay_paths: list[str] = field(default_factory=list)
    disallowed_paths: list[str] = field(default_factory=list)
    truncated: bool = False
    # Path -> class (see ``hunks``) for each differing path, sorted by path.
    hunk_classes: dict[str, str] = field(default_factory=dict)
    substantive_files: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_DIFF_OPTIONS = (
    "-c",
    "core.quotePath=false",
    "diff",
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
)


def compare(
    scratch: Scratch,
    *,
    base: str,
    original_commit: str,
    replay_tree: str,
    allowed_globs: Iterable[str] = (),
    cap_bytes: int = DIFF_CAP,
) -> TreeComparison:
    """Compare the original result with the replay's, both grown from ``base``.

    Identity is decided on tree hashes. Patches and the stat use rename detection
    for reading; the path lists do not, so both sides of a rename count as
    touched (a move out of an allowed directory is still a disallowed path).
    ``truncated`` is set when any stored text (the three patches or the stat) was
    cut at ``cap_bytes``. An empty ``allowed_globs`` allows every path.
    ``hunk_classes`` names the kind of difference of each differing path.
    """
    base_tree = scratch.resolve_tree(base)
    original_tree = scratch.resolve_tree(original_commit)
    replay_tree = scratch.resolve_tree(replay_tree)
    identical = original_tree == replay_tree

    def text(old: str, new: str, *options: str) -> tuple[str, bool]:
        result = scratch.git(
            *_DIFF_OPTIONS, *options, old, new, output_cap=cap_bytes, truncate=True
        )
        return _decode_capped(result.stdout, result.truncated)

    def paths(old: str, new: str) -> list[str]:
        out = scratch.git(
            *_DIFF_OPTIONS, "--no-renames", "--name-only", "-z", old, new
        ).stdout
        return [p.decode("utf-8", errors="replace") for p in out.split(b"\0") if p]

    original_patch, cut_original = text(base_tree, original_tree, "-M")
    replay_patch, cut_replay = text(base_tree, replay_tree, "-M")
    replay_paths = paths(base_tree, replay_tree)
    if identical:
        diff_of_diffs, diffstat, cut_dod, cut_stat = "", "", False, False
        files_changed = insertions = deletions = 0
        differing: list[str] = []
        classes: dict[str, str] = {}
    else:
        diff_of_diffs, cut_dod = text(original_tree, replay_tree, "-M")
        diffstat, cut_stat = text(original_tree, replay_tree, "-M", "--stat=160")
        shortstat = scratch.git(
            *_DIFF_OPTIONS, "-M", "--shortstat", original_tree, replay_tree
        ).stdout.decode()
        files_changed, insertions, deletions = _parse_shortstat(shortstat)
        differing = paths(original_tree, replay_tree)
        classes = blobs.hunk_classes(scratch, original_tree, replay_tree)

    globs = [g for g in allowed_globs if g]
    disallowed = (
        [p for p in replay_paths if not any(glob_match(p, g) for g in globs)]
        if globs
        else []
    )
    return TreeComparison(
        identical=identical,
        base_tree=base_tree,
        original_tree=original_tree,
        replay_tree=replay_tree,
        diff_of_diffs=diff_of_diffs,
        diffstat=diffstat,
        files_changed=files_changed,
        insertions=insertions,
        deletions=deletions,
        differing_paths=differing,
        original_patch=original_patch,
        replay_patch=replay_patch,
        replay_paths=replay_paths,
        disallowed_paths=disallowed,
        truncated=cut_original or cut_replay or cut_dod or cut_stat,
        hunk_classes=classes,
        substantive_files=hunks.count_substantive(classes),
    )


def _decode_capped(data: bytes, truncated: bool) -> tuple[str, bool]:
    if truncated:
        # Keep whole lines; a single line longer than the cap is cut where it falls.
        end = data.rfind(b"\n")
        if end >= 0:
            data = data[: end + 1]
    return data.decode("utf-8", errors="replace"), truncated


_SHORTSTAT = re.compile(r"(\d+) (files? changed|insertions?|deletions?)")


def _parse_shortstat(text: str) -> tuple[int, int, int]:
    counts = {"f": 0, "i": 0, "d": 0}
    for number, label in _SHORTSTAT.findall(text):
        counts[label[0]] = int(number)
    return counts["f"], counts["i"], counts["d"]
