"""The tier policy: text before agentic, each within its own night budget."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from replayhub import services
from replayhub.models import (
    Budget,
    BudgetShare,
    Night,
    NightShare,
    Project,
    Replay,
    Run,
    TextReplay,
)
from replayhub.nights import tiers
from replayhub.nights.arithmetic import Amounts
from replayhub.texttier.services import text_replay_execute
from tests.factories import make_budget, make_night, make_runs, share_of

NOW = datetime(2026, 6, 1, 23, 0, tzinfo=UTC)  # inside a 22 → 6 UTC window
# What each run recorded: the text tier replays its prompt and compares outputs.
RECORDED = {
    "prompt": "add a retry to the webhook sender",
    "output": "add a retry to the webhook sender",
}
POLICY = tiers.TierPolicy(similarity_below=0.5, score_at_most=4)


@pytest.mark.parametrize(
    ("similarity", "score", "failed", "expected"),
    [
        (0.2, None, False, True),  # unlike the original: worth the sandbox
        (0.5, None, False, False),  # the threshold itself does not pass
        (0.9, 3, False, True),  # the judge scored it low
        (0.9, 5, False, False),
        (0.1, None, True, False),  # a failed call passes nothing on
        (None, None, False, False),
    ],
)
def test_what_the_text_tier_passes_on(similarity, score, failed, expected):
    assert (
        tiers.passes_on(
            similarity=similarity, score=score, failed=failed, policy=POLICY
        )
        is expected
    )


def test_an_escalated_category_goes_on_whatever_the_text_tier_found():
    policy = tiers.TierPolicy(similarity_below=0.5, escalate_categories=("security",))
    assert tiers.escalated("security", policy)
    assert not tiers.escalated("docs", policy) and not tiers.escalated(None, policy)


def test_the_text_bound_covers_both_calls_at_their_prices():
    bound = tiers.text_bound(
        prompt_bytes=1000,
        output_bytes=500,
        max_tokens=100,
        judged=True,
        judge_overhead_bytes=50,
        side_cap_bytes=800,
        target_price=(Decimal(2), Decimal(8)),
        judge_price=None,
    )
    # target 1000 in + 100 out; judge 50 + 800 + 500 + 800 in + 100 out
    assert bound.tokens == 1100 + 2150 + 100
    assert bound.cost_usd == (1000 * 2 + 100 * 8) / Decimal(1_000_000)


@pytest.fixture
def tiered_project(db, providers):
    """A nightly project whose text tier runs first, on a budget of its own."""
    project = Project.objects.create(
        slug="shop",
        repo_path="/srv/shop.git",
        agentic_enabled=True,
        time_limit_seconds=300,
        flake_reruns=0,
    )
    make_budget(
        project,
        window_start_hour=22,
        window_end_hour=6,
        timezone="UTC",
        text_enabled=True,
        text_target="gpt:gpt-test",
        text_similarity_below=0.5,
        shares={
            "agentic": {
                "max_replays": 2,
                "max_sandbox_minutes": 600,
                "max_tokens": 10_000_000,
                "max_cost_usd": 100,
            },
            "text": {"max_replays": 3, "max_tokens": 1_000_000, "max_cost_usd": 10},
        },
    )
    return project


def set_share(project, tier, **limits):
    BudgetShare.objects.filter(budget__project=project, tier=tier).update(**limits)


def execute_text_night(night):
    for row in TextReplay.objects.filter(night=night, status="queued").order_by("id"):
        text_replay_execute(text_replay_id=row.pk)


def test_agentic_replays_go_only_to_runs_the_text_tier_passed_on(
    tiered_project, standin, text_settings
):
    make_runs(tiered_project, 5, now=NOW, **RECORDED)

    first = services.night_run(project=tiered_project, now=NOW)

    night = Night.objects.get()
    text = share_of(night, "text")
    # The text tier first, within its own share; nothing has passed on yet.
    assert len(first.of("text").admitted) == 3 and first.of("text").deferred == 2
    assert text.reserved_replays == 3 and text.deferred == 2
    assert first.admitted == [] and not Replay.objects.exists()

    # run-0 and run-2 are answered unlike the original, run-1 alike.
    standin.replies = ["something else entirely", "", "nothing in common"]
    standin.replies[1] = "add a retry to the webhook sender"
    execute_text_night(night)
    text = share_of(night, "text")
    assert (text.reserved_replays, text.used_replays) == (3 - 3, 3)
    assert text.used_tokens > 0
    # Text replays spend nothing of the agentic share.
    assert share_of(night).amounts("used") == Amounts()

    second = services.night_run(project=tiered_project, now=NOW + timedelta(minutes=2))

    agentic = set(Replay.objects.values_list("run__external_id", flat=True))
    assert agentic == {"run-0", "run-2"}
    assert len(second.admitted) == 2
    # The text share is spent: the other two runs wait, counted.
    assert second.of("text").admitted == [] and second.of("text").deferred == 2
    agentic, text = share_of(night), share_of(night, "text")
    assert agentic.reserved_replays <= agentic.limit_replays
    assert text.reserved_replays + text.used_replays <= 3


def test_the_text_tier_never_reserves_past_its_token_budget(
    tiered_project, standin, text_settings
):
    make_runs(tiered_project, 4, now=NOW, **RECORDED)
    one = tiers.text_bound(
        prompt_bytes=len(b"add a retry to the webhook sender"),
        output_bytes=0,
        max_tokens=text_settings.REPLAYHUB_TEXT_MAX_TOKENS,
        judged=False,
        judge_overhead_bytes=0,
        side_cap_bytes=0,
        target_price=None,
        judge_price=None,
    )
    set_share(tiered_project, "text", max_replays=100, max_tokens=2 * one.tokens + 1)

    report = services.night_run(project=tiered_project, now=NOW)

    night = Night.objects.get()
    text = share_of(night, "text")
    assert len(report.of("text").admitted) == 2 and report.of("text").deferred == 2
    assert text.reserved_tokens == 2 * one.tokens <= text.limit_tokens
    execute_text_night(night)
    text = share_of(night, "text")
    assert text.reserved_tokens == 0
    assert text.used_tokens <= text.limit_tokens


def test_the_text_tier_never_reserves_past_its_money_budget(
    tiered_project, providers, standin, text_settings
):
    make_runs(tiered_project, 3, now=NOW, **RECORDED)
    set_share(tiered_project, "text", max_replays=100, max_cost_usd=Decimal("0.04"))

    report = services.night_run(project=tiered_project, now=NOW)

    # gpt-test costs 2 and 8 USD per million tokens: at most ~0.033 USD each.
    text = share_of(Night.objects.get(), "text")
    assert len(report.of("text").admitted) == 1 and report.of("text").deferred == 2
    assert text.reserved_cost_usd <= text.limit_cost_usd


def test_inconclusive_agentic_replays_are_retried_oldest_first_within_budget(
    tiered_project, standin, text_settings
):
    runs = make_runs(tiered_project, 4, now=NOW, **RECORDED)
    for run, similarity in zip(runs, [0.1, 0.1, 0.1, 0.1], strict=True):
        TextReplay.objects.create(
            run=run,
            project=tiered_project,
            target_provider="gpt",
            target_model="gpt-test",
            status="finished",
            finished_at=NOW - timedelta(days=3),
            similarity=similarity,
        )
    verdicts = ["inconclusive", "divergent", "inconclusive", "inconclusive"]
    finished = [NOW - timedelta(days=2, hours=h) for h in (1, 2, 3, 0)]
    for run, verdict, when in zip(runs, verdicts, finished, strict=True):
        Replay.objects.create(
            run=run,
            project=tiered_project,
            status="finished",
            verdict=verdict,
            reason_code="x",
            reason="Done.",
            finished_at=when,
            sandbox_seconds=60,
        )
    set_share(tiered_project, "agentic", max_replays=2)

    report = services.night_run(project=tiered_project, now=NOW)

    # run-1 is decided (divergent): never again. Of the inconclusive ones,
    # the two whose replay finished longest ago fit the budget of two.
    admitted = Replay.objects.filter(status="queued")
    assert {r.run.external_id for r in admitted} == {"run-2", "run-0"}
    assert report.deferred == 1
    assert Run.objects.get(external_id="run-3").deferred_at is not None
    agentic = share_of(Night.objects.get())
    assert agentic.reserved_replays == 2 == agentic.limit_replays


def test_an_escalated_category_skips_the_text_tier(
    tiered_project, standin, text_settings
):
    (run,) = make_runs(
        tiered_project, 1, raw={"category": "security"}, now=NOW, **RECORDED
    )
    Budget.objects.filter(project=tiered_project).update(
        escalate_categories=["security"]
    )

    report = services.night_run(project=tiered_project, now=NOW)

    assert report.of("text").admitted == []
    assert list(Replay.objects.values_list("run_id", flat=True)) == [run.pk]


def test_without_the_gate_the_agentic_tier_admits_as_before(
    tiered_project, standin, text_settings
):
    make_runs(tiered_project, 2, now=NOW, **RECORDED)
    Budget.objects.filter(project=tiered_project).update(agentic_after_text=False)

    report = services.night_run(project=tiered_project, now=NOW)

    assert len(report.of("text").admitted) == 2 and len(report.admitted) == 2


def test_every_tick_of_a_tiered_night_admits_again(
    tiered_project, standin, text_settings
):
    make_runs(tiered_project, 5, now=NOW, **RECORDED)
    Project.objects.filter(pk=tiered_project.pk).update(agentic_enabled=False)

    services.nights_tick(now=NOW)
    assert TextReplay.objects.count() == 3
    execute_text_night(Night.objects.get())
    set_share(tiered_project, "text", max_replays=10)
    NightShare.objects.filter(tier="text").update(limit_replays=10)

    services.nights_tick(now=NOW + timedelta(minutes=2))

    assert TextReplay.objects.count() == 5
    assert not Replay.objects.exists()  # agentic replays are off


def test_the_budgets_page_shows_the_spend_of_each_tier(
    client, lead, tiered_project, standin, text_settings
):
    make_runs(tiered_project, 5, now=NOW, **RECORDED)
    services.night_run(project=tiered_project, now=NOW)
    execute_text_night(Night.objects.get())
    Night.objects.update(window_start=NOW - timedelta(days=400))
    Night.objects.update(window_end=datetime(2100, 1, 1, tzinfo=UTC))
    client.force_login(lead)

    page = client.get("/budgets/").content.decode()

    assert "Text tier, before the agentic tier" in page
    assert "Asks gpt:gpt-test" in page
    assert 'aria-label="Text replays: 3 used, 0 reserved of 3"' in page
    assert "Text money" in page  # leads see money
    assert "<strong>2 deferred</strong> by the text share" in page
    # The night's text row: 3 of 3 replays (its first figure), 2 deferred.
    text_row = re.search(r'<th scope="row">Text</th>(.*?)</tr>', page, re.S)
    assert text_row is not None
    figures = re.findall(r'<td class="num">(.*?)</td>', text_row.group(1), re.S)
    assert figures[0] == "3/3" and "<strong>2</strong>" in figures[-1]
    # The two runs the text share left over are listed, linked to their page.
    text = page[page.index('aria-label="Text tier, before the agentic tier of shop"') :]
    deferred = text[text.index("Deferred runs") :]
    listed = deferred[: deferred.index("</details>")]
    assert "run-3" in listed and "run-4" in listed and "run-0" not in listed
    assert listed.count('href="/runs/') == 2


def test_the_nightly_command_reports_the_text_tier(
    tiered_project, standin, text_settings
):
    import io
    import json as json_module

    from django.core.management import call_command

    make_runs(tiered_project, 4, now=NOW, **RECORDED)
    out = io.StringIO()

    call_command("nightly", "--project", "shop", "--now", "--json", stdout=out)

    (result,) = json_module.loads(out.getvalue())
    assert (result["text_admitted"], result["text_deferred"]) == (3, 1)
    assert result["admitted"] == 0  # nothing passed on yet


@pytest.mark.django_db(transaction=True)
def test_concurrent_text_reservations_never_overspend(require_postgres):
    import threading

    from django.db import connection

    from replayhub.nights import shares

    project = Project.objects.create(slug="race", repo_path="/srv/race.git")
    night = make_night(
        project,
        start=NOW - timedelta(hours=1),
        hours=6,
        shares={
            "text": {
                "limit_replays": 1000,
                "limit_tokens": 55_000,
                "limit_cost_usd": Decimal("7.5"),
            }
        },
    )
    bound = Amounts(replays=1, tokens=5_000, cost_usd=Decimal("1"))
    admitted = []
    barrier = threading.Barrier(16)

    def worker():
        try:
            barrier.wait()
            for _ in range(5):
                if shares.reserve(night=night, tier="text", amount=bound, now=NOW):
                    admitted.append(1)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    text = share_of(night, "text")
    # Tokens allow 11, money 7: money is the binding dimension.
    assert len(admitted) == 7
    assert text.reserved_cost_usd == Decimal(7) <= text.limit_cost_usd
    assert text.reserved_tokens == 35_000


def test_the_policy_is_checked_where_an_admin_edits_it(tiered_project):
    from django.core.exceptions import ValidationError

    budget = Budget.objects.get(project=tiered_project)
    budget.text_target = "no-colon"
    budget.text_judge = "gpt:"
    budget.escalate_categories = "security"
    with pytest.raises(ValidationError) as caught:
        budget.full_clean()
    assert set(caught.value.message_dict) == {
        "text_target",
        "text_judge",
        "escalate_categories",
    }
    budget.text_target, budget.text_judge = "ollama:llama3:8b", ""
    budget.escalate_categories = ["security"]
    budget.full_clean()
    budget.text_target = ""
    with pytest.raises(ValidationError, match="needs a PROVIDER:MODEL"):
        budget.full_clean()


def test_without_the_gate_later_ticks_admit_only_text_replays(
    tiered_project, standin, text_settings
):
    make_runs(tiered_project, 5, now=NOW, **RECORDED)
    Budget.objects.filter(project=tiered_project).update(agentic_after_text=False)

    services.nights_tick(now=NOW)
    assert Replay.objects.count() == 2  # the agentic tier's one selection
    NightShare.objects.filter(tier__in=["agentic", "text"]).update(limit_replays=10)

    services.nights_tick(now=NOW + timedelta(minutes=2))

    assert Replay.objects.count() == 2
    assert TextReplay.objects.count() == 5


def test_a_failed_text_replay_gives_its_reservation_back_and_counts_once(
    tiered_project, standin, text_settings
):
    from replayhub.texttier.services import text_replay_settle

    make_runs(tiered_project, 1, now=NOW, **RECORDED)
    report = services.night_run(project=tiered_project, now=NOW)
    (pk,) = report.of("text").admitted
    # The call failed: no tokens, no cost recorded.
    TextReplay.objects.filter(pk=pk).update(
        status="finished", finished_at=NOW, error="timed out", cost_usd=None
    )

    text_replay_settle(row=TextReplay.objects.get(pk=pk), now=NOW)

    text = share_of(Night.objects.get(), "text")
    assert text.amounts("reserved") == Amounts()
    assert text.amounts("used") == Amounts(replays=1)
