"""The inbox's notices: they point at their thread and clear when the replay
they are about is opened."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from reviews.models import Notice
from reviews.together import comments
from tests.factories import make_replay, make_user

MENTION = {
    "target": "dod",
    "path": "src/app.py",
    "side": "new",
    "line_start": 2,
    "line_end": 3,
    "body": "Look at this, @sam.",
}


def as_user(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_mention_links_to_its_threads_anchor(reviewer):
    sam = make_user("sam", "reviewer")
    replay = make_replay(verdict="divergent")
    thread = comments.comment_add(replay=replay, author=reviewer, data=MENTION)
    reply = comments.comment_reply(thread=thread, author=reviewer, body="@sam again")

    notices = list(Notice.objects.filter(user=sam).order_by("id"))

    assert [n.thread_id for n in notices] == [thread.pk, thread.pk]
    assert reply.parent_id == thread.pk
    page = as_user(sam).get(reverse("reviews:inbox")).content.decode()
    assert f'/replays/{replay.pk}/#thread-{thread.pk}"' in page


def test_opening_the_replay_reads_its_notices_and_the_badge_follows(reviewer):
    sam = make_user("sam", "reviewer")
    replay, other = make_replay(verdict="divergent"), make_replay()
    comments.comment_add(replay=replay, author=reviewer, data=MENTION)
    elsewhere = Notice.objects.create(user=sam, kind="mention", replay=other, text="b")
    client = as_user(sam)
    assert 'id="inbox-badge" title="2 unread"' in client.get("/").content.decode()

    page = client.get(reverse("reviews:replay_detail", args=[replay.pk]))

    assert 'id="inbox-badge" title="1 unread"' in page.content.decode()
    assert not Notice.objects.filter(replay=replay, read_at__isnull=True).exists()
    elsewhere.refresh_from_db()
    assert elsewhere.read_at is None


def test_someone_elses_visit_reads_none_of_my_notices(reviewer, lead):
    sam = make_user("sam", "reviewer")
    replay = make_replay(verdict="divergent")
    comments.comment_add(replay=replay, author=reviewer, data=MENTION)

    as_user(lead).get(reverse("reviews:replay_detail", args=[replay.pk]))

    assert Notice.objects.get(user=sam).read_at is None


def test_mark_all_read_stays(reviewer):
    replay = make_replay()
    for text in ("a", "b"):
        Notice.objects.create(user=reviewer, kind="mention", replay=replay, text=text)
    client = as_user(reviewer)
    assert "Mark all read" in client.get(reverse("reviews:inbox")).content.decode()

    client.post(reverse("reviews:inbox_read"))

    assert not Notice.objects.filter(read_at__isnull=True).exists()
