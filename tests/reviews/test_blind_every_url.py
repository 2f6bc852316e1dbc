"""Blind review over every URL: a reviewer who has not judged a blind replay
reads its verdict, its reason, another reviewer's decision or its gold answer
in no page, partial, export or API answer of the project.

The property walks the URLconf itself (``get_resolver().url_patterns``, into
every include), so a page added later is covered the day it is added. Each
pattern is filled with the ids of one world (below), then asked for with GET,
plain and as htmx (``HX-Request: true``), and again with the query strings
that filter by verdict, reason and project.

A view that never looks at a query string's key answers a query of such keys
exactly as it answers none: the walk notes which keys of ``request.GET`` (and
whether the query string as a whole) each page reads while it answers the
plain request, and asks again only for the queries that hold a key it read.
The others are judged on the plain answer, which is theirs.

How a leak is recognised without false alarms: the blind replay is the only
row of the world whose machine verdict is *divergent*, whose reason is
``replay_fails_reference_tests``, that another reviewer overturned to
*equivalent*, and that is gold. Nothing else in the world carries those words,
so wherever they appear they speak of that replay, once the legends that name
every verdict for everyone (a filter's options, the key help's list, a band of
the queue's counts that holds nothing) are taken out. A filter by verdict or
reason is a leak by membership too: the replay listed under some values of
the filter and not under others tells its verdict even with no word of it.

Counts over many replays (the trends, their exports) name every verdict in
their legends; what a reviewer who also reads them may see there is tested
in ``test_blind_everywhere.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.core.handlers.wsgi import WSGIRequest
from django.http.request import HttpHeaders
from django.test import Client
from django.utils import timezone

from replayhub.models import (
    Comparison,
    ImportJob,
    Phase,
    Replay,
    ReplayStatus,
    ReviewBand,
    Run,
    TestOutcome,
    TextReplay,
    TextSuite,
    WorkerCheck,
)
from reviews.models import Comment, GoldServing, Label, Review, ReviewPolicy
from reviews.services import review_decide
from reviews.together import gold, handoff
from reviews.trends.rollups import rollup_range
from tests.factories import make_project, make_replay, make_superuser, make_user
from tests.reviews.blindwalk import (
    EXCLUDED,
    EXTRA_QUERIES,
    LIMIT_FIRED,
    MUST_RENDER,
    REASON,
    REASON_CODE,
    REPLAY_ID,
    RUN_ID,
    SLUG,
    WHOLE,
    Answer,
    NotedEnviron,
    NotedQueryDict,
    Pattern,
    Reads,
    Unfillable,
    fill,
    filter_queries,
    mentions,
    patterns,
    said,
    secrets_in,
)

pytestmark = pytest.mark.django_db


# Ids no other row of the world gets, so a reference to the replay is exact.
@dataclass
class World:
    scenario: str
    viewer: User
    replay: Replay
    values: dict[str, object] = field(default_factory=dict)


def _blind_replay(project, *, band: int | None) -> Replay:
    run = Run.objects.create(
        pk=RUN_ID,
        project=project,
        external_id="blindfold-run",
        title="Add a retry to the webhook sender",
        prompt="Add a retry to the webhook sender.",
        provider="openai",
        model="gpt-5",
        original_commit="a" * 40,
    )
    now = timezone.now()
    replay = Replay.objects.create(
        pk=REPLAY_ID,
        run=run,
        project=project,
        attempt=1,
        status=ReplayStatus.FINISHED,
        phase=Phase.DONE,
        verdict="divergent",
        reason_code=REASON_CODE,
        reason=REASON,
        review_band=band,
        evidence={
            "checks": [
                {
                    "name": "test_gate",
                    "outcome": "fail",
                    "evidence_class": "independently_executed",
                    "detail": REASON,
                }
            ],
            # The agent ran out of time: the line that says so tells the
            # reason as well as the reason's own words do.
            "agent": {
                "exit_code": None,
                "duration_s": 8.0,
                "timed_out": True,
                "limit_fired": LIMIT_FIRED,
            },
            "warnings": [],
        },
        provenance={"reproducible": True, "warnings": []},
        started_at=now - timedelta(minutes=50),
        finished_at=now - timedelta(minutes=45),
    )
    Comparison.objects.create(
        replay=replay,
        identical=False,
        original_tree="e" * 40,
        replay_tree="f" * 40,
        diff_of_diffs="diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n"
        "@@ -1 +1 @@\n-x = 1\n+x = 2\n",
        files_changed=1,
        insertions=1,
        deletions=1,
    )
    for tree in ("original", "replay"):
        TestOutcome.objects.create(
            replay=replay, tree=tree, attempt=1, ran=True, passed=True, exit_code=0
        )
    return replay


def build_world(scenario: str) -> World:
    """One blind replay in ``scenario``, among replays the viewer may read.

    ``queued``: fresh, in its verdict's band, assigned to the viewer.
    ``decided``: another reviewer overturned it, which the policy sends to a
    second reviewer; an admin made it gold and a third reviewer was checked
    against it. ``served``: as decided, and now served to the viewer as gold.
    """
    admin = make_superuser("root")
    viewer = make_user("vera", "reviewer")
    first = make_user("rolf", "reviewer")
    third = make_user("tess", "reviewer")
    project = make_project(SLUG)
    ReviewPolicy.objects.create(
        project=project, blind=True, second_on_verdicts=["equivalent"]
    )
    band = ReviewBand.DIVERGENT if scenario == "queued" else None
    replay = _blind_replay(project, band=band)
    # The rest of the world: no other divergent or equivalent replay, none
    # with the blind replay's reason, no other gold item.
    other = make_project("openbook")
    seen = make_replay(verdict="inconclusive", project=other)
    make_replay(verdict="identical", project=other, queued=False)
    judged = make_replay(verdict="inconclusive", project=project)
    review_decide(replay=judged, reviewer=viewer, decision="confirm", note="")
    review_decide(replay=seen, reviewer=first, decision="confirm", note="")
    Comment.objects.create(
        replay=replay,
        author=first,
        target="dod",
        path="app.py",
        side="new",
        line_start=1,
        line_end=1,
        excerpt="x = 2",
        body="@vera line one changed twice",
    )
    if scenario == "queued":
        handoff.claim_reassign(replay=replay, actor=admin, to=viewer)
    else:
        Replay.objects.filter(pk=replay.pk).update(review_band=ReviewBand.DIVERGENT)
        review_decide(
            replay=replay,
            reviewer=first,
            decision="overturn",
            verdict_after="equivalent",
            note="both pass",
        )
        item = gold.gold_mark(replay=replay, actor=admin)
        serving = GoldServing.objects.create(gold=item, reviewer=third)
        gold.gold_judge(serving=serving, decision="confirm", verdict_after=None)
    if scenario == "served":
        GoldServing.objects.create(gold=item, reviewer=viewer)
    # The nights' counts, as the trends read them.
    rollup_range(since=timezone.localdate() - timedelta(days=3))
    replay.refresh_from_db()
    return World(scenario=scenario, viewer=viewer, replay=replay, values=_ids(replay))


def _ids(replay: Replay) -> dict[str, object]:
    """A value for every argument of every URL pattern, by its name: the
    blind replay's own rows where the argument names one."""
    project = replay.project
    comment = Comment.objects.get(replay=replay, parent__isnull=True)
    review = Review.objects.filter(replay=replay).order_by("pk").first()
    text_replay = TextReplay.objects.create(
        run=replay.run, project=project, target_provider="p", target_model="m"
    )
    job = ImportJob.objects.create(
        project=project,
        filename="runs.jsonl",
        size_bytes=10,
        path="/nonexistent",
        status="done",
    )
    return {
        "replay_id": replay.pk,
        "run_id": replay.run_id,
        "slug": SLUG,
        "comment_id": comment.pk,
        "review_id": review.pk if review else 0,
        "text_replay_id": text_replay.pk,
        "suite_id": TextSuite.objects.create(project=project, target="p:m").pk,
        "check_id": WorkerCheck.objects.create().pk,
        "job_id": job.pk,
        "kind": "dod",
        # The commit gate's: the original commit of the blind replay's run.
        "sha": replay.run.original_commit,
        # A provider's page: no verdict on it, and no reviewer may open it.
        "name": "acme",
        "index": 0,
        # A label's pages: its settings, which no reviewer may open.
        "label_id": Label.objects.create(
            project=project, name="would merge", kind="yes_no"
        ).pk,
        # The admin's patterns (the reviewer is no staff: each answers with
        # the admin's login page, asked for all the same).
        "app_label": "replayhub",
        "object_id": str(replay.pk),
        "id": replay.pk,
        "content_type_id": ContentType.objects.get_for_model(Replay).pk,
        "url": "no-such-page/",
    }


