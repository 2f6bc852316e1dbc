"""The run's page and a text replay's page: the list, the button, the
side-by-side view, escaping, roles, and no key anywhere."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.urls import reverse
from django.utils import timezone

from replayhub.models import TextReplay, TextStatus
from replayhub.texttier import services
from replayhub.texttier.replay import Target

SCRIPT = "<script>window.__pwned=1</script>"


def finished(run, **fields) -> TextReplay:
    values = {
        "target_provider": "gpt",
        "target_model": "gpt-test",
        "status": TextStatus.FINISHED,
        "finished_at": timezone.now(),
        "output": "the replayed answer",
        "similarity": 0.42,
        **fields,
    }
    return TextReplay.objects.create(run=run, project=run.project, **values)


def test_the_run_page_lists_text_replays_newest_first_without_outputs(
    client, reviewer, text_run
):
    old = finished(
        text_run,
        output="OLD-FULL-OUTPUT",
        created_at=timezone.now() - timedelta(hours=2),
    )
    failed = finished(
        text_run, output="", similarity=None, error="HTTP 500 after 4 attempts"
    )
    new = finished(
        text_run,
        output="NEW-FULL-OUTPUT",
        similarity=0.875,
        judge_provider="claude",
        judge_model="claude-test",
        equivalence_score=7,
        judge_rationale="RATIONALE-TEXT",
    )
    client.force_login(reviewer)

    page = client.get(
        reverse("reviews:run_detail", args=[text_run.pk])
    ).content.decode()

    assert "Text tier" in page and "not a reproduction" in page
    order = [page.index(f'"/text-replays/{r.pk}/"') for r in (new, failed, old)]
    assert order == sorted(order)
    assert "0.875" in page and "7/10" in page
    assert "HTTP 500 after 4 attempts" in page
    assert "OLD-FULL-OUTPUT" not in page and "NEW-FULL-OUTPUT" not in page
    assert "RATIONALE-TEXT" not in page
    # Reviewers read it; only those who may add text replays see the button.
    assert "Replay as text" not in page


def test_the_side_by_side_view_shows_both_outputs_the_scores_and_the_label(
    client, reviewer, text_run
):
    row = finished(
        text_run,
        output="retry added " + SCRIPT,
        similarity=0.5,
        judge_provider="claude",
        judge_model="claude-test",
        equivalence_score=8,
        judge_rationale="Same retry. " + SCRIPT,
        cost_usd=Decimal("0.000123"),
    )
    client.force_login(reviewer)

    response = client.get(reverse("reviews:text_replay_detail", args=[row.pk]))

    page = response.content.decode()
    assert "text tier · not a reproduction" in page
    assert "add a retry to the webhook sender" in page  # the original output
    assert "retry added &lt;script&gt;" in page
    assert "Same retry. &lt;script&gt;" in page
    assert SCRIPT not in page
    assert "0.500" in page and "8/10" in page
    # Money is for leads and admins.
    assert "0.000123" not in page


def test_a_reviewer_cannot_queue_a_text_replay(client, reviewer, text_run, providers):
    client.force_login(reviewer)
    response = client.post(
        reverse("reviews:run_text_replay", args=[text_run.pk]),
        {"provider": "gpt", "model": "gpt-test"},
    )
    assert response.status_code == 403
    assert TextReplay.objects.count() == 0


def test_an_admin_queues_a_text_replay_from_the_run_page(
    client, admin_user, text_run, providers
):
    client.force_login(admin_user)
    page = client.get(
        reverse("reviews:run_detail", args=[text_run.pk])
    ).content.decode()
    assert "Replay as text" in page

    response = client.post(
        reverse("reviews:run_text_replay", args=[text_run.pk]),
        {
            "provider": "gpt",
            "model": "gpt-test",
            "judge_provider": "claude",
            "judge_model": "claude-test",
        },
    )

    assert response.status_code == 302
    row = TextReplay.objects.get()
    assert (row.status, row.target, row.judge) == (
        "queued",
        "gpt:gpt-test",
        "claude:claude-test",
    )
    assert row.requested_by == admin_user and row.trigger == "page"


def test_a_half_given_judge_is_refused_with_its_message(
    client, admin_user, text_run, providers
):
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:run_text_replay", args=[text_run.pk]),
        {"provider": "gpt", "model": "gpt-test", "judge_provider": "claude"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 400
    assert "Give both a judge provider and a judge model" in response.content.decode()
    assert TextReplay.objects.count() == 0


def test_the_list_polls_until_every_text_replay_is_done(client, reviewer, text_run):
    row = TextReplay.objects.create(
        run=text_run, project=text_run.project, target_provider="gpt", target_model="m"
    )
    client.force_login(reviewer)
    url = reverse("reviews:run_detail", args=[text_run.pk])

    polling = client.get(url, headers={"HX-Request": "true"})
    assert polling.status_code == 200 and 'hx-trigger="every 1s"' in polling.text

    TextReplay.objects.filter(pk=row.pk).update(
        status="finished", finished_at=timezone.now(), similarity=0.25
    )
    done = client.get(url, headers={"HX-Request": "true"})
    assert done.status_code == 286 and "0.250" in done.text


def test_no_page_shows_the_key(
    client, admin_user, text_run, providers, standin, text_settings
):
    standin.leak_key = True
    standin.replies = ["an answer", '{"score": 5, "rationale": "half"}']
    row = services.text_replay_create(
        run=text_run,
        target=Target("gpt", "gpt-test"),
        judge=Target("claude", "claude-test"),
    )
    services.text_replay_execute(text_replay_id=row.pk)
    client.force_login(admin_user)

    run_page = client.get(reverse("reviews:run_detail", args=[text_run.pk])).text
    detail = client.get(reverse("reviews:text_replay_detail", args=[row.pk])).text

    assert f"#{row.pk}" in run_page and "an answer (your key was ***" in detail
    assert standin.key not in run_page and standin.key not in detail
