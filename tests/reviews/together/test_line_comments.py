"""Comments at the line: the box under a line, its answer as a thread, the
names @ may mention, and a mention of nobody refused."""

from __future__ import annotations

import json

from django.test import Client
from django.urls import reverse

from reviews.models import Comment
from reviews.together import comments
from tests.factories import make_replay, make_user

PLACE = {
    "target": "dod",
    "path": "src/app.py",
    "side": "new",
    "line_start": "2",
    "line_end": "3",
}
HTMX = {"HTTP_HX_REQUEST": "true"}


def as_user(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_box_under_a_line_names_its_place(reviewer):
    replay = make_replay(verdict="divergent")
    url = reverse("reviews:comment_new", args=[replay.pk])

    box = as_user(reviewer).get(url, PLACE)

    html = box.content.decode()
    assert box.status_code == 200
    assert html.lstrip().startswith('<tr class="comment-row">')
    assert "src/app.py (new), lines 2-3" in html
    assert 'name="line_end" value="3"' in html


def test_a_box_for_a_line_that_does_not_exist_is_refused(reviewer):
    replay = make_replay(verdict="divergent")
    url = reverse("reviews:comment_new", args=[replay.pk])
    client = as_user(reviewer)

    assert (
        client.get(url, {**PLACE, "line_start": "90", "line_end": ""}).status_code
        == 400
    )
    assert client.get(url, {**PLACE, "target": "nowhere"}).status_code == 400


def test_a_test_output_box_is_not_a_table_row(reviewer):
    replay = make_replay(verdict="divergent", test_output="a\nb")
    place = {"target": "tests", "path": "original run 1", "line_start": "2"}

    box = as_user(reviewer).get(reverse("reviews:comment_new", args=[replay.pk]), place)

    assert box.content.decode().lstrip().startswith('<div class="comment-row">')


def test_who_may_open_a_box(lead, nobody):
    replay = make_replay(verdict="divergent")
    url = reverse("reviews:comment_new", args=[replay.pk])

    assert as_user(lead).get(url, PLACE).status_code == 200
    assert as_user(nobody).get(url, PLACE).status_code == 403


def test_a_comment_sent_from_the_box_comes_back_as_its_thread(reviewer):
    replay = make_replay(verdict="divergent")

    answer = as_user(reviewer).post(
        reverse("reviews:comment_create", args=[replay.pk]),
        {**PLACE, "body": "Why y?"},
        **HTMX,
    )

    thread = Comment.objects.get()
    assert answer.status_code == 200
    assert f'id="thread-{thread.pk}"' in answer.content.decode()
    assert json.loads(answer["HX-Trigger"]) == {"threadsChanged": {"open": 1}}


def test_resolving_answers_with_the_thread_and_the_open_count(reviewer):
    replay = make_replay(verdict="divergent")
    thread = comments.comment_add(
        replay=replay,
        author=reviewer,
        data={**PLACE, "line_start": 2, "line_end": 3, "body": "x"},
    )

    answer = as_user(reviewer).post(
        reverse("reviews:comment_resolve", args=[thread.pk]), {}, **HTMX
    )

    assert 'class="thread resolved"' in answer.content.decode()
    assert json.loads(answer["HX-Trigger"]) == {"threadsChanged": {"open": 0}}


def test_the_names_at_may_mention_are_the_people_who_comment_or_decide(
    reviewer, lead, nobody
):
    replay = make_replay()
    make_user("gone", "reviewer").__class__.objects.filter(username="gone").update(
        is_active=False
    )

    names = (
        as_user(reviewer)
        .get(reverse("reviews:comment_people", args=[replay.pk]))
        .json()["names"]
    )

    assert names == sorted([reviewer.username, lead.username])


def test_a_mention_of_nobody_is_a_field_error_and_adds_nothing(reviewer):
    replay = make_replay(verdict="divergent")
    form = comments.CommentForm({**PLACE, "body": "Ask @ghost and @rita"})

    assert not form.is_valid()
    assert "@ghost" in form.errors["body"][0] and "@rita" not in form.errors["body"][0]

    answer = as_user(reviewer).post(
        reverse("reviews:comment_create", args=[replay.pk]),
        {**PLACE, "body": "Ask @ghost"},
        **HTMX,
    )
    assert answer.status_code == 422
    assert "No reviewer is called @ghost" in answer.content.decode()
    assert not Comment.objects.exists()


def test_a_reply_mentioning_nobody_is_refused_in_place(reviewer):
    replay = make_replay(verdict="divergent")
    thread = comments.comment_add(
        replay=replay,
        author=reviewer,
        data={**PLACE, "line_start": 2, "line_end": 3, "body": "x"},
    )

    answer = as_user(reviewer).post(
        reverse("reviews:comment_reply", args=[thread.pk]), {"body": "@ghost?"}, **HTMX
    )

    assert answer.status_code == 422
    assert "@ghost?</textarea>" in answer.content.decode()
    assert Comment.objects.count() == 1


def test_a_comment_on_a_file_not_in_the_diff_is_told_so_not_that_the_line_is_missing(
    reviewer,
):
    replay = make_replay(verdict="divergent")
    client = as_user(reviewer)
    box = reverse("reviews:comment_new", args=[replay.pk])

    elsewhere = client.get(box, {**PLACE, "path": "src/other.py"})
    past_the_end = client.get(box, {**PLACE, "line_start": "90", "line_end": ""})

    assert elsewhere.status_code == past_the_end.status_code == 400
    assert elsewhere.text == "Nothing to comment on: that file is not in that diff."
    assert past_the_end.text == (
        "Nothing to comment on: there is no such line in that diff."
    )
    posted = client.post(
        reverse("reviews:comment_create", args=[replay.pk]),
        {**PLACE, "path": "src/other.py", "body": "why?"},
        **HTMX,
    )
    assert "Comment not added: that file is not in that diff." in posted.text
    assert not Comment.objects.exists()