@pytest.fixture
def noted_requests(monkeypatch):
    """Requests whose query string notes how it is read."""
    init = WSGIRequest.__init__

    def __init__(self, environ):
        init(self, NotedEnviron(environ))

    def get(self):
        if "_noted_get" not in self.__dict__:
            raw = dict.get(self.environ, "QUERY_STRING", "")
            self.__dict__["_noted_get"] = NotedQueryDict(
                raw.encode("latin-1"), encoding=self._encoding
            )
        return self.__dict__["_noted_get"]

    def set_get(self, value):
        self.__dict__["_noted_get"] = value

    def headers(self):
        # The headers take the environ's HTTP_ and CONTENT_ keys only, never
        # the query string.
        if "_noted_headers" not in self.__dict__:
            self.__dict__["_noted_headers"] = HttpHeaders(
                dict(self.META.items_unnoted())
            )
        return self.__dict__["_noted_headers"]

    monkeypatch.setattr(WSGIRequest, "__init__", __init__)
    monkeypatch.setattr(WSGIRequest, "GET", property(get, set_get))
    monkeypatch.setattr(WSGIRequest, "headers", property(headers))


@dataclass
class Walk:
    """The requests of one walk as the viewer, and what they told."""

    client: Client
    leaks: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    rendered: set[str] = field(default_factory=set)
    current: str = ""
    # The current page's plain answer and the keys it read, per htmx.
    plain: dict[bool, Answer] = field(default_factory=dict)
    reads: dict[bool, set[str]] = field(default_factory=dict)
    # Per page, the keys its plain answers read; the requests sent and the
    # queries answered by the plain answer (their keys unread).
    read: dict[str, set[str]] = field(default_factory=dict)
    sent: int = 0
    unread: int = 0

    def answer(self, path: str, query: dict[str, str], htmx: bool) -> Answer | None:
        """The answer to GET ``path`` with ``query``: the page's plain answer
        when the plain request read none of the query's keys (the view then
        runs as it ran for it), else a request of its own."""
        if (
            query
            and WHOLE not in self.reads[htmx]
            and not self.reads[htmx] & set(query)
        ):
            self.unread += 1
            return self.plain[htmx]
        url = f"{path}?{urlencode(query)}" if query else path
        headers = {"HX-Request": "true"} if htmx else {}
        self.sent += 1
        Reads.listening = set() if not query else None
        try:
            answer = Answer.of(self.client.get(url, headers=headers))
        except Exception as exc:  # one broken page must not hide the others
            self.broken.append(f"{url} (htmx={htmx}): {type(exc).__name__}: {exc}")
            answer = None
        finally:
            noted, Reads.listening = Reads.listening, None
        if not query:
            self.reads[htmx] = {WHOLE} if answer is None or noted is None else noted
            self.read.setdefault(self.current, set()).update(self.reads[htmx])
            if answer is not None:
                self.plain[htmx] = answer
        return answer

    def ask(self, path: str, query: dict[str, str], htmx: bool) -> str:
        """GET ``path`` with ``query``; what it said (legends, echoes out),
        every secret in it counted as a leak."""
        url = f"{path}?{urlencode(query)}" if query else path
        answer = self.answer(path, query, htmx)
        if answer is None:
            return ""
        if 200 <= answer.status < 300:
            self.rendered.add(self.current)
        if answer.status >= 500:
            self.broken.append(f"{url} (htmx={htmx}): {answer.status}")
        text = said(answer, tuple(query.values()))
        if found := secrets_in(text):
            self.leaks.append(f"{url} (htmx={htmx}): {found}")
        return text

    def one(self, pattern: Pattern, path: str) -> None:
        self.current = pattern.name
        plain, partial = (self.ask(path, {}, htmx) for htmx in (False, True))
        if pattern.route.startswith("admin/"):
            # Staff only: each answers the admin's login page (above).
            return
        for query in EXTRA_QUERIES:
            self.ask(path, query, False)
        # The filters as htmx asks for them too, where the view answers htmx
        # with something else than its page (the same page differs at most
        # in its CSRF token, never in length).
        ways = (False, True) if len(plain) != len(partial) else (False,)
        for name, queries in filter_queries().items():
            self.partition(path, name, queries, ways)

    def partition(
        self,
        path: str,
        name: str,
        queries: list[dict[str, str]],
        ways: tuple[bool, ...],
    ):
        """A filter lists the replay under all of its values or under none."""
        key = name.split("+")[0]
        for htmx in ways:
            under = {
                query[key]
                for query in queries
                if mentions(self.ask(path, query, htmx), REPLAY_ID)
            }
            if under and len(under) < len(queries):
                self.leaks.append(
                    f"{path} by {name} (htmx={htmx}) lists the replay only "
                    f"under {sorted(under)}"
                )


