"""Text replays against a local server speaking each provider's API: answers,
retries on 429 and 5xx only, timeouts, the judge, and a row for every attempt."""

from __future__ import annotations

import json
import logging
from decimal import Decimal

import pytest
from django.core.management import call_command

from replayhub.models import TextReplay, TextStatus
from replayhub.texttier import services
from replayhub.texttier.replay import BadTarget, Target

KINDS = [("claude", "claude-test"), ("gpt", "gpt-test")]
GOOD_JUDGE = '{"score": 9, "rationale": "Both add the same retry."}'


def replay_text(*args: str) -> tuple[dict, int]:
    """``manage.py replay_text … --json``: the printed object and exit code."""
    import io

    out = io.StringIO()
    code = 0
    try:
        call_command("replay_text", *args, "--json", stdout=out)
    except SystemExit as exit:
        code = exit.code
    return json.loads(out.getvalue()), code


@pytest.mark.parametrize(("provider", "model"), KINDS)
def test_a_run_is_replayed_as_text_and_compared(
    provider, model, text_run, providers, standin, text_settings
):
    standin.replies = ["add retry to the sender"]

    result, code = replay_text(str(text_run.pk), "--target", f"{provider}:{model}")

    assert code == 0
    assert result["error"] is None
    assert result["output"] == "add retry to the sender"
    # {add, retry, to, the, sender} of {add, a, retry, to, the, webhook, sender}
    assert result["similarity"] == pytest.approx(5 / 7)
    assert result["equivalence_score"] is None
    assert result["tier"] == "text"
    # The stand-in counts words: the prompt's 7 in, the answer's 5 out.
    assert (result["input_tokens"], result["output_tokens"]) == (7, 5)
    row = TextReplay.objects.get()
    assert row.status == TextStatus.FINISHED and row.attempts == 1
    price = (
        Decimal(3 if provider == "claude" else 2) * 7
        + Decimal(15 if provider == "claude" else 8) * 5
    )
    assert row.cost_usd == price / 1_000_000
    (received,) = standin.received
    assert json.loads(received.body)["model"] == model


@pytest.mark.parametrize(("provider", "model"), KINDS)
def test_a_judge_scores_the_answer(
    provider, model, text_run, providers, standin, text_settings
):
    standin.replies = ["add a retry to the webhook sender", GOOD_JUDGE]

    result, code = replay_text(
        str(text_run.pk),
        "--target",
        f"{provider}:{model}",
        "--judge",
        f"{provider}:{model}",
    )

    assert code == 0
    assert result["similarity"] == 1.0
    assert result["equivalence_score"] == 9
    assert result["rationale"] == "Both add the same retry."
    judge_prompt = json.loads(standin.received[1].body)["messages"][0]["content"]
    assert "add a retry to the webhook sender" in judge_prompt
    row = TextReplay.objects.get()
    assert row.judge_input_tokens > 0 and row.judge_output_tokens > 0


@pytest.mark.parametrize(("provider", "model"), KINDS)
def test_a_429_is_retried_and_the_answer_kept(
    provider, model, text_run, providers, standin, text_settings
):
    standin.failures = [429]

    result, code = replay_text(str(text_run.pk), "--target", f"{provider}:{model}")

    assert code == 0 and result["error"] is None
    assert result["similarity"] == 1.0
    assert len(standin.received) == 2
    assert TextReplay.objects.get().attempts == 2


@pytest.mark.parametrize(("provider", "model"), KINDS)
def test_a_500_after_the_retries_is_a_stored_failure(
    provider, model, text_run, providers, standin, text_settings
):
    standin.failures = [500, 503, 500]

    result, code = replay_text(str(text_run.pk), "--target", f"{provider}:{model}")

    assert code == 1
    assert result["error"].startswith("HTTP 500 after 3 attempts")
    assert "the server failed" in result["error"]
    assert result["similarity"] is None and result["output"] is None
    assert len(standin.received) == 3  # the first try and two retries
    row = TextReplay.objects.get()
    assert row.status == TextStatus.FINISHED and row.error == result["error"]


