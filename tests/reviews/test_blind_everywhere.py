"""Blind review is blind everywhere: a reviewer who has not judged a replay
reads its automated verdict on no page, partial or API answer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from reviews.models import GoldServing, Review, ReviewPolicy
from reviews.services import review_decide
from reviews.together import gold
from reviews.trends.rollups import rollup_range
from tests.factories import make_project, make_replay, make_user

pytestmark = pytest.mark.django_db

REASON = "Both trees pass the test suite"


@pytest.fixture
def blind_replay():
    project = make_project("blind")
    ReviewPolicy.objects.create(project=project, blind=True)
    return make_replay(verdict="equivalent", project=project, reason=REASON)


@pytest.fixture
def rita(client):
    user = make_user("rita", "reviewer")
    client.force_login(user)
    return user


def shows_verdict(html: str) -> bool:
    """The verdict's badge or its reason (a filter's choices name every verdict)."""
    return "badge v-equivalent" in html or "big v-equivalent" in html or REASON in html


def test_no_page_shows_the_verdict_before_the_reviewer_judged(
    client, rita, blind_replay
):
    run = blind_replay.run
    pages = {
        "run": reverse("reviews:run_detail", args=[run.pk]),
        "project": reverse("reviews:project_detail", args=[blind_replay.project.slug]),
        "replay": reverse("reviews:replay_detail", args=[blind_replay.pk]),
        "search": reverse("reviews:search") + f"?q={blind_replay.pk}",
    }
    for name, url in pages.items():
        html = client.get(url).content.decode()
        assert not shows_verdict(html), name
        assert "hidden" in html.lower(), name

    # Listing the project's runs by verdict tells nothing either.
    url = pages["project"] + "?verdict=equivalent"
    assert f"#{blind_replay.pk}<" not in client.get(url).content.decode()


def test_the_queue_puts_blind_items_in_a_neutral_band(client, rita, blind_replay):
    seen = make_replay(verdict="divergent")

    html = client.get(reverse("reviews:queue")).content.decode()

    assert "Blind review: the verdict shows once you have judged" in html
    # Its band's header is not above it, and the band counts leave it out.
    blind_at = html.index(f"#{blind_replay.pk}<")
    assert (
        "Tests or verifier passed, diff diverged"
        not in html[:blind_at].split("<tbody")[-1]
    )
    assert f"#{seen.pk}<" in html
    filtered = client.get(reverse("reviews:queue") + "?verdict=equivalent")
    assert f"#{blind_replay.pk}<" not in filtered.content.decode()


def test_the_api_hides_the_verdict_until_the_reviewer_judged(
    client, rita, blind_replay
):
    replay_url = f"/api/v1/replays/{blind_replay.pk}"
    run_url = f"/api/v1/runs/{blind_replay.run_id}"

    data = client.get(replay_url).json()
    assert (data["verdict"], data["reason_code"], data["reason"]) == (None,) * 3
    assert data["blind"] and "checks" not in (data["evidence"] or {})
    (listed,) = client.get(run_url).json()["replays"]
    assert listed["verdict"] is None and listed["blind"]

    review_decide(replay=blind_replay, reviewer=rita, decision="confirm", note="judged")
    assert client.get(replay_url).json()["verdict"] == "equivalent"
    assert client.get(run_url).json()["replays"][0]["verdict"] == "equivalent"
    assert Review.objects.filter(reviewer=rita).count() == 1


def test_a_lead_who_does_not_decide_still_reads_the_verdict(client, blind_replay):
    client.force_login(make_user("lena", "lead"))
    data = client.get(f"/api/v1/replays/{blind_replay.pk}").json()
    assert data["verdict"] == "equivalent"


# --- the four ways issue 37 found the verdict shown -------------------------------


def test_bulk_confirm_lists_no_blind_replay_under_its_verdict(client, rita):
    project = make_project("sealed")
    ReviewPolicy.objects.create(project=project, blind=True)
    replay = make_replay(verdict="divergent", project=project)
    url = reverse("reviews:bulk")

    for verdict in ("identical", "equivalent", "divergent", "inconclusive"):
        query = f"?project={project.slug}&verdict={verdict}"
        html = client.get(url + query).content.decode()
        found = html.split('id="bulk-set"')[1]
        assert f"/replays/{replay.pk}/" not in found, verdict
        assert "replay_fails_tests" not in found, verdict
        assert "No undecided replay matches." in found, verdict


def test_the_second_opinion_notice_keeps_the_first_decision_from_a_blind_reviewer(
    client, rita
):
    project = make_project("sealed")
    ReviewPolicy.objects.create(
        project=project, blind=True, second_on_verdicts=["identical"]
    )
    replay = make_replay(verdict="divergent", project=project)
    rolf = make_user("rolf", "reviewer")
    review_decide(
        replay=replay,
        reviewer=rolf,
        decision="overturn",
        verdict_after="identical",
        overrule=True,
    )

    html = client.get(reverse("reviews:replay_detail", args=[replay.pk])).content
    notice = html.decode().split('id="opinion-open">')[1].split("</p>")[0]

    assert notice == "Waiting for a second reviewer. Anyone but rolf may decide."
    # Once judged, the page tells what each of them decided.
    review_decide(replay=replay, reviewer=rita, decision="confirm")
    html = client.get(reverse("reviews:replay_detail", args=[replay.pk])).content
    assert "rolf: <b>identical</b>" in html.decode()


def test_the_header_names_no_band_to_a_blind_reviewer(client, rita, blind_replay):
    divergent = make_replay(verdict="divergent", project=blind_replay.project)

    for replay in (blind_replay, divergent):
        url = reverse("reviews:replay_detail", args=[replay.pk])
        html = client.get(url).content.decode()
        assert "<span>queued: blind review</span>" in html
        for band in ("Divergent", "Tests or verifier passed"):
            assert band not in html.split('<p class="meta">')[1].split("</p>")[0]


def test_a_gold_item_served_in_a_blind_project_names_no_band(
    client, rita, blind_replay, admin_user
):
    review_decide(replay=blind_replay, reviewer=admin_user, decision="confirm")
    item = gold.gold_mark(replay=blind_replay, actor=admin_user)
    GoldServing.objects.create(gold=item, reviewer=rita)

    url = reverse("reviews:replay_detail", args=[blind_replay.pk])
    html = client.get(url).content.decode()

    assert "<span>queued: blind review</span>" in html
    assert "Tests or verifier passed" not in html and "gold" not in html.lower()


def test_only_those_who_manage_gold_learn_a_replay_is_gold(client, admin_user):
    replay = make_replay(verdict="divergent")
    review_decide(replay=replay, reviewer=admin_user, decision="confirm")
    gold.gold_mark(replay=replay, actor=admin_user, verdict="inconclusive")
    tess = make_user("tess", "reviewer")
    serving = GoldServing.objects.create(gold=replay.gold, reviewer=tess)
    gold.gold_judge(serving=serving, decision="confirm", verdict_after=None)
    page = reverse("reviews:replay_detail", args=[replay.pk])
    api = f"/api/v1/replays/{replay.pk}"

    # A reviewer never served it, and a lead who reads everyone's decisions.
    for user in (make_user("rita", "reviewer"), make_user("lena", "lead")):
        client.force_login(user)
        html = client.get(page).content.decode()
        assert "gold" not in html.lower(), user
        assert "Inconclusive</b>" not in html, user
        assert [r["purpose"] for r in client.get(api).json()["reviews"]] == [
            "decision"
        ], user
        done = client.get(reverse("reviews:done") + "?reviewer=tess").content
        assert "gold" not in done.decode().lower(), user

    client.force_login(admin_user)
    html = client.get(page).content.decode()
    assert 'id="gold-item"' in html and "Inconclusive</b>" in html
    assert "gold check" in html


# --- what a lead who also decides reads ---------------------------------------------


def lead_who_decides(username: str):
    user = make_user(username, "lead")
    user.groups.add(Group.objects.get(name="reviewer"))
    return user


def test_everyones_decisions_leave_out_a_blind_replay_the_reader_has_not_judged(
    client, blind_replay
):
    rolf = make_user("rolf", "reviewer")
    review_decide(replay=blind_replay, reviewer=rolf, decision="confirm")
    url = reverse("reviews:done") + "?reviewer=rolf"
    row = f"/replays/{blind_replay.pk}/"

    client.force_login(lead_who_decides("lena"))
    assert row not in client.get(url).content.decode()
    client.force_login(make_user("lex", "lead"))
    assert row in client.get(url).content.decode()


def test_a_reader_of_trends_who_decides_reads_no_project_they_review_blind(
    client, blind_replay
):
    make_replay(verdict="inconclusive", project=make_project("open"))
    rollup_range(since=timezone.localdate() - timedelta(days=2))
    exports = [
        reverse("reviews:trends_export_json"),
        reverse("reviews:api_trends"),
    ]

    client.force_login(lead_who_decides("lena"))
    for url in exports:
        rows = client.get(url).json()["rollups"]
        assert {row["project"] for row in rows} == {"open"}, url
    csv = client.get(reverse("reviews:trends_export_csv")).content.decode()
    assert ",open," in csv and ",blind," not in csv
    page = client.get(reverse("reviews:trends")).content.decode()
    assert "1 inconclusive" in page and "1 equivalent" not in page
    assert 'id="trends-blind"' in page
    one = client.get(reverse("reviews:trends") + "?project=blind").content.decode()
    assert "1 equivalent" not in one

    # A lead who does not decide reads every project's figures.
    client.force_login(make_user("lex", "lead"))
    rows = client.get(exports[0]).json()["rollups"]
    assert {row["project"] for row in rows} == {"open", "blind"}
    assert "1 equivalent" in client.get(reverse("reviews:trends")).content.decode()