# --- the property ---------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["queued", "decided", "served"])
def test_no_url_tells_a_blind_reviewer_the_verdict(client, noted_requests, scenario):
    world = build_world(scenario)
    walk = Walk(client)
    unfilled: list[str] = []
    walked = 0
    for pattern in patterns():
        if pattern.route in EXCLUDED:
            continue
        try:
            path = fill(pattern, world.values)
        except Unfillable as exc:
            unfilled.append(f"{pattern.route} ({pattern.name or 'unnamed'}): {exc}")
            continue
        walked += 1
        # A page may end the session (the logout view): log in again each time.
        client.force_login(world.viewer)
        walk.one(pattern, path)
    assert not unfilled, "URL patterns this test cannot fill:\n" + "\n".join(unfilled)
    assert not walk.leaks, "\n".join(walk.leaks)
    assert not walk.broken, "\n".join(walk.broken)
    assert not MUST_RENDER - walk.rendered, MUST_RENDER - walk.rendered
    # The admin's patterns and every include were walked, not only the top;
    # an exclusion names a pattern that still exists.
    routes = [pattern.route for pattern in patterns()]
    assert set(EXCLUDED) <= set(routes), set(EXCLUDED) - set(routes)
    assert walked == len(routes) - len(EXCLUDED) > 200
    # The notes hear what the views read: the pages that filter by verdict,
    # reason and project read those keys, so their filters were asked for.
    assert {"verdict", "reason", "project"} <= walk.read["reviews:queue"]
    assert {"verdict", "reason", "q"} <= walk.read["reviews:search"]
    assert {"verdict", "project"} <= walk.read["reviews:done"]
    print(f"{walk.sent} requests; {walk.unread} queries of keys their page never read")


