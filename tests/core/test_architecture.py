"""The import chain runs one way, and modules stay a readable size.

Views and commands → services → domain (reproduce, nightly, ingest) → models
and pure rules; tasks call services; only services modules enqueue tasks. The
domain (``replayhub``) never imports the people's side (``reviews``), except in
the project's wiring. Imports inside functions count as much as the ones at the
top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("replayhub", "reviews")
# The project's wiring may name the apps built on the domain.
WIRING = (
    "replayhub.urls",
    "replayhub.settings",
    "replayhub.wsgi",
    "replayhub.celery",
    "replayhub.management.",
    "replayhub.migrations.",
)
MAX_LINES = 800
# Modules whose size is the data they hold, not code to read.
SIZE_EXEMPT = ("/migrations/",)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports, anywhere in its body."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            # ``from package import module`` imports the module itself.
            candidates = [f"{source}.{alias.name}" for alias in node.names]
            candidates = [c if c in known else source for c in candidates]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def is_tasks(name: str) -> bool:
    return name.rpartition(".")[2] == "tasks"


def is_services(name: str) -> bool:
    return name.rpartition(".")[2] == "services"


def find_cycle(edges: dict[str, set[str]]) -> list[str]:
    """One import cycle as a list of modules, or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_the_graph_reader_sees_function_level_and_relative_imports():
    edges = graph()
    assert "replayhub.models" in edges["replayhub.services"]
    assert "replayhub.tasks" in edges["replayhub.services"]
    assert "replayhub.ingest.native" in edges["replayhub.ingest.importer"]
    # Imported inside ready(): a function-level import.
    assert "replayhub.signals" in edges["reviews.apps"]


def test_only_services_modules_import_tasks():
    importers = {
        name
        for name, targets in graph().items()
        if any(is_tasks(t) for t in targets) and not is_tasks(name)
    }
    assert importers, "the check found no enqueueing module at all"
    assert {name for name in importers if not is_services(name)} == set()


def test_the_import_graph_without_the_enqueue_arrows_has_no_cycle():
    edges = {
        name: {t for t in targets if not (is_services(name) and is_tasks(t))}
        for name, targets in graph().items()
    }
    assert find_cycle(edges) == []


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def test_the_domain_never_imports_the_peoples_side():
    arrows = {
        (name, target)
        for name, targets in graph().items()
        if name.startswith("replayhub")
        and not name.startswith(WIRING)
        and name not in WIRING
        for target in targets
        if target.startswith("reviews")
    }
    assert arrows == set()


def test_no_module_is_over_the_size_limit():
    paths = [
        path
        for folder in (*PACKAGES, "tests", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if not any(part in str(path) for part in SIZE_EXEMPT)
    ]
    assert len(paths) > 50
    too_long = {
        str(path.relative_to(ROOT)): n
        for path in paths
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert too_long == {}


def test_the_models_verdicts_are_the_rule_modules_verdicts():
    from replayhub import models, verdicts

    assert [(v.name, v.value) for v in models.Verdict] == [
        (v.name, v.value) for v in verdicts.Verdict
    ]
