"""Search is about outcomes: the settled verdict, and filters by model, verdict,
reason and tier, with blind review still blind."""

from __future__ import annotations

import pytest
from django.urls import reverse

from replayhub.models import Replay, Tier
from replayhub.verdicts import REASON_TEXT
from reviews.models import ReviewPolicy
from reviews.services import review_decide
from reviews.together import past
from tests.factories import make_project, make_replay, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def sam(db):
    return make_user("sam", "reviewer")


def search(client, **params) -> str:
    return client.get(reverse("reviews:search"), params).content.decode()


def test_an_overturned_replay_shows_its_automated_verdict_struck(client, lead, sam):
    replay = make_replay(verdict="divergent", title="Round invoice totals")
    review_decide(
        replay=replay, reviewer=sam, decision="overturn", verdict_after="equivalent"
    )
    client.force_login(lead)

    html = search(client, q="invoice")

    assert 'class="badge v-divergent overturned"' in html
    assert 'class="badge v-equivalent" title="Overturned by sam"' in html


def test_a_confirmed_replay_says_so_and_an_undone_decision_does_not_count(
    client, lead, sam
):
    confirmed = make_replay(verdict="divergent", title="Confirmed one")
    review_decide(replay=confirmed, reviewer=sam, decision="confirm")
    taken_back = make_replay(verdict="divergent", title="Taken back")
    review = review_decide(
        replay=taken_back,
        reviewer=sam,
        decision="overturn",
        verdict_after="equivalent",
    )
    review.undone_at = review.created_at
    review.save(update_fields=["undone_at"])
    client.force_login(lead)

    assert "Confirmed by sam" in search(client, q="Confirmed")
    html = search(client, q="Taken")
    assert "overturned" not in html
    assert "not reviewed yet" in html


def test_the_verdict_filter_reads_the_settled_verdict(lead, sam):
    automated = make_replay(verdict="equivalent")
    overturned = make_replay(verdict="divergent")
    review_decide(
        replay=overturned,
        reviewer=sam,
        decision="overturn",
        verdict_after="equivalent",
    )
    make_replay(verdict="divergent")

    found = past.search("", past.SearchFilters(verdict="equivalent"))

    assert {r.pk for r in found} == {automated.pk, overturned.pk}
    assert {r.settled_verdict for r in found} == {"equivalent"}


def test_filters_narrow_by_model_reason_and_tier_without_text():
    sonnet = make_replay(model="claude-sonnet-4", reason_code="tests_pass_both")
    make_replay(model="gpt-5", reason_code="tests_pass_both")
    tape = make_replay(model="gpt-5", reason_code="diff_diverged")
    Replay.objects.filter(pk=tape.pk).update(tier=Tier.TAPE)

    assert past.search("", past.SearchFilters(model="sonnet")) == [sonnet]
    assert past.search("", past.SearchFilters(tier="tape")) == [tape]
    by_reason = past.search("", past.SearchFilters(reason="diff_diverged"))
    assert by_reason == [tape]
    assert past.search("", past.SearchFilters()) == []


def test_the_search_page_filters_from_its_get_form(client, lead):
    sonnet = make_replay(model="claude-sonnet-4")
    other = make_replay(model="gpt-5")
    client.force_login(lead)

    html = search(client, model="sonnet")

    assert f"#{sonnet.pk}<" in html
    assert f"#{other.pk}<" not in html
    # A result's reason by its name, as the filter lists it, and its code.
    name = REASON_TEXT[sonnet.reason_code]
    assert f'<span class="reason-name">{name}</span>' in html
    assert 'name="tier"' in html and 'name="reason"' in html
    # The reasons by name, as the queue's filter shows them.
    assert '<option value="sandbox_unavailable">Sandbox unavailable</option>' in html


def test_blind_review_hides_the_outcome_and_filters_leak_nothing(client, reviewer):
    project = make_project("blind")
    ReviewPolicy.objects.create(project=project, blind=True)
    blind = make_replay(verdict="equivalent", project=project, model="gpt-5")
    client.force_login(reviewer)

    # Found by model, its outcome is hidden.
    html = search(client, model="gpt-5")
    assert f"#{blind.pk}<" in html
    assert "badge v-equivalent" not in html
    assert "hidden-verdict" in html
    # Filtering by verdict or reason would tell it: it is left out.
    for params in ({"verdict": "equivalent"}, {"reason": blind.reason_code}):
        assert f"#{blind.pk}<" not in search(client, **params)
        assert f"#{blind.pk}<" not in search(client, **params, q=str(blind.pk))

    # Once judged, it is the reviewer's to see and to filter.
    review_decide(replay=blind, reviewer=reviewer, decision="confirm")
    assert f"#{blind.pk}<" in search(client, verdict="equivalent")


def test_filters_that_exclude_every_match_say_how_many_match_without_them(client, lead):
    for n in range(9):
        make_replay(model="gpt-5", title=f"Add a note {n}")
    make_replay(model="gpt-5", title="Unrelated")
    client.force_login(lead)

    html = search(client, q="add", model="sonnet")

    assert "Nothing matches" not in html
    assert "9 replays match without them" in html
    assert f'href="{reverse("reviews:search")}?q=add">Clear the filters' in html
    # With no filter, an empty answer still says nothing matches.
    assert "Nothing matches “nothing-here”" in search(client, q="nothing-here")


def test_a_search_too_long_is_cut_to_the_limit_and_the_page_says_so(client, lead):
    title = "invoice " * 25  # 200 characters, then more the box does not take
    replay = make_replay(verdict="divergent", title=title[:200])
    client.force_login(lead)
    asked = title + "x" * 400

    html = search(client, q=asked)

    assert "The search was too long: only its first 200 characters are searched." in (
        html
    )
    # The text is kept in the box, cut to the limit (and trimmed, as searched).
    assert f'name="q" value="{title[:200].strip()}"' in html
    assert f"#{replay.pk}</span>" in html
    # Both boxes take no more than is searched.
    assert html.count('name="q"') == 2
    assert html.count('maxlength="200"') >= 2


def test_a_search_within_the_limit_says_nothing_of_length(client, lead):
    client.force_login(lead)
    assert "too long" not in search(client, q="x" * 200)
