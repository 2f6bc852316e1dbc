"""The recorder as the one file a laptop or CI runner downloads.

The recorder is a package of standard-library modules, one a job
(:data:`MODULES`, each after the ones it imports). The download (``views``) is
those modules joined into one script: ``record``'s docstring as the file's,
``from __future__ import annotations`` once, then each module's body in that
order with its imports of the others left out -- the names they import are
defined above it, in the one namespace the script has. :func:`source` refuses
a module that would not join cleanly (an import of any other project module,
a name bound in two modules to two things, a relative or renamed import of a
sibling), so a change that would break the download fails its tests instead.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

PACKAGE = "replayhub.recorder"
HERE = Path(__file__).parent
MODULES = (
    "exits",
    "scrub",
    "redirects",
    "checkout",
    "surroundings",
    "wiring",
    "endpoint",
    "delivery",
    "record",
)
SHEBANG = "#!/usr/bin/env python3\n"


class BundleError(Exception):
    """A recorder module that cannot be joined into the one file."""


@functools.cache
def source() -> str:
    """The recorder as one script (the same text for every caller)."""
    return join(HERE)


def join(directory: Path) -> str:
    """The :data:`MODULES` of ``directory`` joined into one script."""
    bound: dict[str, tuple[str, ...]] = {}
    defined: dict[str, set[str]] = {}
    parts = []
    for name in MODULES:
        text = (directory / f"{name}.py").read_text(encoding="utf-8")
        body, names = _body(name, text, defined)
        for binding, origin in names.items():
            if bound.setdefault(binding, origin) != origin:
                raise BundleError(
                    f"{name}.py binds {binding!r}, which another module binds "
                    "to something else: one of them must be renamed"
                )
        defined[name] = {b for b, origin in names.items() if origin == (name,)}
        banner = f"# --- {PACKAGE}.{name} "
        parts.append(banner + "-" * (88 - len(banner)) + "\n")
        about = ast.get_docstring(ast.parse(text)) or ""
        parts += [f"# {line}".rstrip() + "\n" for line in about.splitlines()]
        parts.append("\n" + body.strip("\n") + "\n\n\n")
    text = (directory / "record.py").read_text(encoding="utf-8")
    docstring = ast.parse(text).body[0]
    lines = text.splitlines(keepends=True)
    head = "".join(lines[docstring.lineno - 1 : docstring.end_lineno])
    future = "\nfrom __future__ import annotations\n\n\n"
    return SHEBANG + head + future + "".join(parts).rstrip("\n") + "\n"


def _body(
    module: str, text: str, defined: dict[str, set[str]]
) -> tuple[str, dict[str, tuple[str, ...]]]:
    """``module``'s text less its docstring, its shebang, its ``__future__``
    import and its imports of the modules before it; and the names it binds at
    its top, each with what it is bound to (an import's source, or the module
    defining it)."""
    tree = ast.parse(text, filename=f"{module}.py")
    lines = text.splitlines(keepends=True)
    dropped: set[int] = {0} if text.startswith("#!") else set()
    names: dict[str, tuple[str, ...]] = {}
    for number, node in enumerate(tree.body):
        docstring = number == 0 and ast.get_docstring(tree) is not None
        if docstring or _joined_import(module, node, defined):
            dropped.update(range(node.lineno - 1, node.end_lineno or node.lineno))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                _foreign(module, node, alias.name)
                if isinstance(node, ast.ImportFrom) or alias.asname:
                    source = node.module if isinstance(node, ast.ImportFrom) else ""
                    origin = (source or "", alias.name)
                    names[alias.asname or alias.name] = origin
                else:  # "import a.b" binds the package "a", the same in all
                    names[alias.name.split(".")[0]] = ("", alias.name.split(".")[0])
        else:
            for target in _bindings(node):
                names[target] = (module,)
    kept = "".join(line for n, line in enumerate(lines) if n not in dropped)
    return kept, names


def _joined_import(module: str, node: ast.stmt, defined: dict[str, set[str]]) -> bool:
    """Whether ``node`` is an import the joined file does without: the
    ``__future__`` one (written once at its top) or one of a recorder module,
    checked to join (one before ``module``, names it defines, none renamed)."""
    if not isinstance(node, ast.ImportFrom) or node.level:
        return False
    if node.module == "__future__":
        return True
    if not (node.module or "").startswith(f"{PACKAGE}."):
        return False
    sibling = (node.module or "").removeprefix(f"{PACKAGE}.")
    if sibling not in defined:
        raise BundleError(
            f"{module}.py imports {node.module}, which is not a module joined "
            f"before it ({', '.join(MODULES)})"
        )
    for alias in node.names:
        if alias.asname or alias.name not in defined[sibling]:
            raise BundleError(
                f"{module}.py imports {alias.name!r} from {sibling} as it cannot "
                "be joined: not renamed, and only what that module defines"
            )
    return True


def _foreign(module: str, node: ast.Import | ast.ImportFrom, name: str) -> None:
    """Refuse an import the one file cannot hold: anything but the standard
    library (project code included)."""
    source = node.module if isinstance(node, ast.ImportFrom) else name
    top = (source or "").split(".")[0]
    if isinstance(node, ast.ImportFrom) and node.level:
        top = "."
    if top not in sys.stdlib_module_names:
        raise BundleError(
            f"{module}.py imports {source or '.'}: the recorder is one "
            "standard-library file"
        )


# Where a name bound is not the module's: a comprehension's or a lambda's own.
_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)


def _bindings(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds in its module."""
    found: set[str] = set()
    work: list[ast.AST] = [node]
    while work:
        item = work.pop()
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(item.name)  # its body is a scope of its own
        elif isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store):
            found.add(item.id)
        elif not isinstance(item, _SCOPES):
            work.extend(ast.iter_child_nodes(item))
    return found
