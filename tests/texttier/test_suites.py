"""Suites: every matching run replayed as text, past failures, with progress
and a summary; the suite page."""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from replayhub.models import TextReplay, TextSuite
from replayhub.texttier import services
from replayhub.texttier.suites import Result, summarize
from tests.factories import make_text_run


def test_the_summary_counts_and_averages():
    summary = summarize(
        [
            Result(similarity=1.0, score=9),
            Result(similarity=0.5, score=4),
            Result(similarity=0.0, score=8),
            Result(similarity=0.25),
            Result(failed=True),
            Result(skipped=True),
        ]
    )
    assert summary.as_dict() == {
        "total": 6,
        "replayed": 4,
        "skipped": 1,
        "failed": 1,
        "mean_similarity": pytest.approx(1.75 / 4),
        "mean_equivalence": pytest.approx(7.0),
        "scores_high": 2,
        "scores_low": 1,
    }


def test_an_empty_suite_has_no_means():
    summary = summarize([])
    assert (summary.total, summary.mean_similarity, summary.mean_equivalence) == (
        0,
        None,
        None,
    )


def suite(*args: str) -> str:
    out = io.StringIO()
    call_command("replay_suite", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def runs(db):
    started = datetime(2026, 11, 20, tzinfo=UTC)
    return {
        "a": make_text_run(external_id="a", started_at=started, output="a retry"),
        "b": make_text_run(
            external_id="b",
            started_at=started.replace(day=25),
            output="add a retry to the webhook sender",
        ),
        "c": make_text_run(external_id="c", started_at=started, model="other-model"),
        "failed": make_text_run(
            external_id="failed", started_at=started, original_tests_passed=False
        ),
        "empty": make_text_run(external_id="empty", started_at=started, output=""),
    }


def test_a_suite_replays_every_matching_run_past_failures(
    runs, providers, standin, text_settings
):
    # The first answer is the echo; the second call fails three times (429s
    # are retried, so the last status decides); the judge answers twice.
    standin.replies = [
        "add a retry to the webhook sender",
        '{"score": 9, "rationale": "same"}',
    ]

    out = suite(
        "--project",
        "shop",
        "--model",
        "claude-sonnet",
        "--target",
        "gpt:gpt-test",
        "--judge",
        "claude:claude-test",
    )

    # Newest first: b, then a and empty (started the same day).
    lines = out.splitlines()
    assert lines[0] == "[1/3] b: similarity 1.000, judge 9/10"
    assert "skipped (no recorded output to compare with)" in out
    assert "[3/3]" in out
    suite_row = TextSuite.objects.get()
    assert (suite_row.total, suite_row.replayed, suite_row.skipped) == (3, 2, 1)
    assert "3 runs — 2 replayed, 1 skipped, 0 failed" in out
    assert "not reproductions" in out
    assert TextReplay.objects.filter(suite=suite_row).count() == 2
    # c is another model's run and "failed" failed its tests: not selected.
    assert not TextReplay.objects.filter(run__external_id__in=["c", "failed"])


def test_a_failed_call_is_counted_and_the_suite_goes_on(
    runs, providers, standin, text_settings
):
    standin.failures = [500, 500, 500]

    result = json.loads(
        suite(
            "--project",
            "shop",
            "--target",
            "gpt:gpt-test",
            "--include-failed",
            "--since",
            "2026-11-21",
            "--json",
        )
    )
    assert result["total"] == 1  # only b started on or after the 21st

    result = json.loads(
        suite(
            "--project",
            "shop",
            "--target",
            "gpt:gpt-test",
            "--include-failed",
            "--max",
            "2",
            "--json",
        )
    )
    # b, then "empty": the newest two; "empty" has nothing to compare with.
    assert (result["total"], result["replayed"], result["skipped"]) == (2, 1, 1)

    standin.failures = [500, 500, 500]
    result = json.loads(
        suite(
            "--project",
            "shop",
            "--target",
            "gpt:gpt-test",
            "--include-failed",
            "--json",
        )
    )
    assert result["total"] == 5
    assert result["failed"] == 1 and result["skipped"] == 1
    assert result["replayed"] == 3
    assert result["mean_similarity"] is not None
    failed = TextReplay.objects.filter(suite_id=result["suite"]).exclude(error="")
    assert failed.count() == 1


def test_bad_suite_arguments_are_refused_in_one_line(runs, providers):
    with pytest.raises(CommandError, match="no project 'nope'"):
        suite("--project", "nope", "--target", "gpt:gpt-test")
    with pytest.raises(CommandError, match="is not a date"):
        suite("--project", "shop", "--target", "gpt:gpt-test", "--since", "soon")
    with pytest.raises(CommandError, match="no provider named 'x'"):
        suite("--project", "shop", "--target", "x:y")
    assert not TextSuite.objects.exists()


def test_the_suite_page_lists_suites_with_their_summaries(
    client, reviewer, runs, providers, standin, text_settings
):
    suite("--project", "shop", "--target", "gpt:gpt-test", "--max", "1")
    client.force_login(reviewer)

    page = client.get(reverse("reviews:text_suites")).content.decode()

    assert "gpt:gpt-test" in page and "not reproductions" in page
    assert "1.000" in page
    detail = client.get(
        reverse("reviews:text_suite_detail", args=[TextSuite.objects.get().pk])
    ).content.decode()
    assert "1 run: 1 replayed, 0 skipped, 0 failed" in detail
    assert f'href="/runs/{runs["b"].pk}/"' in detail


def test_the_filters_a_suite_stored_read_back_as_they_were():
    filters = services.SuiteFilters(
        model="m", since=date(2026, 11, 21), include_failed=True, max=2
    )
    assert services.SuiteFilters.from_json(filters.as_json()) == filters
    assert services.SuiteFilters.from_json({}) == services.SuiteFilters()
    # A stored value of the wrong shape is no filter, not a crash.
    assert services.SuiteFilters.from_json({"max": "9", "since": 3}) == (
        services.SuiteFilters()
    )


def test_a_suite_run_again_selects_its_runs_once_and_its_last_row_finishes_it(
    runs, providers, standin, text_settings
):
    suite("--project", "shop", "--target", "gpt:gpt-test", "--include-failed")
    first = TextSuite.objects.get()

    again = services.suite_again(suite=first)

    assert (again.total, again.finished_at) == (0, None)
    assert (again.target, again.filters) == (first.target, first.filters)
    # What a worker does, delivered twice: the runs are selected once.
    services.suite_dispatch(suite_id=again.pk)
    services.suite_dispatch(suite_id=again.pk)
    rows = TextReplay.objects.filter(suite=again).order_by("pk")
    assert rows.count() == first.replayed + first.failed == 4
    again.refresh_from_db()
    assert (again.total, again.skipped, again.finished_at) == (5, 1, None)
    for row in rows:
        assert again.finished_at is None
        services.text_replay_execute(text_replay_id=row.pk)
        again.refresh_from_db()
    assert again.finished_at is not None
    assert (again.total, again.replayed, again.skipped, again.failed) == (
        first.total,
        first.replayed,
        first.skipped,
        first.failed,
    )
    assert again.mean_similarity == pytest.approx(first.mean_similarity)


def test_a_suite_with_nothing_to_replay_finishes_when_it_starts(
    runs, providers, text_settings
):
    empty = services.suite_create(
        project=runs["a"].project,
        target=services.Target.parse("gpt:gpt-test"),
        filters=services.SuiteFilters(model="no-such-model"),
    )

    services.suite_dispatch(suite_id=empty.pk)

    empty.refresh_from_db()
    assert empty.finished_at is not None and empty.total == 0
