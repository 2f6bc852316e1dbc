"""The review queue page: band order, filters, keyset pages, cheap queries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from replayhub.models import Replay, ReplayStatus, ReviewBand
from reviews import queue_reads
from reviews.models import Claim, ReviewPolicy
from reviews.queue_reads import Cursor, QueueFilters
from reviews.services import claim_next
from tests.factories import make_project, make_replay

QUEUE = reverse("reviews:queue")


def listed(response) -> list[int]:
    return [row["id"] for row in response.context["rows"]]


@pytest.fixture
def as_reviewer(client, reviewer):
    client.force_login(reviewer)
    return client


def test_bands_come_in_priority_order_and_newest_first_inside_a_band(as_reviewer):
    old_divergent = make_replay(verdict="divergent", finished_ago=timedelta(hours=5))
    exhausted = make_replay(verdict="inconclusive", finished_ago=timedelta(minutes=1))
    new_divergent = make_replay(verdict="divergent", finished_ago=timedelta(hours=1))
    old_equivalent = make_replay(verdict="equivalent", finished_ago=timedelta(days=3))
    new_equivalent = make_replay(verdict="equivalent", finished_ago=timedelta(hours=2))

    response = as_reviewer.get(QUEUE)

    assert listed(response) == [
        new_equivalent.pk,
        old_equivalent.pk,
        new_divergent.pk,
        old_divergent.pk,
        exhausted.pk,
    ]


def test_identical_and_retryable_replays_are_not_queued(as_reviewer):
    make_replay(verdict="identical")
    make_replay(verdict="inconclusive", queued=False)
    queued = make_replay(verdict="divergent")

    assert listed(as_reviewer.get(QUEUE)) == [queued.pk]


def test_a_verdict_filter_reaches_replays_the_queue_leaves_out(as_reviewer):
    identical = make_replay(verdict="identical")
    retryable = make_replay(verdict="inconclusive", queued=False)
    make_replay(verdict="divergent")

    assert listed(as_reviewer.get(QUEUE, {"verdict": "identical"})) == [identical.pk]
    assert listed(as_reviewer.get(QUEUE, {"verdict": "inconclusive"})) == [retryable.pk]


def test_filters_combine(as_reviewer):
    shop, billing = make_project("shop"), make_project("billing")
    wanted = make_replay(verdict="divergent", project=billing, model="claude-x")
    make_replay(verdict="divergent", project=shop, model="claude-x")
    make_replay(verdict="divergent", project=billing, model="gpt-5")
    make_replay(
        verdict="divergent",
        project=billing,
        model="claude-x",
        reason_code="disallowed_paths",
    )

    response = as_reviewer.get(
        QUEUE,
        {"project": "billing", "model": "claude-x", "reason": "replay_fails_tests"},
    )

    assert listed(response) == [wanted.pk]


def test_filters_survive_in_the_page_links(as_reviewer, monkeypatch):
    for minutes in range(3):
        make_replay(verdict="divergent", finished_ago=timedelta(minutes=minutes + 1))
    monkeypatch.setattr(queue_reads, "PAGE_SIZE", 2)

    html = as_reviewer.get(QUEUE, {"reason": "replay_fails_tests"}).content.decode()

    assert "reason=replay_fails_tests&amp;after=" in html


def test_an_unknown_filter_value_is_reported_and_ignored(as_reviewer):
    replay = make_replay(verdict="divergent")

    response = as_reviewer.get(QUEUE, {"verdict": "great", "project": "nope"})

    assert response.status_code == 200
    assert listed(response) == [replay.pk]
    page = response.content.decode()
    assert "Select a valid choice" not in page
    # Each in the queue's words, on a line of its own.
    assert (
        '<p class="error">No project is called “nope”; showing every project.</p>'
        in page
    )
    assert (
        '<p class="error">“great” is not a verdict; showing the queue by band.</p>'
        in page
    )


def test_a_long_unknown_value_is_said_back_cut_to_one_line(as_reviewer):
    asked = "x" * 500 + "\n<b>y</b>"

    page = as_reviewer.get(QUEUE, {"reason": asked}).content.decode()

    said = f"“{'x' * 39}…” is not a reason; showing every reason."
    assert f'<p class="error">{said}</p>' in page
    assert "<b>y</b>" not in page


def walk(filters: QueueFilters, size: int) -> list[int]:
    seen, cursor = [], None
    while True:
        result = queue_reads.page(filters, after=cursor, size=size)
        seen += [row["id"] for row in result.rows]
        if result.next_cursor is None:
            return seen
        cursor = Cursor.decode(result.next_cursor.encode())


def test_keyset_pages_cover_the_queue_exactly_once_across_bands_and_ties(db):
    same_moment = timedelta(minutes=30)
    made = [
        make_replay(verdict=verdict, finished_ago=ago)
        for verdict, ago in [
            ("equivalent", same_moment),
            ("equivalent", same_moment),
            ("equivalent", same_moment),
            ("equivalent", timedelta(hours=2)),
            ("divergent", same_moment),
            ("divergent", timedelta(days=1)),
            ("inconclusive", timedelta(seconds=5)),
        ]
    ]
    # Ties on finished_at must be broken by id, or a page boundary inside the
    # tie would repeat or drop a row.
    moment = timezone.now() - same_moment
    Replay.objects.filter(pk__in=[r.pk for r in made[:3]] + [made[4].pk]).update(
        finished_at=moment
    )
    expected = list(
        Replay.objects.awaiting_review().in_queue_order().values_list("pk", flat=True)
    )

    for size in (1, 2, 3, 5, 50):
        assert walk(QueueFilters(), size) == expected


def test_keyset_pages_in_verdict_order(db):
    made = [
        make_replay(verdict="identical", finished_ago=timedelta(minutes=m))
        for m in (5, 1, 9, 3)
    ]
    expected = [r.pk for r in sorted(made, key=lambda r: r.finished_at, reverse=True)]

    assert walk(QueueFilters(verdict="identical"), 3) == expected


def test_the_older_link_leads_to_the_next_page(as_reviewer, monkeypatch):
    replays = [
        make_replay(verdict="divergent", finished_ago=timedelta(minutes=m))
        for m in (1, 2, 3)
    ]
    monkeypatch.setattr(queue_reads, "PAGE_SIZE", 2)

    first = as_reviewer.get(QUEUE)
    second = as_reviewer.get(QUEUE, {"after": first.context["next_cursor"]})

    assert listed(first) == [replays[0].pk, replays[1].pk]
    assert listed(second) == [replays[2].pk]
    assert second.context["next_cursor"] == ""
    assert b"First page" in second.content


def test_a_forged_cursor_shows_the_first_page(as_reviewer):
    replay = make_replay(verdict="divergent")

    response = as_reviewer.get(QUEUE, {"after": "1.99999999999999999999.x"})

    assert listed(response) == [replay.pk]
    assert b"That page link is not valid." in response.content


@pytest.mark.parametrize("text", ["", "x", "1.2", "1.2.3.4", "-1.5.5", "a.1.1"])
def test_cursor_decoding_refuses_anything_it_did_not_encode(text):
    with pytest.raises(ValueError):
        Cursor.decode(text)


def test_a_cursor_survives_its_text_form_to_the_microsecond():
    when = timezone.now().replace(microsecond=123457)
    cursor = Cursor(band=2, finished_at=when, id=42)
    assert Cursor.decode(cursor.encode()) == cursor


def test_band_counts_stop_at_the_cap(as_reviewer, monkeypatch):
    monkeypatch.setattr(queue_reads, "COUNT_CAP", 2)
    for _ in range(4):
        make_replay(verdict="equivalent")
    make_replay(verdict="divergent")

    assert queue_reads.band_counts(QueueFilters(), cap=2) == {1: 3, 2: 1}
    html = as_reviewer.get(QUEUE).content.decode()
    assert "<b>2+</b> Tests or verifier passed, diff diverged" in html
    assert "more than 2 awaiting review" in html


def test_band_counts_follow_the_filters(as_reviewer):
    billing = make_project("billing")
    make_replay(verdict="equivalent")
    make_replay(verdict="equivalent", project=billing)
    make_replay(verdict="divergent", project=billing)

    everything = as_reviewer.get(QUEUE).context["bands"]
    filtered = as_reviewer.get(QUEUE, {"project": "billing"}).context["bands"]

    # The first band, runs that sometimes diverge, has none here.
    assert [n for _band, _label, n in everything] == [0, 2, 1, 0, 0]
    assert [n for _band, _label, n in filtered] == [0, 1, 1, 0, 0]


def test_a_row_shows_what_a_reviewer_triages_by(as_reviewer, lead):
    replay = make_replay(verdict="divergent", title="Add <b>coupons</b>", model="m-7")
    Claim.objects.create(
        replay=replay,
        reviewer=lead,
        expires_at=timezone.now() + timedelta(minutes=8),
    )

    html = as_reviewer.get(QUEUE).content.decode()

    assert 'class="badge v-divergent"' in html
    assert "Replay fails tests" in html
    assert "Add &lt;b&gt;coupons&lt;/b&gt;" in html
    assert '<code class="model" title="m-7">m-7</code>' in html
    assert '1 file</span> <span class="ins">+2</span>' in html
    # The lease left reads apart from the age column ("1h ago").
    assert ">leo · 7m left</span>" in html
    # The exact time is in the page's text, not only a tooltip.
    assert '<time datetime="' in html and "1h ago</time>" in html
    assert '<span class="row-detail">at ' in html
    assert f'href="{reverse("reviews:replay_detail", args=[replay.pk])}"' in html


def test_an_expired_claim_is_not_shown(as_reviewer, lead):
    replay = make_replay(verdict="divergent")
    Claim.objects.create(
        replay=replay, reviewer=lead, expires_at=timezone.now() - timedelta(seconds=1)
    )

    response = as_reviewer.get(QUEUE)

    assert [row["holder"] for row in response.context["rows"]] == [None]


def test_an_htmx_request_gets_only_the_results(as_reviewer):
    make_replay(verdict="divergent")

    response = as_reviewer.get(QUEUE, headers={"HX-Request": "true"})

    html = response.content.decode()
    assert html.lstrip().startswith('<section id="results"')
    assert "<html" not in html
    assert "HX-Request" in response["Vary"]


def test_the_queue_page_runs_a_fixed_number_of_queries(
    as_reviewer, django_assert_num_queries, monkeypatch
):
    for verdict in ["equivalent", "divergent", "inconclusive"] * 10:
        make_replay(verdict=verdict)
    monkeypatch.setattr(queue_reads, "PAGE_SIZE", 3)
    cursors = [None]
    for _ in range(3):
        response = as_reviewer.get(QUEUE, {"after": cursors[-1] or ""})
        cursors.append(response.context["next_cursor"])
    inside_band, across_bands = cursors[1], cursors[3]
    # Session, user, the user's and its groups' permissions, the role shown in
    # the header, the inbox badge, the project filter's options, the rows, the
    # band counts, the rows' unresolved comments, the blind projects, the
    # label filter's options, the reviewer's own decisions (my progress; none
    # here, so no night is read), the assignee filter's options, the count
    # of what is assigned to the reviewer, the rows' runs' queued replays and
    # the model names the Model filter suggests.
    with django_assert_num_queries(17):
        as_reviewer.get(QUEUE)
    with django_assert_num_queries(17):
        as_reviewer.get(QUEUE, {"after": inside_band})
    # A page that runs out of its band reads the next bands in one more query.
    with django_assert_num_queries(18):
        as_reviewer.get(QUEUE, {"after": across_bands})


def test_list_queries_never_count_the_table_nor_load_big_columns(as_reviewer):
    for verdict in ["equivalent", "divergent", "identical"] * 3:
        make_replay(verdict=verdict)

    with CaptureQueriesContext(connection) as captured:
        as_reviewer.get(QUEUE)
        as_reviewer.get(QUEUE, {"verdict": "identical"})

    sql = [q["sql"] for q in captured.captured_queries]
    for big in ["diff_of_diffs", "original_patch", "replay_patch", "agent_output"]:
        assert not any(big in s for s in sql), big
    assert not any('"prompt"' in s or '"raw"' in s or '"output"' in s for s in sql)
    # One count per page, of at most COUNT_CAP + 1 queue entries per band.
    # (The inbox badge counts one user's unread notices, the rows' open
    # comment threads are counted for the page's ids only, "assigned to
    # me" counts one user's live claims, and the rows' runs' queued replays
    # are counted for the page's runs only.)
    counts = [
        s
        for s in sql
        if "COUNT(" in s.upper()
        and "reviews_notice" not in s
        and "comment" not in s
        and 'FROM "reviews_claim"' not in s
        and '"run_id" IN' not in s
    ]
    assert len(counts) == 1
    assert counts[0].upper().count("LIMIT 1001") == len(ReviewBand.values)
    assert not any("OFFSET" in s.upper() for s in sql)


def test_the_running_page_polls_until_nothing_runs(as_reviewer, reviewer):
    replay = make_replay(verdict="divergent")
    busy = Replay.objects.create(
        run=replay.run,
        project=replay.project,
        status=ReplayStatus.RUNNING,
        phase="agent",
        started_at=timezone.now() - timedelta(seconds=90),
    )
    running_url = reverse("reviews:running")

    page = as_reviewer.get(running_url)
    assert page.status_code == 200
    assert b"Agent" in page.content and b"1m" in page.content
    assert b'hx-trigger="every 2s"' in page.content
    poll = as_reviewer.get(running_url, headers={"HX-Request": "true"})
    assert poll.status_code == 200

    Replay.objects.filter(pk=busy.pk).update(
        status=ReplayStatus.FINISHED,
        verdict="divergent",
        reason="done",
        phase="done",
    )
    done = as_reviewer.get(running_url, headers={"HX-Request": "true"})

    assert done.status_code == 286
    assert b"every 2s" not in done.content
    assert b"Nothing is waiting for a worker or running" in done.content


def test_a_run_replayed_on_two_nights_is_one_row_its_newest_with_a_note(
    as_reviewer, reviewer
):
    first_night = make_replay(verdict="equivalent", finished_ago=timedelta(days=1))
    second_night = make_replay(
        verdict="divergent", run=first_night.run, finished_ago=timedelta(hours=1)
    )
    other = make_replay(verdict="divergent", finished_ago=timedelta(hours=2))

    response = as_reviewer.get(QUEUE)
    html = response.content.decode()

    # One row per run: the newest replay stands for the run, in its own band.
    assert listed(response) == [second_night.pk, other.pk]
    assert [n for _band, _label, n in response.context["bands"]] == [0, 0, 2, 0, 0]
    assert "2 awaiting review" in html
    run_page = reverse("reviews:run_detail", args=[first_night.run_id])
    assert f'<a class="tag replays" href="{run_page}"' in html
    assert html.count(">2 replays</a>") == 1
    # A filter the newest leaves out shows the run's newest it selects.
    filtered = as_reviewer.get(QUEUE, {"reason": "tests_agree"})
    assert listed(filtered) == [first_night.pk]
    # Claim next hands out the row the queue shows, never the folded one
    # (though its band comes first).
    assert claim_next(reviewer=reviewer, gold_roll=1.0).pk == second_night.pk


def test_a_runs_older_replay_shows_once_its_newest_is_decided(as_reviewer):
    older = make_replay(verdict="divergent", finished_ago=timedelta(days=1))
    newer = make_replay(
        verdict="divergent", run=older.run, finished_ago=timedelta(hours=1)
    )
    Replay.objects.filter(pk=newer.pk).update(review_band=None)

    response = as_reviewer.get(QUEUE)

    assert listed(response) == [older.pk]
    assert "replays</a>" not in response.content.decode()


def test_the_band_of_code_runs_whose_tests_passed_does_not_claim_a_verifier(
    as_reviewer,
):
    # A code run has no verifier: its equivalent verdict says its tree differs
    # from the original's but passes the same tests.
    replay = make_replay(verdict="equivalent")
    assert replay.reason_code == "tests_agree" and replay.run.source != "rollout"

    html = as_reviewer.get(QUEUE).content.decode()

    head = html.split('<tr class="band-head band-1">')[1].split("</tr>")[0]
    assert ">Tests or verifier passed, diff diverged</th>" in head
    assert "<b>1</b> Tests or verifier passed, diff diverged" in html


def test_a_verdict_filter_on_a_blind_project_says_blind_review_hides_verdicts(
    as_reviewer,
):
    demo = make_project("demo")
    ReviewPolicy.objects.create(project=demo, blind=True)
    make_replay(verdict="divergent", project=demo)
    make_replay(verdict="divergent", project=make_project("open"))

    page = as_reviewer.get(QUEUE, {"project": "demo", "verdict": "divergent"})

    html = page.content.decode()
    assert listed(page) == []
    assert (
        "Verdicts are hidden under blind review on demo: this filter finds none "
        "of its replays." in html
    )
    assert "No finished replay matches" not in html
    # A project under no blind review still says its filter found nothing.
    empty = as_reviewer.get(QUEUE, {"project": "open", "verdict": "identical"})
    assert "No finished replay matches." in empty.content.decode()
