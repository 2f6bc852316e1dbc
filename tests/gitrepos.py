"""Real git repositories in temp dirs, for tests.

    repo = make_repo(tmp_path, {"README.md": "hello\\n"})
    base = repo.head()
    repo.commit({"src/app.py": "print(1)\\n"}, "add app", branch="feature")
    repo.checkout("main")
    merge = repo.merge("feature")

File contents are ``str`` (text), ``bytes``, :class:`Symlink`, :class:`Executable`,
or ``None`` to delete the path. git runs through ``replayhub.git.scratch.git``, so the
repositories see the same pinned environment as production code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from replayhub.git.scratch import git


@dataclass(frozen=True)
class Symlink:
    target: str


@dataclass(frozen=True)
class Executable:
    content: str | bytes


Content = str | bytes | Symlink | Executable | None


def write_files(root: Path, files: Mapping[str, Content]) -> None:
    """Write (or with ``None`` delete) files under ``root``, creating directories."""
    for name, content in files.items():
        path = root / name
        if content is None:
            if path.is_symlink() or path.is_file():
                path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.is_file():
            path.unlink()
        if isinstance(content, Symlink):
            path.symlink_to(content.target)
            continue
        data = content.content if isinstance(content, Executable) else content
        if isinstance(data, str):
            data = data.encode()
        path.write_bytes(data)
        path.chmod(0o755 if isinstance(content, Executable) else 0o644)


class Repo:
    """A non-bare repository with a work tree, driven through the safe git runner."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.git_dir = path / ".git"

    def git(self, *args: str, check: bool = True) -> str:
        """Run git in this repository and return stripped stdout."""
        result = git(*args, git_dir=self.git_dir, work_tree=self.path, check=check)
        return result.stdout.decode().strip()

    def write(self, files: Mapping[str, Content]) -> None:
        """Change the work tree without committing."""
        write_files(self.path, files)

    def commit(
        self,
        files: Mapping[str, Content] | None = None,
        message: str = "change",
        *,
        branch: str | None = None,
    ) -> str:
        """Commit ``files`` (on ``branch``, created at HEAD if new); returns the sha."""
        if branch is not None:
            self.checkout(branch, create=not self.has_branch(branch))
        write_files(self.path, files or {})
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    def has_branch(self, name: str) -> bool:
        return bool(self.git("branch", "--list", name))

    def checkout(self, ref: str, *, create: bool = False) -> None:
        if create:
            self.git("checkout", "--quiet", "-b", ref)
        else:
            self.git("checkout", "--quiet", ref)

    def merge(
        self, ref: str, message: str | None = None, *, fast_forward: bool = False
    ) -> str:
        """Merge ``ref`` into the current branch (a merge commit unless asked)."""
        args = ["merge", "--quiet", "--ff" if fast_forward else "--no-ff"]
        args += ["-m", message or f"Merge {ref}", ref]
        self.git(*args)
        return self.head()

    def head(self) -> str:
        return self.rev("HEAD")

    def rev(self, ref: str) -> str:
        return self.git("rev-parse", "--verify", f"{ref}^{{commit}}")

    def tree(self, ref: str = "HEAD") -> str:
        return self.git("rev-parse", "--verify", f"{ref}^{{tree}}")


def make_repo(
    tmp_path: Path,
    files: Mapping[str, Content] | None = None,
    *,
    name: str = "project",
    branch: str = "main",
    message: str = "initial",
) -> Repo:
    """A fresh repository at ``tmp_path/name`` with one commit of ``files``."""
    path = tmp_path / name
    path.mkdir(parents=True)
    git("init", "--quiet", "--template=", f"--initial-branch={branch}", os.fspath(path))
    repo = Repo(path)
    repo.commit(files or {"README.md": "readme\n"}, message)
    return repo


def project_repo(tmp_path: Path) -> Repo:
    """The repository of the project native records are imported into."""
    return make_repo(tmp_path, {"cart.py": "TOTAL = 0\n"})
