"""The order the workers take the tests in (tests/order.py): the long tests
that need no database first, longest first, the others as they came."""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import ROOT
from tests.order import LONG_WITHOUT_DATABASE, spread


def item(nodeid: str, *fixtures: str, marked: bool = False):
    return SimpleNamespace(
        nodeid=nodeid,
        fixturenames=list(fixtures),
        get_closest_marker=lambda name: object() if marked else None,
    )


def test_the_tests_without_a_database_are_spread_the_long_ones_first():
    d = [item(f"tests/reviews/test_x.py::test_{n}", "db") for n in range(6)]
    # Listed, but needing the database (a marker, a fixture): kept in place.
    marked = item("tests/core/test_dev_run.py::test_marked", marked=True)
    live = item("tests/core/test_dev_run.py::test_live", "live_server")
    q = [item(f"tests/lib/test_y.py::test_{n}") for n in range(2)]
    bench = item("tests/benchmarks/test_bench_quick.py::test_q[0]")
    dev_run = item("tests/core/test_dev_run.py::test_run")

    ordered = spread([*d[:3], marked, *q, dev_run, live, *d[3:], bench])

    # The longest first; each free module once the database tests have come
    # as far through theirs (by count) as the free ones through theirs.
    assert ordered == [
        bench, d[0], d[1], dev_run, d[2], marked, q[0], q[1], live, d[3], d[4], d[5]
    ]  # fmt: skip


def test_every_module_named_is_in_the_suite():
    assert [m for m in LONG_WITHOUT_DATABASE if not (ROOT / m).is_file()] == []
