"""Per-user assignment in the queue, like an annotation queue: what is
assigned to me, to whom each item is, and what nobody holds yet."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from replayhub import roles
from reviews.models import Claim
from reviews.services import claim_take
from reviews.together.handoff import claim_reassign
from tests.factories import make_replay, make_user

pytestmark = pytest.mark.django_db

QUEUE = reverse("reviews:queue")


def listed(response) -> list[int]:
    return [row["id"] for row in response.context["rows"]]


@pytest.fixture
def sam(db):
    return make_user("sam", roles.REVIEWER)


@pytest.fixture
def items(reviewer, sam, admin_user):
    mine = make_replay(verdict="divergent", title="Handed to rita")
    claim_reassign(replay=mine, actor=admin_user, to=reviewer)
    theirs = make_replay(verdict="divergent", title="Taken by sam")
    claim_take(replay=theirs, reviewer=sam)
    free = make_replay(verdict="divergent", title="Nobody's yet")
    lapsed = make_replay(verdict="divergent", title="Lapsed")
    Claim.objects.create(
        replay=lapsed,
        reviewer=reviewer,
        expires_at=timezone.now() - timedelta(seconds=1),
    )
    return {"mine": mine, "theirs": theirs, "free": free, "lapsed": lapsed}


def test_the_queue_lists_what_is_assigned_to_me_to_someone_or_to_nobody(
    client, reviewer, items
):
    client.force_login(reviewer)

    assert listed(client.get(QUEUE, {"assigned": "me"})) == [items["mine"].pk]
    assert listed(client.get(QUEUE, {"assigned": "sam"})) == [items["theirs"].pk]
    assert set(listed(client.get(QUEUE, {"assigned": "nobody"}))) == {
        items["free"].pk,
        items["lapsed"].pk,
    }
    assert len(listed(client.get(QUEUE))) == 4


def test_the_queue_says_how_much_is_mine_and_whose_each_item_is(
    client, reviewer, items
):
    client.force_login(reviewer)

    html = client.get(QUEUE).content.decode()

    assert 'id="assigned-to-me"' in html and "Assigned to me: 1</a>" in html
    assert f'href="{QUEUE}?assigned=me"' in html
    assert '<span class="holder mine"' in html and ">you · " in html
    assert ">sam · " in html
    # The filter offers the people a replay can be handed to.
    assert '<option value="sam">sam</option>' in html
    assert '<option value="me">Me</option>' in html


def test_an_unknown_assignee_is_refused_and_filters_nothing(client, reviewer, items):
    client.force_login(reviewer)

    response = client.get(QUEUE, {"assigned": "nosuchuser"})

    assert "No user is named nosuchuser." in response.content.decode()
    assert len(listed(response)) == 4


def test_a_lead_sees_whose_items_are_whose_without_a_share_of_their_own(
    client, lead, items
):
    client.force_login(lead)

    html = client.get(QUEUE, {"assigned": "rita"}).content.decode()

    assert 'id="assigned-to-me"' not in html
    assert ">rita · " in html
