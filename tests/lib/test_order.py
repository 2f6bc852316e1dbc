"""The order the workers take the tests in (tests/order.py): the long tests
that need no database first, longest first, the others as they came."""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import ROOT
from tests.order import LONG_WITHOUT_DATABASE, first


def item(nodeid: str, *fixtures: str, marked: bool = False):
    return SimpleNamespace(
        nodeid=nodeid,
        fixturenames=list(fixtures),
        get_closest_marker=lambda name: object() if marked else None,
    )


def test_the_long_tests_without_a_database_go_first_longest_first():
    database = item("tests/reviews/test_x.py::test_a", "db")
    marked = item("tests/core/test_dev_run.py::test_marked", marked=True)
    quick = item("tests/lib/test_y.py::test_b")
    bench = item("tests/benchmarks/test_bench_quick.py::test_q[0]")
    dev_run = item("tests/core/test_dev_run.py::test_run")
    live = item("tests/core/test_dev_run.py::test_live", "live_server")

    ordered = first([database, marked, quick, dev_run, live, bench])

    # The bench's test is the longest; a listed module's test that needs the
    # database (a marker, a fixture) keeps its place among the others.
    assert [i.nodeid for i in ordered] == [
        bench.nodeid,
        dev_run.nodeid,
        database.nodeid,
        marked.nodeid,
        quick.nodeid,
        live.nodeid,
    ]


def test_every_module_named_is_in_the_suite():
    assert [m for m in LONG_WITHOUT_DATABASE if not (ROOT / m).is_file()] == []
