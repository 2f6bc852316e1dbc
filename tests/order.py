"""The order the test workers take the tests in: the tests that need no
database spread through the run, the long ones first.

pytest-django runs the tests without a database last (after the ones in a
transaction, then the transactional ones). Most of them wait more than they
compute (a sandbox starting, a socket timing out, a server of their own):
taken together at the end, they left the run's last 80-100 s with the two
cores 30-85% busy (97-99% before), the four workers all waiting at once.
Needing no database, they may run at any point: each module of them is put
in among the database tests, evenly by count, so that a worker waiting on
one runs beside others computing; the long ones (``LONG_WITHOUT_DATABASE``)
come first, longest first, so that none starts near the end. The order of
the database tests among themselves is pytest-django's, untouched, and a
module's tests stay together.

Loaded with ``-p tests.order`` (pyproject's ``addopts``). Every worker sorts
the same collection the same way, as pytest-xdist requires.
"""

from __future__ import annotations

from itertools import groupby

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


def spread(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the tests that need no database put in among the
    others: their modules in turn, the long ones first (longest first), each
    module's tests together, placed where the others have come as far
    through their own order (by count) as these have through theirs."""
    seconds = {
        id(item): LONG_WITHOUT_DATABASE.get(item.nodeid.split("::")[0], 0.0)
        for item in items
    }
    others = [item for item in items if needs_database(item)]
    free = [item for item in items if not needs_database(item)]
    free.sort(key=lambda item: -seconds[id(item)])
    ordered: list[pytest.Item] = []
    taken = placed = 0
    for _, module in groupby(free, key=lambda item: item.nodeid.split("::")[0]):
        block = list(module)
        # Where the others are as far through as the free tests are so far.
        due = len(others) * placed // len(free)
        ordered += others[taken:due]
        taken = max(taken, due)
        ordered += block
        placed += len(block)
    return ordered + others[taken:]


# After pytest-django's own sort (tryfirst), which would undo this.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = spread(items)
