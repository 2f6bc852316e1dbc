"""Review queue page server time with 1,000,000 replays in PostgreSQL.

The figure: the queue page (``reviews:queue``) as the server answers it —
middleware, session, permission checks, the keyset page query, the band counts,
the template — for the first page and for a page deep in the queue, through
Django's test Client.

Beside it, in the same run: the same page built with Django's ``Paginator``
(COUNT + OFFSET), and the floor — the page's two data queries (rows and band
counts) as bare SQL on an open connection.

Goal: p95 at most 30 ms for both keyset pages.

The script creates a scratch database ``replayhub_bench_queue`` on the server of
``DATABASE_URL`` and drops it when done. It is a copy of one seeded with
``INSERT ... SELECT generate_series`` and kept on the server
(``replayhub_bench_seeded_review_queue_*``, seeded anew when the schema, this
script or the sizes change).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python benchmarks/review_queue.py [--replays 1000000]
            [--iterations 300]

Run it on a quiet machine: other processes competing for the CPU show up in
the p95.
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named queue.py: with its own folder first on sys.path it would
# shadow the standard library's queue module for everything imported below.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from datetime import timedelta  # noqa: E402

from benchmarks.support import (  # noqa: E402
    in_scratch_database,
    insert_generated,
    record,
    stats,
    timed,
)

SCRATCH_DB = "replayhub_bench_queue"
ROW = re.compile(r'<tr class="row" data-href="/replays/(\d+)/"')
GOAL_MS = 30.0
MODELS = ["gpt-5", "claude-opus-4", "gemini-2.5-pro", "o3"]
PROJECTS = 8
RUNNING = 50
REVIEWER = "bench"


def line(name: str, s: dict[str, float]) -> str:
    return (
        f"{name:<22} p50 {s['p50']:7.2f} ms  p95 {s['p95']:7.2f} ms  "
        f"min {s['min']:7.2f} ms  max {s['max']:8.2f} ms"
    )


def seed(replays: int, queued_window: int, running: int) -> dict:
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.utils import timezone

    from replayhub import roles
    from replayhub.models import Comparison, Project, Replay, Run
    from reviews.models import Claim

    projects = [
        Project.objects.create(slug=f"project-{i}", repo_path=f"/srv/p{i}.git")
        for i in range(PROJECTS)
    ]
    project_ids = "ARRAY[" + ",".join(str(p.pk) for p in projects) + "]::bigint[]"
    models = "ARRAY[" + ",".join(f"'{m}'" for m in MODELS) + "]"
    reviewer = User.objects.create_user(REVIEWER)
    reviewer.groups.add(Group.objects.get(name=roles.REVIEWER))
    runs = (replays + 1) // 2
    start = time.perf_counter()
    with connection.cursor() as cursor:
        insert_generated(
            cursor,
            Run,
            {
                "id": "g",
                "project_id": f"({project_ids})[1 + mod(g, {PROJECTS})]",
                "external_id": "'run-' || g",
                "title": "'Task ' || g || ': make the checkout accept coupons'",
                "prompt": "'Fix the failing checkout test.'",
                "provider": "'openai'",
                "model": f"({models})[1 + mod(g, {len(MODELS)})]",
                "original_commit": "md5(g::text) || 'abcdef01'",
                "imported_at": "now() - make_interval(secs => g * 60)",
            },
            f"generate_series(1, {runs}) AS g",
        )
        # Verdict mix: 40% identical, 25% equivalent, 20% divergent, 15%
        # inconclusive. The newest ``queued_window`` replays still await review
        # (older ones were decided); the newest ``running`` have no verdict yet.
        age = f"({replays} - g) * 30"  # seconds before now; 30 s apart
        verdict = (
            f"CASE WHEN g > {replays - running} THEN '' "
            "WHEN mod(g, 20) < 8 THEN 'identical' "
            "WHEN mod(g, 20) < 13 THEN 'equivalent' "
            "WHEN mod(g, 20) < 17 THEN 'divergent' ELSE 'inconclusive' END"
        )
        insert_generated(
            cursor,
            Replay,
            {
                "id": "g",
                "run_id": "(g + 1) / 2",
                "project_id": f"({project_ids})[1 + mod((g + 1) / 2, {PROJECTS})]",
                "status": "CASE WHEN v = '' THEN 'running' ELSE 'finished' END",
                "phase": "CASE WHEN v = '' THEN 'agent' ELSE 'done' END",
                "attempt": "1 + mod(g + 1, 2)",
                "verdict": "v",
                "reason_code": (
                    "CASE v WHEN 'identical' THEN 'same_tree' "
                    "WHEN 'equivalent' THEN 'tests_agree' "
                    "WHEN 'divergent' THEN 'replay_fails_tests' "
                    "WHEN 'inconclusive' THEN 'flaky_tests' ELSE '' END"
                ),
                "reason": "CASE WHEN v = '' THEN '' ELSE 'Seeded.' END",
                "review_band": (
                    f"CASE WHEN g <= {replays - queued_window} OR v = '' THEN NULL "
                    "WHEN v = 'equivalent' THEN 1 WHEN v = 'divergent' THEN 2 "
                    "WHEN v = 'inconclusive' THEN 3 END"
                ),
                "created_at": f"now() - make_interval(secs => {age} + 60)",
                "started_at": f"now() - make_interval(secs => {age} + 50)",
                "finished_at": (
                    "CASE WHEN v = '' THEN NULL "
                    f"ELSE now() - make_interval(secs => {age}) END"
                ),
            },
            # Built from integers and literals above, never from input.
            f"(SELECT g, {verdict} AS v FROM generate_series(1, {replays}) AS g) AS s",  # noqa: S608
        )
        insert_generated(
            cursor,
            Comparison,
            {
                "id": "g",
                "replay_id": "g",
                "identical": "mod(g, 20) < 8",
                "original_tree": "md5(g::text)",
                "replay_tree": "md5((g + 1)::text)",
                "diff_of_diffs": (
                    "'diff --git a/src/app.py b/src/app.py' || repeat(E'\\n+x', 40)"
                ),
                "files_changed": "1 + mod(g, 7)",
                "insertions": "mod(g * 7, 300)",
                "deletions": "mod(g * 3, 120)",
            },
            f"generate_series(1, {replays}) AS g WHERE g <= {replays - running}",
        )
        for table in ("replayhub_run", "replayhub_replay", "replayhub_comparison"):
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "  # noqa: S608
                f"(SELECT max(id) FROM {table}))"
            )
    # A few claims in the queue, so the claim join has rows to find.
    queued = list(
        Replay.objects.awaiting_review()
        .in_queue_order()
        .values_list("pk", flat=True)[:400:4]
    )
    expires = timezone.now() + timedelta(minutes=10)
    Claim.objects.bulk_create(
        Claim(replay_id=pk, reviewer=reviewer, expires_at=expires) for pk in queued
    )
    seeded = time.perf_counter() - start
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return {"reviewer": reviewer, "seconds": seeded}


def offset_queue(request):
    """The same queue page built the usual way: Paginator, COUNT and OFFSET."""
    from django.contrib.auth.decorators import permission_required
    from django.core.paginator import Paginator
    from django.shortcuts import render

    from replayhub import roles
    from reviews import queue_reads
    from reviews.forms import QueueFilterForm
    from reviews.views.queue import queue_context

    @permission_required(roles.VIEW_REPLAYS, raise_exception=True)
    def view(request):
        form = QueueFilterForm(request.GET)
        form.is_valid()
        filters = form.filters()
        rows = queue_reads.ordered(queue_reads.listing(filters), banded=filters.banded)
        page = Paginator(rows, queue_reads.PAGE_SIZE).get_page(request.GET.get("page"))
        context = queue_context(
            form=form, rows=list(page), next_cursor="", paged=page.number > 1
        )
        return render(request, "reviews/queue.html", context)

    return view(request)


def build_urlconf():
    from django.urls import path

    import replayhub.urls

    module = sys.modules[__name__]
    module.urlpatterns = [
        path("bench/offset/", offset_queue),
        *replayhub.urls.urlpatterns,
    ]
    return __name__


def measure(args, reviewer) -> int:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from reviews import queue_reads
    from reviews.forms import QueueFilterForm
    from reviews.queue_reads import Cursor

    # The queue's own rows (one a run: its newest replay awaiting review).
    form = QueueFilterForm({})
    form.is_valid()
    rows = queue_reads.ordered(queue_reads.listing(form.filters()), banded=True)
    queued = rows.count()
    size = queue_reads.PAGE_SIZE
    deep_index = int(queued * 0.9) // size * size
    deep_row = rows[deep_index - 1]
    cursor = Cursor.after_row(deep_row, banded=True).encode()
    deep_page = deep_index // size + 1
    client = Client()
    client.force_login(reviewer)

    pages = {
        "first": ("/", "/bench/offset/?page=1"),
        "deep": (f"/?after={cursor}", f"/bench/offset/?page={deep_page}"),
    }
    # Both ways must show the same rows, or the comparison means nothing.
    for name, (keyset_url, offset_url) in pages.items():
        a = ROW.findall(client.get(keyset_url).content.decode())
        b = ROW.findall(client.get(offset_url).content.decode())
        assert a == b and len(a) == size, f"{name}: keyset and offset pages differ"

    # The floor: the page's own data queries (rows and band counts), the exact
    # SQL the page sent, on an open connection: no middleware, no session, no
    # forms, no template.
    floors = {}
    for name, (keyset_url, _offset_url) in pages.items():
        with CaptureQueriesContext(connection) as sent:
            client.get(keyset_url)
        floors[name] = [
            q["sql"] for q in sent.captured_queries if '"replayhub_replay"' in q["sql"]
        ]

    def bare_sql(name):
        with connection.cursor() as c:
            for sql in floors[name]:
                c.execute(sql)
                c.fetchall()

    print(
        f"replays {args.replays:,}; awaiting review {queued:,}; page size {size}; "
        f"deep page = rows {deep_index + 1:,}-{deep_index + size:,} "
        f"(Paginator page {deep_page:,})"
    )
    for name, (keyset_url, offset_url) in pages.items():
        with CaptureQueriesContext(connection) as keyset_queries:
            client.get(keyset_url)
        with CaptureQueriesContext(connection) as offset_queries:
            client.get(offset_url)
        print(
            f"{name} page queries: keyset {len(keyset_queries)}, "
            f"Paginator {len(offset_queries)}"
        )

    failed = False
    for name, (keyset_url, offset_url) in pages.items():
        keyset_s = timed(lambda u=keyset_url: client.get(u), args.iterations)
        # One warm-up: the checks above have asked for this page twice already.
        offset_s = timed(
            lambda u=offset_url: client.get(u),
            args.paginator_iterations,
            warmup=1,
        )
        floor_s = timed(lambda n=name: bare_sql(n), args.iterations)
        keyset, offset, floor = stats(keyset_s), stats(offset_s), stats(floor_s)
        print(f"--- {name} page")
        print(line("keyset (this page)", keyset))
        print(line("Paginator COUNT+OFFSET", offset))
        print(line("floor (bare SQL)", floor))
        print(
            f"ratio Paginator/keyset p95 {offset['p95'] / keyset['p95']:.2f}x; "
            f"keyset/floor p95 {keyset['p95'] / floor['p95']:.2f}x; "
            f"goal keyset p95 <= {GOAL_MS:.0f} ms: "
            f"{'met' if keyset['p95'] <= GOAL_MS else 'MISSED'}"
        )
        failed |= keyset["p95"] > GOAL_MS
        judge = not args.quick
        record(
            "review_queue",
            f"queue page, {name}, {args.replays:,} replays",
            unit="ms",
            samples=[x * 1000 for x in keyset_s],
            floor="bare SQL of its queries",
            floor_samples=[x * 1000 for x in floor_s],
            goal=f"p95 <= {GOAL_MS:.0f} ms",
            holds=keyset["p95"] <= GOAL_MS if judge else None,
            p95=keyset["p95"],
        )
        record(
            "review_queue",
            f"queue page, {name}, with Paginator (COUNT+OFFSET)",
            unit="ms",
            samples=[x * 1000 for x in offset_s],
            floor="the keyset page (baseline)",
            floor_samples=[x * 1000 for x in keyset_s],
            goal="",
            holds=None,
            p95=offset["p95"],
        )
    return 1 if failed and not args.quick else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replays", type=int, default=1_000_000)
    parser.add_argument(
        "--queued-window",
        type=int,
        default=100_000,
        help="the newest N replays still await review (about 60%% of them queue)",
    )
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument(
        "--paginator-iterations",
        type=int,
        default=40,
        help="the Paginator pages take about a second each at depth",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the scratch database (to EXPLAIN)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, no goal")
    args = parser.parse_args()
    if args.quick:
        args.replays, args.queued_window = 3_000, 1_000
        args.iterations, args.paginator_iterations = 10, 2

    return in_scratch_database(
        SCRATCH_DB,
        "benchmarks/review_queue.py",
        lambda: run(args),
        keep=args.keep,
        seed=lambda: seeding(args),
        seed_key=f"{args.replays} {args.queued_window} {RUNNING}",
    )


def setup() -> None:
    import django
    from django.conf import settings

    django.setup()
    settings.ROOT_URLCONF = build_urlconf()
    settings.ALLOWED_HOSTS = ["testserver"]
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def seeding(args) -> None:
    """The seeded database, made once and kept on the server (see support)."""
    setup()
    seeded = seed(args.replays, args.queued_window, running=RUNNING)
    print(f"seeded {args.replays:,} replays in {seeded['seconds']:.1f} s")


def run(args) -> int:
    setup()
    from django.contrib.auth.models import User

    # Loaded as the WSGI server loads it (views imported, start-up objects
    # frozen out of the garbage collector's way).
    import replayhub.wsgi  # noqa: F401

    return measure(args, User.objects.get(username=REVIEWER))


if __name__ == "__main__":
    sys.exit(main())
