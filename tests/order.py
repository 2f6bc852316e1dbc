"""The order the test workers take the tests in: the long ones that need no
database first.

pytest-django runs the tests without a database last (after the ones in a
transaction, then the transactional ones). Among them are some of the
longest of the suite, several mostly waiting on the processes they drive:
taken last, they left the run's final minute or two with the two cores
half idle while the other workers had nothing left to do (measured on 2
cores: 50-85% busy over the last 80 s, 97% before). Needing no database,
they may run at any point; so they go first, longest first, and the run
ends on short tests that keep every worker busy to the end. The order of
the database tests is pytest-django's, untouched.

Loaded with ``-p tests.order`` (pyproject's ``addopts``). Every worker sorts
the same collection the same way, as pytest-xdist requires.
"""

from __future__ import annotations

import pytest

# The modules whose slowest test needs no database and takes over ~3 s, with
# that test's seconds in a run of the whole suite on 2 shared cores
# (2026-12-06): the longest start first. A module not here keeps its place.
LONG_WITHOUT_DATABASE = {
    "tests/benchmarks/test_bench_quick.py": 33.2,
    "tests/core/test_dev_run.py": 29.0,
    "tests/nights/test_broker_lost.py": 13.6,
    "tests/environments/test_agent_installs.py": 7.9,
    "tests/verdicts/test_verdicts_reference.py": 7.5,
    "tests/testgate/test_testpaths_interference.py": 7.3,
    "tests/testgate/test_testcases.py": 6.2,
    "tests/git/test_hunks.py": 3.8,
    "tests/core/test_architecture.py": 3.6,
    "tests/sandbox/test_hardening.py": 3.0,
    "tests/sandbox/test_limits.py": 3.0,
    "tests/git/test_mirror_limits.py": 3.0,
}
# The fixtures by which pytest-django knows a test uses the database.
DATABASE_FIXTURES = {
    "db",
    "transactional_db",
    "live_server",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
}


def needs_database(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(
        names & DATABASE_FIXTURES
    )


def first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the long tests that need no database moved to the
    front, longest module first; the others in their order."""
    seconds = {
        id(item): LONG_WITHOUT_DATABASE.get(item.nodeid.split("::")[0], 0.0)
        for item in items
    }
    moved = [i for i in items if seconds[id(i)] and not needs_database(i)]
    moved.sort(key=lambda item: -seconds[id(item)])
    kept = {id(item) for item in moved}
    return moved + [item for item in items if id(item) not in kept]


# After pytest-django's own sort (tryfirst), which would undo this.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = first(items)