@pytest.mark.parametrize(("provider", "model"), KINDS)
def test_a_client_error_is_not_retried(
    provider, model, text_run, providers, standin, text_settings
):
    standin.failures = [400]

    result, code = replay_text(str(text_run.pk), "--target", f"{provider}:{model}")

    assert code == 1 and result["error"].startswith("HTTP 400:")
    assert len(standin.received) == 1


@pytest.mark.parametrize(("provider", "model"), KINDS)
def test_a_timeout_is_a_stored_failure_and_not_retried(
    provider, model, text_run, providers, standin, text_settings
):
    standin.first_byte_delay = 2.0

    result, code = replay_text(str(text_run.pk), "--target", f"{provider}:{model}")

    assert code == 1
    assert result["error"] == "no answer within 1 s"
    assert len(standin.received) == 1
    assert TextReplay.objects.get().error == "no answer within 1 s"


@pytest.mark.parametrize(("provider", "model"), KINDS)
def test_a_malformed_judge_answer_is_recorded_as_unparseable(
    provider, model, text_run, providers, standin, text_settings
):
    standin.replies = ["add a retry", "I'd say 8 out of 10, they match."]

    result, code = replay_text(
        str(text_run.pk),
        "--target",
        f"{provider}:{model}",
        "--judge",
        f"{provider}:{model}",
    )

    assert code == 0 and result["error"] is None
    assert result["equivalence_score"] is None
    assert result["judge_error"].startswith("unparseable answer")
    row = TextReplay.objects.get()
    assert row.judge_answer == "I'd say 8 out of 10, they match."
    assert row.equivalence_score is None


def test_a_missing_key_variable_is_a_stored_failure(
    text_run, providers, standin, text_settings, monkeypatch
):
    monkeypatch.delenv("REPLAYHUB_DEMO_MODEL_KEY")

    result, code = replay_text(str(text_run.pk), "--target", "gpt:gpt-test")

    assert code == 1
    assert "$REPLAYHUB_DEMO_MODEL_KEY is not set" in result["error"]
    assert standin.received == []
    assert TextReplay.objects.get().error == result["error"]


def test_a_refused_connection_is_a_stored_failure(
    text_run, db, text_settings, monkeypatch
):
    from replayhub.models import Provider

    Provider.objects.create(
        name="gone", kind="openai", base_url="http://127.0.0.1:9", key_env="GONE_KEY"
    )
    monkeypatch.setenv("GONE_KEY", "sk-gone")

    result, code = replay_text(str(text_run.pk), "--target", "gone:m")

    assert code == 1 and result["error"].startswith("the connection failed")
    assert TextReplay.objects.count() == 1