# --- the queue's rows and counts, side by side ----------------------------------


def _cells(html: str, replay_id: int) -> list[str]:
    """The cells of the queue row that links to the replay, tags stripped."""
    row = re.search(
        rf'<tr class="row" data-href="/replays/{replay_id}/">(.*?)</tr>', html, re.S
    )
    assert row, f"no row for #{replay_id}"
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row[1], re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", cell).split()) for cell in cells]


def test_blind_queue_rows_differ_in_no_column_that_tells_a_verdict(client):
    """Blind rows of a timed-out replay (no diff of diffs), a divergent and an
    equivalent one read alike in the verdict, reason and diff-of-diffs
    columns; the counts above them count them all."""
    viewer = make_user("vera", "reviewer")
    project = make_project(SLUG)
    ReviewPolicy.objects.create(project=project, blind=True)
    timed_out = make_replay(
        verdict="inconclusive",
        project=project,
        reason_code="timeout",
        with_comparison=False,
    )
    divergent = make_replay(verdict="divergent", project=project)
    equivalent = make_replay(verdict="equivalent", project=project)
    client.force_login(viewer)

    html = client.get("/").content.decode()

    rows = {r.pk: _cells(html, r.pk) for r in (timed_out, divergent, equivalent)}
    verdict, reason, diff = 0, 1, 6
    for column in (verdict, reason, diff):
        assert len({cells[column] for cells in rows.values()}) == 1, rows
    assert rows[timed_out.pk][diff] == "hidden"
    # The counts: all three await review, none of them in a verdict's band.
    assert "3 awaiting review" in html
    assert re.search(r"<b>3</b> under blind review", html), html
    assert "0 awaiting review" not in html
