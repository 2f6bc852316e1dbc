"""The run's page and a text replay's page: the list, the button, the
side-by-side view, escaping, roles, and no key anywhere."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

from django.urls import reverse
from django.utils import timezone

from replayhub.ingest.services import PreflightMode, transcripts_import
from replayhub.models import ImportFormat, Provider, Run, TextReplay, TextStatus
from replayhub.texttier import services
from replayhub.texttier.replay import Target
from reviews.views import runs
from tests.factories import make_text_run

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


def test_a_refused_text_replay_says_each_problem_beside_its_field_and_sums_them_up(
    client, admin_user, text_run, providers
):
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:run_text_replay", args=[text_run.pk]),
        {"provider": "gpt", "model": "", "judge_model": "claude-test"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 400
    page = response.text
    # The swapped-in part opens with the problems, focused after the swap.
    summary = page[page.index('id="form-problems"') : page.index("</ul>")]
    assert "autofocus" in summary
    # Nothing is saved by this form: what failed is the replay.
    assert "<b>Not replayed: fix these 2 first.</b>" in summary
    assert "Not saved" not in page
    assert '<a href="#id_model">Model</a>: This field is required.' in summary
    assert '<a href="#id_judge_provider">Judge provider</a>: Give both' in summary
    # Each message sits beside its field, under the id its input names.
    for field, said in (
        ("model", "This field is required."),
        ("judge_provider", "Give both a judge provider and a judge model"),
    ):
        assert f'aria-describedby="id_{field}_error"' in page
        beside = page[page.index(f'<div id="id_{field}_error">') :]
        assert beside[: beside.index("</div>")].count(said) == 1
    assert TextReplay.objects.count() == 0


def test_a_judges_answer_that_could_not_be_read_is_unread_and_not_inferred(
    client, reviewer, text_run
):
    """No score was read from the judge's answer: the page says it is unread,
    why, and marks nothing as inferred by a model; a read score is marked."""
    unread = finished(
        text_run,
        judge_provider="claude",
        judge_model="claude-test",
        judge_answer="I think they are similar",
        judge_error="unparseable answer: no score between 1 and 10",
    )
    scored = finished(
        text_run,
        judge_provider="claude",
        judge_model="claude-test",
        equivalence_score=6,
    )
    client.force_login(reviewer)

    def score(row) -> str:
        page = client.get(reverse("reviews:text_replay_detail", args=[row.pk])).text
        said = page[page.index("<dt>Judge's score</dt>") :]
        return said[: said.index("</dd>")]

    said = score(unread)
    assert "unread (unparseable answer: no score between 1 and 10)" in said
    assert "none" not in said and "inferred" not in said
    assert "6/10" in score(scored) and "agentically inferred" in score(scored)


def test_a_question_already_asked_is_refused_in_one_focused_line(
    client, admin_user, text_run, providers
):
    client.force_login(admin_user)
    url = reverse("reviews:run_text_replay", args=[text_run.pk])
    asked = {"provider": "gpt", "model": "gpt-test"}
    assert client.post(url, asked, headers={"HX-Request": "true"}).status_code == 200

    again = client.post(url, asked, headers={"HX-Request": "true"})
    assert again.status_code == 409
    line = again.text[again.text.index('id="text-replay-refused"') :]
    line = line[: line.index("</p>")]
    assert 'tabindex="-1" autofocus>Not queued again: text replay #' in line
    assert 'id="form-problems"' not in again.text


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


def test_asking_the_same_model_again_while_it_works_is_refused_in_one_line(
    client, admin_user, text_run, providers
):
    client.force_login(admin_user)
    url = reverse("reviews:run_text_replay", args=[text_run.pk])
    asked = {"provider": "gpt", "model": "gpt-test"}

    first = client.post(url, asked, headers={"HX-Request": "true"})
    assert first.status_code == 200
    row = TextReplay.objects.get()
    assert (
        f'Text replay <a href="/text-replays/{row.pk}/">#{row.pk}</a> asking '
        "gpt:gpt-test is <b>queued</b>: a worker starts it soon." in first.text
    )

    again = client.post(url, asked, headers={"HX-Request": "true"})
    assert again.status_code == 409
    assert (
        f"Not queued again: text replay #{row.pk} already asks gpt:gpt-test "
        "and is queued; its result appears below."
    ) in again.text
    assert TextReplay.objects.count() == 1

    TextReplay.objects.claim(row.pk)
    running = client.post(url, asked)  # without script, the same refusal
    assert running.status_code == 409 and "and is running" in running.text
    page = client.get(reverse("reviews:run_detail", args=[text_run.pk])).text
    assert "asking gpt:gpt-test is <b>running</b>" in page
    assert TextReplay.objects.count() == 1

    # Another model is another question; a finished answer may be asked again.
    other = client.post(url, {"provider": "claude", "model": "claude-test"})
    assert other.status_code == 302
    TextReplay.objects.filter(pk=row.pk).update(
        status=TextStatus.FINISHED, finished_at=timezone.now()
    )
    assert client.post(url, asked).status_code == 302
    assert TextReplay.objects.filter(target_model="gpt-test").count() == 2


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


# --- the imported transcript ------------------------------------------------

IMG = '<img src=x onerror="window.__pwned=2">'


def claude_session(path, session: str, turns: int, text: str = "ok") -> None:
    """A hand-written Claude Code session file: a request, then ``turns``
    answers each with a Bash call and its result."""
    head = {"sessionId": session, "cwd": "/w", "gitBranch": "main"}
    lines = [
        {
            **head,
            "type": "user",
            "uuid": "u0",
            "timestamp": "2025-06-01T10:00:00Z",
            "message": {"role": "user", "content": f"Fix it {SCRIPT}"},
        }
    ]
    for n in range(turns):
        lines.append(
            {
                **head,
                "type": "assistant",
                "uuid": f"a{n}",
                "timestamp": "2025-06-01T10:00:01Z",
                "message": {
                    "id": f"msg_{n}",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [
                        {"type": "text", "text": text},
                        {
                            "type": "tool_use",
                            "id": f"toolu_{n}",
                            "name": "Bash",
                            "input": {"command": f"echo {IMG}"},
                        },
                    ],
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                },
            }
        )
        lines.append(
            {
                **head,
                "type": "user",
                "uuid": f"r{n}",
                "timestamp": "2025-06-01T10:00:02Z",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"toolu_{n}",
                            "content": f"RESULT-{n} {IMG}",
                        }
                    ],
                },
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def imported_session(tmp_path, project, turns: int, text: str = "ok") -> Run:
    path = tmp_path / "sess-page.jsonl"
    claude_session(path, "sess-page", turns, text)
    transcripts_import(
        project=project,
        paths=[path],
        format=ImportFormat.CLAUDE_CODE,
        preflight=PreflightMode.SKIP,
    )
    return Run.objects.get(external_id="sess-page")


def test_the_run_page_shows_the_transcript_as_a_conversation_all_escaped(
    client, reviewer, git_project, tmp_path
):
    run = imported_session(tmp_path, git_project, 2, text=f"Done {SCRIPT}")
    client.force_login(reviewer)

    page = client.get(reverse("reviews:run_detail", args=[run.pk])).content.decode()

    section = page[page.index('id="transcript"') :]
    assert "claude-code · sess-page.jsonl · 3 turns" in section
    # Each call folded with its result.
    assert section.count('<details class="call tool-call">') == 2
    assert "RESULT-0" in section and "RESULT-1" in section
    assert SCRIPT not in page and IMG not in page
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in section
    assert "&lt;img src=x onerror=&quot;window.__pwned=2&quot;&gt;" in section
    assert "Show all" not in section
    # A call is summed up by what it was given, not by the "{" of its JSON.
    summary = '<code>Bash</code> <span class="muted small">command: echo &lt;img'
    assert summary in section


def test_a_long_transcript_is_capped_with_a_link_to_all_of_it(
    client, reviewer, git_project, tmp_path, settings
):
    run = imported_session(tmp_path, git_project, runs.TRANSCRIPT_TURNS + 5)
    client.force_login(reviewer)
    url = reverse("reviews:run_detail", args=[run.pk])

    page = client.get(url).content.decode()

    assert f"The first {runs.TRANSCRIPT_TURNS} of" in page
    assert 'href="?transcript=all#transcript"' in page
    last = f"RESULT-{runs.TRANSCRIPT_TURNS + 4}"
    assert last not in page
    whole = client.get(url, {"transcript": "all"}).content.decode()
    assert last in whole and "Show all" not in whole


def test_a_run_without_a_transcript_shows_no_transcript_section(
    client, reviewer, text_run
):
    client.force_login(reviewer)
    page = client.get(reverse("reviews:run_detail", args=[text_run.pk])).text
    assert 'id="transcript"' not in page


def test_replay_as_text_starts_on_the_projects_own_provider(client, admin_user):
    def provider(name: str) -> Provider:
        return Provider.objects.create(
            name=name, kind="openai", base_url=f"https://{name}.test/v1", key_env="K"
        )

    # First by name, but not this project's: the list's first is not chosen.
    provider("aardvark")
    own = provider("shopmodels")
    run = make_text_run()
    run.project.providers.add(own)
    client.force_login(admin_user)

    page = client.get(reverse("reviews:run_detail", args=[run.pk])).content.decode()

    start = page.index('name="provider"')
    select = page[start : page.index("</select>", start)]
    assert '<option value="shopmodels" selected>' in select
    assert '<option value="aardvark">' in select
    assert runs.own_provider(run) == "shopmodels"


def test_replay_as_text_keeps_the_provider_and_model_asked(
    client, admin_user, text_run, providers
):
    client.force_login(admin_user)

    response = client.post(
        reverse("reviews:run_text_replay", args=[text_run.pk]),
        {
            "provider": "gpt",
            "model": "gpt-next",
            "judge_provider": "claude",
            "judge_model": "claude-test",
        },
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200
    assert TextReplay.objects.get().target == "gpt:gpt-next"
    page = response.content.decode()
    for name, chosen in (("provider", "gpt"), ("judge_provider", "claude")):
        start = page.index(f'name="{name}"')
        select = page[start : page.index("</select>", start)]
        assert f'<option value="{chosen}" selected>' in select
    assert 'value="gpt-next"' in page and 'value="claude-test"' in page