def test_an_unknown_provider_or_a_bad_target_is_refused_in_one_line(text_run, db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no provider named 'nope'"):
        call_command("replay_text", str(text_run.pk), "--target", "nope:model")
    with pytest.raises(CommandError, match="is not PROVIDER:MODEL"):
        call_command("replay_text", str(text_run.pk), "--target", "just-a-model")
    with pytest.raises(CommandError, match="there is no run 999"):
        call_command("replay_text", "999", "--target", "a:b")
    assert TextReplay.objects.count() == 0


def test_a_model_name_may_hold_colons():
    assert Target.parse("ollama:llama3:8b") == Target("ollama", "llama3:8b")
    with pytest.raises(BadTarget):
        Target.parse(":model")


def test_the_key_is_in_no_row_output_or_log(
    text_run, providers, standin, text_settings, caplog, capsys
):
    key = standin.key
    standin.leak_key = True
    standin.replies = ["an answer", GOOD_JUDGE]
    caplog.set_level(logging.DEBUG)

    result, _ = replay_text(
        str(text_run.pk), "--target", "claude:claude-test", "--judge", "gpt:gpt-test"
    )
    standin.failures = [401]
    replay_text(str(text_run.pk), "--target", "gpt:gpt-test")

    assert key not in json.dumps(result)
    assert key not in caplog.text
    assert key not in capsys.readouterr().out
    for row in TextReplay.objects.values():
        assert key not in repr(row)
    # What the upstream got is the key, the provider's way.
    assert standin.received[0].header("x-api-key") == key
    assert standin.received[1].header("Authorization") == f"Bearer {key}"


def test_a_run_without_a_prompt_is_a_stored_failure(providers, text_settings):
    from tests.factories import make_text_run

    run = make_text_run(prompt="", external_id="no-prompt")
    row = services.text_replay_create(run=run, target=Target("gpt", "gpt-test"))
    done = services.text_replay_execute(text_replay_id=row.pk)
    assert done.error == "the run has no recorded prompt"
    # Claimed once: a second delivery does nothing.
    assert services.text_replay_execute(text_replay_id=row.pk) is None


def test_a_text_replay_whose_worker_was_lost_ends_as_a_failure(
    text_run, providers, text_settings
):
    from datetime import timedelta

    from django.utils import timezone

    row = services.text_replay_create(run=text_run, target=Target("gpt", "m"))
    TextReplay.objects.claim(row.pk, now=timezone.now() - timedelta(hours=1))
    fresh = services.text_replay_create(run=text_run, target=Target("gpt", "m"))
    TextReplay.objects.claim(fresh.pk)

    assert services.text_replay_reap_stale() == [row.pk]

    row.refresh_from_db()
    assert row.status == TextStatus.FINISHED and "worker was lost" in row.error
    assert TextReplay.objects.get(pk=fresh.pk).status == TextStatus.RUNNING


def test_the_plain_output_reads_as_a_sentence_and_says_what_it_is_not(
    text_run, providers, standin, text_settings
):
    import io

    standin.replies = ["add a retry\x1b[2J", '{"score": 9, "rationale": "ok"}']
    out = io.StringIO()

    call_command(
        "replay_text",
        str(text_run.pk),
        "--target",
        "gpt:gpt-test",
        "--judge",
        "claude:claude-test",
        stdout=out,
    )

    text = out.getvalue()
    assert "on gpt:gpt-test: similarity 0.222, judge 9/10 — ok" in text
    assert "not a reproduction" in text
    assert "\x1b" not in text


@pytest.mark.django_db(transaction=True)
def test_a_text_replay_whose_message_the_broker_lost_is_sent_again_and_answered(
    celery_worker, standin
):
    from datetime import timedelta

    from django.utils import timezone

    from replayhub.models import Provider
    from tests.conftest import DEMO_KEY_ENV, TEXT_PRICES, wait_for
    from tests.factories import make_text_run

    Provider.objects.create(
        name="gpt",
        kind="openai",
        base_url=standin.base_url + "/v1",
        key_env=DEMO_KEY_ENV,
        prices=TEXT_PRICES,
    )
    standin.replies = ["add a retry to the sender"]
    run = make_text_run()
    # Queued an hour ago, its message gone with a broker that restarted; a
    # fresh one is still on its way and is left alone.
    hour_ago = timezone.now() - timedelta(hours=1)
    lost = services.text_replay_create(
        run=run, target=Target("gpt", "gpt-test"), enqueued_at=hour_ago
    )
    fresh = services.text_replay_create(run=run, target=Target("gpt", "gpt-late"))

    assert services.text_replay_requeue_stale(older_than=timedelta(minutes=30)) == [
        lost.pk
    ]
    # Once a period: the next pass sends nothing more.
    assert services.text_replay_requeue_stale(older_than=timedelta(minutes=30)) == []

    done = wait_for(
        lambda: TextReplay.objects.filter(
            pk=lost.pk, status=TextStatus.FINISHED
        ).first(),
        timeout=60,
    )
    assert (done.error, done.output) == ("", "add a retry to the sender")
    assert TextReplay.objects.get(pk=fresh.pk).status == TextStatus.QUEUED
