"""The trends page's text tier option: mean similarity per night per model."""

from __future__ import annotations

from datetime import UTC, datetime

from django.urls import reverse

from replayhub.models import TextReplay
from tests.factories import make_text_run


def answer(run, target: str, similarity: float | None, day: int, error: str = ""):
    provider, model = target.split(":")
    return TextReplay.objects.create(
        run=run,
        project=run.project,
        target_provider=provider,
        target_model=model,
        status="finished",
        similarity=similarity,
        error=error,
        finished_at=datetime(2026, 11, day, 12, tzinfo=UTC),
    )


def test_the_trends_page_shows_mean_similarity_per_night_per_target(client, lead):
    run = make_text_run()
    answer(run, "gpt:gpt-test", 0.5, 20)
    answer(run, "gpt:gpt-test", 1.0, 20)
    answer(run, "gpt:gpt-test", None, 20, error="HTTP 500")
    answer(run, "claude:claude-test", 0.25, 20)
    answer(run, "gpt:gpt-test", 0.125, 21)
    answer(run, "gpt:gpt-test", 0.9, 1)  # before the nights shown
    client.force_login(lead)
    url = reverse("reviews:trends") + "?since=2026-11-15&until=2026-11-30"

    plain = client.get(url).content.decode()
    shown = client.get(url + "&tier=text").content.decode()

    assert "table-text-similarity" not in plain
    assert "table-text-similarity" in shown
    assert "0.750 (2)" in shown  # gpt on the 20th; the failed call not counted
    assert "0.250 (1)" in shown and "0.125 (1)" in shown
    assert "0.900" not in shown
    assert shown.index("2026-11-20") < shown.index("2026-11-21")


def test_the_model_filter_matches_part_of_the_runs_model_in_any_case(client, lead):
    run = make_text_run()
    answer(run, "gpt:gpt-test", 0.5, 20)
    client.force_login(lead)
    url = reverse("reviews:trends") + "?since=2026-11-15&until=2026-11-30&tier=text"

    part = client.get(url + f"&model={run.model[:3].upper()}").content.decode()
    other = client.get(url + "&model=no-such-model").content.decode()

    # As the queue's and search's Model filter: a part of the name, any case.
    assert "0.500 (1)" in part
    assert "0.500 (1)" not in other
