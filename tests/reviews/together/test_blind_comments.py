"""Blind review keeps others' comments from a reviewer who has not judged the
replay: a comment such as "this diverges" tells the answer."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from replayhub import roles
from reviews.models import ReviewPolicy
from reviews.together import comments
from tests.factories import make_replay, make_user

PLACE = {"target": "dod", "path": "src/app.py", "side": "new"}
HTMX = {"HTTP_HX_REQUEST": "true"}


def as_user(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def comment(replay, author, body: str, line: int = 2):
    data = {**PLACE, "line_start": line, "line_end": line, "body": body}
    return comments.comment_add(replay=replay, author=author, data=data)


def blind_replay_with_comments(reviewer, lead):
    replay = make_replay(verdict="divergent")
    ReviewPolicy.objects.create(project=replay.project, blind=True)
    otto = make_user("otto", roles.REVIEWER)
    theirs = comment(replay, otto, "Tell-A: this diverges, @rita")
    comments.comment_reply(thread=theirs, author=lead, body="Tell-B: agreed")
    mine = comment(replay, reviewer, "Own-1: what is y?", line=3)
    comments.comment_reply(thread=mine, author=otto, body="Tell-C: the tests fail")
    return replay, theirs, mine


def test_others_comments_wait_for_the_reviewers_judgement(reviewer, lead):
    replay, theirs, _mine = blind_replay_with_comments(reviewer, lead)
    client = as_user(reviewer)
    detail = reverse("reviews:replay_detail", args=[replay.pk])

    before = client.get(detail).content.decode()
    assert "Own-1: what is y?" in before
    assert "Tell-" not in before
    assert f'id="thread-{theirs.pk}"' not in before
    assert "3 comments by others show once you have judged" in before
    # A lead, who does not judge, reads them all.
    assert "Tell-A" in as_user(lead).get(detail).content.decode()

    client.post(
        reverse("reviews:replay_decide", args=[replay.pk]),
        {"blind_verdict": "equivalent"},
    )
    after = client.get(detail).content.decode()
    for tell in ("Tell-A", "Tell-B", "Tell-C", "Own-1"):
        assert tell in after
    assert "by others show once" not in after


def test_a_thread_answer_shows_no_more_than_the_page(reviewer, lead):
    _replay, theirs, mine = blind_replay_with_comments(reviewer, lead)
    client = as_user(reviewer)

    for url in ("reviews:comment_reply", "reviews:comment_resolve"):
        refused = client.post(reverse(url, args=[theirs.pk]), {"body": "?"}, **HTMX)
        assert refused.status_code == 404
        assert "Tell-" not in refused.content.decode()
    answer = client.post(
        reverse("reviews:comment_reply", args=[mine.pk]), {"body": "Own-2"}, **HTMX
    ).content.decode()
    assert "Own-1" in answer and "Own-2" in answer
    assert "Tell-C" not in answer


def test_a_mention_in_the_inbox_waits_for_the_judgement_too(reviewer, lead):
    replay, _theirs, _mine = blind_replay_with_comments(reviewer, lead)
    client = as_user(reviewer)

    before = client.get(reverse("reviews:inbox")).content.decode()
    assert f"otto mentioned you on replay {replay.pk}" in before
    assert "Tell-A" not in before

    client.post(
        reverse("reviews:replay_decide", args=[replay.pk]),
        {"blind_verdict": "equivalent"},
    )
    assert "Tell-A" in client.get(reverse("reviews:inbox")).content.decode()


def test_search_finds_no_replay_by_the_words_of_others_comments_before_judging(
    reviewer, lead
):
    replay, _theirs, _mine = blind_replay_with_comments(reviewer, lead)
    client = as_user(reviewer)

    def found(words: str) -> bool:
        page = client.get(reverse("reviews:search"), {"q": words}).content.decode()
        return f"#{replay.pk}<" in page

    assert not found("Tell-A")
    assert found("Own-1")
    assert as_user(lead).get(reverse("reviews:search"), {"q": "Tell-A"}).context["rows"]
    client.post(
        reverse("reviews:replay_decide", args=[replay.pk]),
        {"blind_verdict": "equivalent"},
    )
    assert found("Tell-A")


def test_a_mention_mailed_to_a_blind_reviewer_does_not_quote_the_comment(
    reviewer, lead, settings, django_capture_on_commit_callbacks
):
    from django.core import mail

    settings.REPLAYHUB_NOTICE_EMAIL = True
    reviewer.email = "rita@example.com"
    reviewer.save()
    lead.email = "lee@example.com"
    lead.save()
    replay = make_replay(verdict="divergent")
    ReviewPolicy.objects.create(project=replay.project, blind=True)
    otto = make_user("otto", roles.REVIEWER)

    with django_capture_on_commit_callbacks(execute=True):
        comment(
            replay,
            otto,
            f"Tell-D: this diverges, @{reviewer.username} @{lead.username}",
        )

    mails = {m.to[0]: f"{m.subject}\n{m.body}" for m in mail.outbox}
    # The reviewer who has not judged is told who mentioned them, and where.
    assert "otto mentioned you on replay" in mails["rita@example.com"]
    assert "Tell-D" not in mails["rita@example.com"]
    # A lead, who does not judge, reads the comment.
    assert "Tell-D: this diverges" in mails["lee@example.com"]


def test_search_counts_only_ones_own_open_threads_until_judged(reviewer, lead):
    replay, _theirs, _mine = blind_replay_with_comments(reviewer, lead)
    client = as_user(reviewer)
    search = reverse("reviews:search")

    def open_count(client) -> str:
        html = client.get(search, {"q": str(replay.pk)}).content.decode()
        assert f"#{replay.pk}<" in html
        return html

    # Two threads are open; otto's is not the reviewer's to know of yet.
    assert "1 unresolved" in open_count(client)
    assert "2 unresolved" in open_count(as_user(lead))
    client.post(
        reverse("reviews:replay_decide", args=[replay.pk]),
        {"blind_verdict": "equivalent"},
    )
    assert "2 unresolved" in open_count(client)
