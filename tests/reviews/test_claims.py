"""Claims: "Next" hands out the best unclaimed item, exclusively, for a while."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from reviews import services
from reviews.models import AuditEvent, Claim
from reviews.services import ClaimHeld, claim_next, claim_release, claim_take
from tests.factories import make_project, make_replay, make_user


def test_next_takes_the_highest_priority_item(reviewer):
    make_replay(verdict="divergent", finished_ago=timedelta(minutes=1))
    best = make_replay(verdict="equivalent", finished_ago=timedelta(hours=3))

    assert claim_next(reviewer=reviewer) == best
    claim = Claim.objects.get(replay=best)
    assert claim.reviewer == reviewer
    assert claim.expires_at > timezone.now() + timedelta(seconds=590)


def test_two_reviewers_in_turn_get_different_items(reviewer, lead):
    first = make_replay(verdict="equivalent")
    second = make_replay(verdict="divergent")
    other = make_user("remy", "reviewer")

    assert claim_next(reviewer=reviewer) == first
    assert claim_next(reviewer=other) == second
    assert claim_next(reviewer=make_user("ria", "reviewer")) is None


def test_an_expired_claim_is_free_to_take(reviewer):
    replay = make_replay(verdict="equivalent")
    other = make_user("remy", "reviewer")
    Claim.objects.create(
        replay=replay, reviewer=other, expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert claim_next(reviewer=reviewer) == replay
    assert Claim.objects.get(replay=replay).reviewer == reviewer


def test_the_lease_length_is_a_setting(reviewer, settings):
    settings.REPLAYHUB_REVIEW_LEASE_SECONDS = 30
    replay = make_replay(verdict="equivalent")

    claim_next(reviewer=reviewer)

    left = Claim.objects.get(replay=replay).expires_at - timezone.now()
    assert timedelta(seconds=25) < left <= timedelta(seconds=30)


def test_next_lets_go_of_the_item_held_before(reviewer):
    first = make_replay(verdict="equivalent")
    second = make_replay(verdict="divergent")

    assert claim_next(reviewer=reviewer) == first
    assert claim_next(reviewer=reviewer) == second
    assert list(Claim.objects.values_list("replay_id", flat=True)) == [second.pk]
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "object_id"))
    assert actions == [
        ("claim.take", str(first.pk)),
        ("claim.release", str(first.pk)),
        ("claim.take", str(second.pk)),
    ]


def test_taking_an_item_someone_holds_is_refused(reviewer):
    replay = make_replay(verdict="equivalent")
    other = make_user("remy", "reviewer")
    claim_take(replay=replay, reviewer=other)

    with pytest.raises(ClaimHeld) as refused:
        claim_take(replay=replay, reviewer=reviewer)

    assert refused.value.claim.reviewer == other


def test_a_reviewer_can_extend_and_release_their_own_claim(reviewer):
    replay = make_replay(verdict="equivalent")
    first = claim_take(replay=replay, reviewer=reviewer)
    later = claim_take(
        replay=replay, reviewer=reviewer, now=timezone.now() + timedelta(minutes=5)
    )

    assert later.expires_at > first.expires_at
    assert claim_release(replay=replay, reviewer=reviewer)
    assert not Claim.objects.exists()
    assert not claim_release(replay=replay, reviewer=reviewer)


def test_a_stale_choice_cannot_steal_a_claim_written_meanwhile(reviewer):
    """The conditional write refuses even when the candidate query missed the claim."""
    replay = make_replay(verdict="equivalent")
    other = make_user("remy", "reviewer")
    claim_take(replay=replay, reviewer=other)

    assert (
        services._take(replay_id=replay.pk, reviewer=reviewer, now=timezone.now())
        is None
    )
    assert Claim.objects.get(replay=replay).reviewer == other


def test_next_page_claims_and_opens_the_item(client, reviewer):
    replay = make_replay(verdict="equivalent")
    client.force_login(reviewer)

    response = client.post(reverse("reviews:next"))

    assert response["Location"] == reverse("reviews:replay_detail", args=[replay.pk])


def test_next_with_nothing_left_goes_back_to_the_queue(client, reviewer):
    client.force_login(reviewer)

    response = client.post(reverse("reviews:next"), follow=True)

    assert response.redirect_chain[-1][0] == reverse("reviews:queue")
    assert b"Nothing left to review" in response.content


def test_opening_an_item_someone_else_holds_shows_who_and_until_when(client, reviewer):
    replay = make_replay(verdict="equivalent")
    other = make_user("remy", "reviewer")
    claim = claim_take(replay=replay, reviewer=other)
    client.force_login(reviewer)

    html = client.get(reverse("reviews:replay_detail", args=[replay.pk])).content

    until = timezone.localtime(claim.expires_at).strftime("%H:%M:%S")
    assert b"<b>remy</b> holds this until" in html
    assert until.encode() in html
    assert b'name="decision"' not in html


def test_claiming_a_held_item_through_the_page_says_who_holds_it(client, reviewer):
    replay = make_replay(verdict="equivalent")
    claim_take(replay=replay, reviewer=make_user("remy", "reviewer"))
    client.force_login(reviewer)

    response = client.post(
        reverse("reviews:replay_claim", args=[replay.pk]), follow=True
    )

    assert b"remy holds this replay until" in response.content


def press_next_together(workers: int) -> list:
    """``workers`` reviewers press "Next" at the same instant, each on its own
    connection; returns what each got."""
    reviewers = [make_user(f"r{i}", "reviewer") for i in range(workers)]
    barrier = threading.Barrier(workers)
    got, errors = [], []

    def press_next(user):
        try:
            barrier.wait()
            replay = claim_next(reviewer=user)
            got.append(replay.pk if replay else None)
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=press_next, args=(u,)) for u in reviewers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    return got


@pytest.mark.django_db(transaction=True)
def test_concurrent_next_presses_never_share_an_item(require_postgres):
    for _ in range(10):
        make_replay(verdict="divergent")

    got = press_next_together(8)

    assert None not in got
    assert len(set(got)) == 8
    assert Claim.objects.count() == 8


@pytest.mark.django_db(transaction=True)
def test_concurrent_next_presses_share_nothing_on_sqlite_either():
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL variant above covers this backend")
    for _ in range(3):
        make_replay(verdict="divergent")

    got = press_next_together(5)

    # Three items for five reviewers: three distinct claims, two empty hands.
    assert got.count(None) == 2
    assert len({pk for pk in got if pk}) == 3
    assert Claim.objects.count() == 3


# Releasing also hands back a gold item served to the reviewer (one query).
@pytest.mark.parametrize(
    ("action", "query_count"), [("replay_claim", 12), ("replay_release", 9)]
)
def test_claiming_and_releasing_read_no_diffs(client, reviewer, action, query_count):
    replay = make_replay(verdict="equivalent")
    client.force_login(reviewer)
    client.get("/")  # the session and the user are loaded once, not counted
    url = reverse(f"reviews:{action}", args=[replay.pk])

    with CaptureQueriesContext(connection) as queries:
        client.post(url)

    assert len(queries) == query_count
    selects = [q["sql"] for q in queries if q["sql"].startswith("SELECT")]
    replay_reads = [sql for sql in selects if 'FROM "replayhub_replay"' in sql]
    assert len(replay_reads) == 1
    assert "diff_of_diffs" not in replay_reads[0]
    assert "agent_output" not in replay_reads[0]
    assert not [sql for sql in selects if "replayhub_comparison" in sql]


FILTER = "project=demo-env&verdict=divergent"


@pytest.mark.parametrize("action", ["replay_claim", "replay_release"])
def test_claiming_and_releasing_keep_the_queue_filter_the_page_was_opened_in(
    client, reviewer, action
):
    replay = make_replay(verdict="divergent", project=make_project("demo-env"))
    claim_take(replay=replay, reviewer=reviewer)
    client.force_login(reviewer)
    url = reverse(f"reviews:{action}", args=[replay.pk])

    response = client.post(f"{url}?{FILTER}")

    detail = reverse("reviews:replay_detail", args=[replay.pk])
    assert response.url == f"{detail}?{FILTER}"
    # The page's next button (Release once claimed, Claim once released)
    # posts the filter on, so a click keeps it.
    page = client.get(response.url).content.decode()
    other = {"replay_claim": "replay_release", "replay_release": "replay_claim"}
    button = reverse(f"reviews:{other[action]}", args=[replay.pk])
    assert f'action="{button}?{FILTER.replace("&", "&amp;")}"' in page


def test_only_the_queues_own_valid_filters_are_passed_on(client, reviewer):
    replay = make_replay(verdict="divergent", project=make_project("demo-env"))
    client.force_login(reviewer)
    url = reverse("reviews:replay_claim", args=[replay.pk])
    asked = "verdict=bogus&next=https://evil.example/&project=demo-env&after=9"

    response = client.post(f"{url}?{asked}")

    detail = reverse("reviews:replay_detail", args=[replay.pk])
    assert response.url == f"{detail}?project=demo-env"


@pytest.mark.parametrize("to", ["sam", "", "nosuchuser"])
def test_assigning_keeps_the_queue_filter_the_page_was_opened_in(
    client, admin_user, to
):
    client.force_login(admin_user)
    replay = make_replay(verdict="divergent", project=make_project("demo-env"))
    make_user("sam", "reviewer")
    url = reverse("reviews:claim_assign", args=[replay.pk])
    query = "project=demo-env&verdict=divergent"

    response = client.post(f"{url}?{query}", {"to": to})

    detail = reverse("reviews:replay_detail", args=[replay.pk])
    assert response.url == f"{detail}?{query}"


def test_the_assign_form_posts_the_queue_filter_the_page_was_opened_in(
    client, admin_user
):
    client.force_login(admin_user)
    replay = make_replay(verdict="divergent", project=make_project("demo-env"))
    query = "project=demo-env&verdict=divergent"
    detail = reverse("reviews:replay_detail", args=[replay.pk])

    page = client.get(f"{detail}?{query}").content.decode()

    assign = reverse("reviews:claim_assign", args=[replay.pk])
    assert f'action="{assign}?project=demo-env&amp;verdict=divergent"' in page
