"""The tree tells the architecture, and the build fails when it stops doing so.

- No import cycle at all: views, commands and tasks call services; services
  call the domain and enqueue work by task name (``replayhub.celery.Task``),
  so nothing imports ``replayhub.tasks``.
- The domain's packages import only downward. Modules with no Django in them
  (the pure rules and the plain engine: sandbox, git, gateway servers) are the
  floor every layer stands on, the models included.
- The domain (``replayhub``) never imports the people's side (``reviews``),
  except in the project's wiring.
- One name per thing: no module name in both apps but Django's and the
  layers', no singular/plural pair in one package, no project module imported
  under another name, one class per name across the apps.
- Only ``reviews/render/`` marks text as safe HTML.
- Few modules at each app's top, none over the size limit and no function
  or method in the apps over its own; the tests mirror the packages.

Imports inside functions count as much as the ones at the top of a module.
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from functools import cache
from pathlib import Path

from tests.conftest import ROOT

APPS = ("replayhub", "reviews")
# The project's wiring may name the apps built on the domain.
WIRING = (
    "replayhub.urls",
    "replayhub.settings",
    "replayhub.wsgi",
    "replayhub.celery",
    "replayhub.management.",
    "replayhub.migrations.",
)
# Names Django (or a layer) gives a module in every app that has one.
FIXED_NAMES = {
    "__init__",
    "admin",
    "apps",
    "checks",
    "context_processors",
    "forms",
    "migrations",
    "models",
    "signals",
    "templatetags",
    "urls",
    "views",
    "services",
    "tasks",
    "api",
}
DJANGO_ROOTS = {"django", "django_htmx", "celery", "jinja2"}
MAX_LINES = 700
# No function or method in the apps longer than this, its decorators aside.
MAX_FUNCTION_LINES = 100
MAX_TOP_LEVEL = {"replayhub": 16, "reviews": 12}
# Modules whose size is the data they hold, not code to read.
SIZE_EXEMPT = ("/migrations/",)
# Test directories that are kinds of test, not packages: whole pages in a real
# browser, and the benchmarks' quick runs (which mirror benchmarks/).
TEST_KINDS = {"browser", "benchmarks"}
# Packages Django gives the domain: commands are tested with what they call.
DJANGO_PACKAGES = {"management", "migrations"}
# Domain packages tested only whole, and where.
TESTED_WHOLE = {"demo": "tests/browser/test_demo.py"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    found = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            found[module_name(path)] = path
    return found


def import_nodes(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports, anywhere in its body."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in import_nodes(path):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            # ``from package import module`` imports the module itself.
            candidates = [f"{source}.{alias.name}" for alias in node.names]
            candidates = [c if c in known else source for c in candidates]
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


@cache
def graph() -> dict[str, frozenset[str]]:
    known = modules()
    return {
        name: frozenset(imports_of(name, path, known)) for name, path in known.items()
    }


def find_cycle(edges) -> list[str]:
    """One import cycle as a list of nodes, or [] when there is none."""
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


def django_free() -> set[str]:
    """Modules that import no Django, directly or through project modules."""
    edges = graph()
    free = {
        name
        for name, path in modules().items()
        if not any(
            (
                alias.name if isinstance(node, ast.Import) else node.module or ""
            ).partition(".")[0]
            in DJANGO_ROOTS
            for node in import_nodes(path)
            for alias in node.names
        )
    }
    changed = True
    while changed:
        changed = False
        for name in list(free):
            if edges[name] - free:
                free.discard(name)
                changed = True
    return free


def unit(name: str) -> str:
    """The package a module belongs to for layering: ``replayhub.git`` for
    ``replayhub.git.scratch``; a top-level module is its own unit."""
    return ".".join(name.split(".")[:2])


def stem(name: str) -> str:
    return name.rpartition(".")[2]


def test_the_graph_reader_sees_function_level_and_relative_imports():
    edges = graph()
    assert "replayhub.models" in edges["replayhub.services"]
    assert "replayhub.celery" in edges["replayhub.services"]
    assert "replayhub.ingest.native" in edges["replayhub.ingest.importer"]
    # Imported inside ready(): a function-level import.
    assert "replayhub.signals" in edges["reviews.apps"]


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def test_there_is_no_import_cycle_at_all():
    assert find_cycle(graph()) == []


def test_nothing_imports_the_tasks():
    importers = {
        name for name, targets in graph().items() if "replayhub.tasks" in targets
    }
    assert importers == set()


def test_every_task_is_registered_under_its_name_in_the_table():
    import replayhub.tasks  # noqa: F401 - what a worker loads
    import reviews.tasks  # noqa: F401
    from replayhub.celery import Task, app

    registered = {name for name in app.tasks if not name.startswith("celery.")}
    assert registered == {task.value for task in Task}


def test_the_domains_packages_import_only_downward():
    free = django_free()
    assert "replayhub.verdicts.table" in free
    assert "replayhub.models" not in free
    edges: dict[str, set[str]] = defaultdict(set)
    for name, targets in graph().items():
        if not name.startswith("replayhub.") or name.startswith(WIRING):
            continue
        for target in targets - free:
            if unit(target) != unit(name):
                edges[unit(name)].add(unit(target))
    assert find_cycle(edges) == []


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


def named_modules(app: str) -> set[str]:
    """The stems of ``app``'s modules and packages; commands, migrations and
    the modules of a models package (named for their tables, and reached
    through the package) aside."""
    return {
        stem(name)
        for name in modules()
        if name.startswith(f"{app}.")
        and not any(part in name for part in (".migrations", ".management", ".models."))
    }


def test_no_module_name_means_two_things_in_the_two_apps():
    shared = named_modules("replayhub") & named_modules("reviews")
    assert shared - FIXED_NAMES == set()


def test_no_package_holds_a_singular_and_its_plural():
    by_package: dict[str, set[str]] = defaultdict(set)
    for name in modules():
        by_package[name.rpartition(".")[0]].add(stem(name))
    pairs = {
        (package, name)
        for package, names in by_package.items()
        for name in names
        if f"{name}s" in names
    }
    assert pairs == set()


def test_no_project_module_is_imported_under_another_name():
    folders = (*APPS, "tests", "benchmarks")
    aliased = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            if "/migrations/" in str(path):
                continue
            for node in import_nodes(path):
                for alias in node.names:
                    if alias.asname is None:
                        continue
                    source = (
                        alias.name
                        if isinstance(node, ast.Import)
                        else f"{node.module}.{alias.name}"
                    )
                    if (ROOT / Path(*source.split("."))).with_suffix(".py").exists():
                        aliased.add((str(path.relative_to(ROOT)), source))
    assert aliased == set()


def test_a_class_name_means_one_class_across_the_apps():
    defined: dict[str, set[str]] = defaultdict(set)
    for name, path in modules().items():
        if ".migrations." in name or ".management." in name:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                defined[node.name].add(name)
    assert {cls: where for cls, where in defined.items() if len(where) > 1} == {}


def test_one_verdict_type_and_the_reviewers_decision_nested_in_review():
    from replayhub import models, verdicts
    from reviews.models import Review

    assert not hasattr(models, "Verdict")
    assert [value for value, _ in models.VERDICT_CHOICES] == list(verdicts.Verdict)
    assert Review.Decision.values == ["confirm", "overturn", "rerun"]


def test_only_the_renderers_mark_text_safe():
    marking = {
        str(path.relative_to(ROOT))
        for app in APPS
        for path in (ROOT / app).rglob("*.py")
        if "mark_safe(" in path.read_text()
    }
    assert marking
    assert {path for path in marking if not path.startswith("reviews/render/")} == set()


def test_each_app_has_few_modules_at_its_top():
    for app, most in MAX_TOP_LEVEL.items():
        top = list((ROOT / app).glob("*.py"))
        assert len(top) <= most, (app, sorted(p.name for p in top))


def test_no_module_is_over_the_size_limit():
    paths = [
        path
        for folder in (*APPS, "tests", "benchmarks")
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


def test_no_function_is_over_the_size_limit():
    lengths = {
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}": (
            node.end_lineno or node.lineno
        )
        - node.lineno
        + 1
        for name, path in modules().items()
        if ".migrations." not in name
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert len(lengths) > 500
    too_long = [
        f"{where}: {n} lines"
        for where, n in sorted(lengths.items())
        if n > MAX_FUNCTION_LINES
    ]
    assert not too_long, "\n".join(too_long)


def packages(app: str) -> set[str]:
    """The names of ``app``'s packages that hold code."""
    return {
        init.parent.name
        for init in (ROOT / app).glob("*/__init__.py")
        if any(ast.parse(path.read_text()).body for path in init.parent.rglob("*.py"))
    }


def test_the_tests_mirror_the_packages():
    tests = ROOT / "tests"
    # A directory of test modules; fixture data folders hold none.
    directories = {
        path.parent.relative_to(tests).as_posix()
        for path in tests.rglob("*.py")
        if path.parent != tests
    }
    assert {"core", "reviews", "replay", "reviews/views"} <= directories
    mirrors = {
        "core",
        "reviews",
        *TEST_KINDS,
        *packages("replayhub"),
        *(f"reviews/{name}" for name in packages("reviews")),
    }
    assert directories - mirrors == set()
    domain = packages("replayhub") - DJANGO_PACKAGES
    assert domain - directories == set(TESTED_WHOLE)
    assert all((ROOT / path).exists() for path in TESTED_WHOLE.values())


def test_mypy_checks_both_apps_whole():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["files"] == list(APPS)
