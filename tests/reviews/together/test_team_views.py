"""Who may do what on the pages for working together, and what each page shows."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from replayhub import roles
from reviews.models import (
    Claim,
    Comment,
    GoldItem,
    Label,
    Notice,
    Review,
    ReviewPolicy,
    SecondOpinion,
)
from reviews.services import claim_take, review_decide
from reviews.together import comments
from tests.factories import make_project, make_replay, make_user

COMMENT = {
    "target": "dod",
    "path": "src/app.py",
    "side": "new",
    "line_start": "2",
    "line_end": "3",
    "body": "Why <script>alert(1)</script> y?\nSecond line.",
}


def as_user(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def people(reviewer, lead, admin_user, nobody):
    return {"reviewer": reviewer, "lead": lead, "admin": admin_user, "nobody": nobody}


def thread_on(replay, author) -> Comment:
    return comments.comment_add(
        replay=replay,
        author=author,
        data={**COMMENT, "line_start": 2, "line_end": 3},
    )


@pytest.mark.parametrize(
    ("role", "allowed"),
    [("reviewer", True), ("lead", True), ("admin", True), ("nobody", False)],
)
def test_who_may_comment_reply_and_resolve(people, role, allowed):
    replay = make_replay()
    client = as_user(people[role])
    thread = thread_on(replay, people["reviewer"])

    added = client.post(reverse("reviews:comment_create", args=[replay.pk]), COMMENT)
    replied = client.post(
        reverse("reviews:comment_reply", args=[thread.pk]), {"body": "ok"}
    )
    resolved = client.post(reverse("reviews:comment_resolve", args=[thread.pk]))

    codes = {added.status_code, replied.status_code, resolved.status_code}
    assert codes == ({302} if allowed else {403})
    assert Comment.objects.count() == (3 if allowed else 1)
    thread.refresh_from_db()
    assert (thread.resolved_at is not None) is allowed


@pytest.mark.parametrize(
    ("role", "allowed"),
    [("reviewer", True), ("lead", False), ("admin", True), ("nobody", False)],
)
def test_who_may_ask_for_a_second_opinion(people, role, allowed):
    replay = make_replay()
    response = as_user(people[role]).post(
        reverse("reviews:second_opinion", args=[replay.pk]), {"note": "unsure"}
    )
    assert response.status_code == (302 if allowed else 403)
    assert SecondOpinion.objects.exists() is allowed


@pytest.mark.parametrize(
    ("role", "allowed"),
    [("reviewer", False), ("lead", False), ("admin", True), ("nobody", False)],
)
def test_only_admins_mark_gold_and_hand_claims_over(people, role, allowed):
    replay = make_replay()
    review_decide(replay=replay, reviewer=people["reviewer"], decision="confirm")
    other = make_replay()
    claim_take(replay=other, reviewer=people["reviewer"])
    sam = make_user("sam", roles.REVIEWER)
    client = as_user(people[role])

    marked = client.post(reverse("reviews:gold_toggle", args=[replay.pk]))
    assigned = client.post(
        reverse("reviews:claim_assign", args=[other.pk]), {"to": "sam"}
    )

    assert {marked.status_code, assigned.status_code} == ({302} if allowed else {403})
    assert GoldItem.objects.exists() is allowed
    assert (Claim.objects.get(replay=other).reviewer == sam) is allowed


@pytest.mark.parametrize(
    ("role", "pages"),
    [
        ("reviewer", {"done": 200, "search": 200, "bulk": 200, "agreement": 403}),
        ("lead", {"done": 200, "search": 200, "bulk": 403, "agreement": 200}),
        ("admin", {"done": 200, "search": 200, "bulk": 200, "agreement": 200}),
        ("nobody", {"done": 403, "search": 403, "bulk": 403, "agreement": 403}),
    ],
)
def test_who_may_read_the_history_pages(people, role, pages):
    client = as_user(people[role])
    found = {name: client.get(reverse(f"reviews:{name}")).status_code for name in pages}
    assert found == pages
    assert client.get(reverse("reviews:inbox")).status_code == 200


def test_a_comment_renders_escaped_with_its_line_breaks_and_counts_as_unresolved(
    reviewer,
):
    replay = make_replay()
    client = as_user(reviewer)
    client.post(reverse("reviews:comment_create", args=[replay.pk]), COMMENT)

    page = client.get(reverse("reviews:replay_detail", args=[replay.pk]))
    html = page.content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "Why &lt;script&gt;alert(1)&lt;/script&gt; y?<br>Second line." in html
    assert "1 unresolved comment" in html
    queue = client.get(reverse("reviews:queue")).content.decode()
    assert "1 unresolved" in queue


def test_the_api_lists_a_replays_comment_threads(reviewer):
    replay = make_replay()
    thread = thread_on(replay, reviewer)
    comments.comment_reply(thread=thread, author=reviewer, body="and more")

    data = as_user(reviewer).get(f"/api/v1/replays/{replay.pk}").json()

    assert data["comments"][0]["excerpt"] == "x = 2\ny = 3"
    assert data["comments"][0]["on"]["line_end"] == 3
    assert data["comments"][0]["replies"][0]["body"] == "and more"
    assert data["open_threads"] == 1


def test_a_required_label_blocks_the_decision_with_a_message(reviewer):
    replay = make_replay(verdict="divergent")
    label = Label.objects.create(
        project=replay.project, name="would merge", kind="yes_no", required=True
    )
    client = as_user(reviewer)
    url = reverse("reviews:replay_decide", args=[replay.pk])

    refused = client.post(url, {"decision": "confirm"})
    assert refused.status_code == 400
    assert "Set the label “would merge”." in refused.content.decode()
    assert not Review.objects.exists()

    client.post(url, {"decision": "confirm", f"label_{label.pk}": "yes"})
    assert Review.objects.get().labels.get().value == "yes"


def test_blind_mode_hides_the_verdict_until_the_first_judgement(reviewer, lead):
    replay = make_replay(verdict="divergent", reason="The replay's tree fails.")
    ReviewPolicy.objects.create(project=replay.project, blind=True)
    client = as_user(reviewer)
    detail = reverse("reviews:replay_detail", args=[replay.pk])

    before = client.get(detail).content.decode()
    assert "Verdict hidden" in before
    assert "The replay&#x27;s tree fails." not in before
    # A lead, who does not judge, sees it.
    assert "The replay&#x27;s tree fails." in as_user(lead).get(detail).content.decode()

    client.post(
        reverse("reviews:replay_decide", args=[replay.pk]),
        {"blind_verdict": "equivalent"},
    )
    review = Review.objects.get()
    assert (review.decision, review.verdict_after) == ("overturn", "equivalent")
    after = client.get(detail).content.decode()
    assert "The replay&#x27;s tree fails." in after


def test_bulk_confirm_needs_the_count_the_reviewer_saw(reviewer):
    for _ in range(3):
        make_replay(verdict="identical", queued=False)
    client = as_user(reviewer)
    url = reverse("reviews:bulk")

    preview = client.get(url, {"verdict": "identical"})
    assert preview.context["count"] == 3
    stale = client.post(url, {"verdict": "identical", "expected": "2"})
    assert stale.status_code == 200
    assert not Review.objects.exists()

    done = client.post(url, {"verdict": "identical", "expected": "3"})
    assert Review.objects.filter(decision="confirm").count() == 3
    assert done.url == f"{url}?verdict=identical"


def test_bulk_confirm_offers_no_replay_its_project_would_have_labelled(reviewer):
    plain = make_replay(verdict="identical", queued=False, reason_code="same_tree")
    asks = make_replay(
        verdict="identical", queued=False, project=make_project(slug="billing")
    )
    Label.objects.create(
        project=asks.project, name="would merge", kind="yes_no", required=True
    )
    client = as_user(reviewer)
    url = reverse("reviews:bulk")

    preview = client.get(url, {"verdict": "identical"})
    done = client.post(url, {"verdict": "identical", "expected": "1"}, follow=True)

    assert [r.pk for r in preview.context["sample"]] == [plain.pk]
    listed = preview.content.decode().split('id="bulk-set"', 1)[1]
    assert "Identical trees" in listed and "same_tree" not in listed
    assert "Confirmed 1 replays." in done.content.decode()
    assert "Skipped" not in done.content.decode()
    assert Review.objects.get().replay_id == plain.pk


def test_the_queue_filters_on_a_label_given_earlier(reviewer):
    replay = make_replay(verdict="divergent")
    other = make_replay(verdict="divergent")
    merge = Label.objects.create(project=replay.project, name="merge", kind="yes_no")
    review_decide(
        replay=replay, reviewer=reviewer, decision="confirm", labels={merge.pk: "no"}
    )
    review_decide(
        replay=other, reviewer=reviewer, decision="confirm", labels={merge.pk: "yes"}
    )
    client = as_user(reviewer)

    listed = client.get(
        reverse("reviews:queue"), {"verdict": "divergent", "label": f"{merge.pk}:no"}
    )

    assert [row["id"] for row in listed.context["rows"]] == [replay.pk]
    assert f'value="{merge.pk}:no"' in listed.content.decode()


def test_label_counts_reach_the_trends_export_and_the_agreement_csv(reviewer, lead):
    replay = make_replay(verdict="divergent")
    cause = Label.objects.create(
        project=replay.project,
        name="=cause",
        kind="category",
        categories=["harness", "agent"],
    )
    review_decide(
        replay=replay, reviewer=reviewer, decision="confirm", labels={cause.pk: "agent"}
    )
    client = as_user(lead)

    exported = client.get(reverse("reviews:trends_export_json")).json()
    csv_text = client.get(reverse("reviews:agreement"), {"format": "csv"})

    assert exported["labels"] == [
        {"project": "shop", "label": "=cause", "value": "agent", "count": 1}
    ]
    # A cell a spreadsheet would run as a formula is quoted.
    assert "shop,'=cause,agent,1" in csv_text.content.decode()


def test_the_agreement_page_shows_kappa_and_gold_agreement_of_a_known_set(
    reviewer, lead, admin_user
):
    from reviews.models import GoldServing
    from reviews.together import gold

    sam = make_user("sam", roles.REVIEWER)
    # rita and sam judge four replays: both divergent, both equivalent, then
    # rita divergent / sam equivalent twice. p_o = 2/4; rita d3 e1, sam d1 e3:
    # p_e = (3*1 + 1*3) / 16 = 3/8; kappa = (1/2 - 3/8) / (5/8) = 1/5.
    pairs = [
        ("divergent", "divergent"),
        ("equivalent", "equivalent"),
        ("divergent", "equivalent"),
        ("divergent", "equivalent"),
    ]
    for first, second in pairs:
        replay = make_replay(verdict="divergent")
        for person, verdict in ((reviewer, first), (sam, second)):
            Review.objects.create(
                replay=replay,
                reviewer=person,
                decision="confirm" if verdict == "divergent" else "overturn",
                verdict_before="divergent",
                verdict_after=verdict,
            )
    # rita judges two gold items and agrees with one of them.
    for settled, said in (("divergent", "divergent"), ("identical", "divergent")):
        replay = make_replay(verdict="divergent")
        review_decide(replay=replay, reviewer=admin_user, decision="confirm")
        item = gold.gold_mark(replay=replay, actor=admin_user, verdict=settled)
        serving = GoldServing.objects.create(gold=item, reviewer=reviewer)
        gold.gold_judge(serving=serving, decision="confirm", verdict_after=said)

    # A rerun rita asks for is no judgement: counted apart.
    Review.objects.create(
        replay=make_replay(verdict="divergent"),
        reviewer=reviewer,
        decision="rerun",
        verdict_before="divergent",
    )

    page = as_user(lead).get(reverse("reviews:agreement"))

    rita = next(
        r for r in page.context["per_reviewer"] if r["reviewer__username"] == "rita"
    )
    assert (rita["decisions"], rita["overturns"], rita["reruns"]) == (4, 1, 1)
    gold_scores = page.context["gold_scores"]
    assert [(s.reviewer, s.judged, s.agreed) for s in gold_scores] == [("rita", 2, 1)]
    pair = next(
        p for p in page.context["pairs"] if (p.first, p.second) == ("rita", "sam")
    )
    assert (pair.shared, pair.agreed, float(pair.kappa)) == (4, 2, 0.2)
    html = page.content.decode()
    assert "<td>rita · sam</td>" in html and ">0.20</td>" in html
    assert ">50%</td>" in html


def test_marking_notices_read_touches_only_ones_own(reviewer, lead):
    from reviews.models import Notice

    replay = make_replay()
    mine = Notice.objects.create(user=reviewer, kind="mention", replay=replay, text="a")
    theirs = Notice.objects.create(user=lead, kind="mention", replay=replay, text="b")

    as_user(reviewer).post(reverse("reviews:inbox_read"), {"id": str(theirs.pk)})
    as_user(reviewer).post(reverse("reviews:inbox_read"))

    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.read_at is not None and theirs.read_at is None


def test_a_post_a_form_refuses_reaches_no_service(people):
    replay = make_replay()
    client = as_user(people["reviewer"])
    notice = Notice.objects.create(
        user=people["reviewer"], kind="mention", replay=replay, text="look"
    )

    asked = client.post(
        reverse("reviews:second_opinion", args=[replay.pk]), {"note": "x" * 151}
    )
    read = client.post(reverse("reviews:inbox_read"), {"id": "all of them"})

    assert asked.status_code == 302 and not SecondOpinion.objects.exists()
    assert read.status_code == 302
    notice.refresh_from_db()
    assert notice.read_at is None
    client.post(reverse("reviews:inbox_read"), {"id": str(notice.pk)})
    notice.refresh_from_db()
    assert notice.read_at is not None


@pytest.mark.parametrize("chosen", ["equivalent", "divergent"])
def test_a_blind_judgement_refused_for_a_label_keeps_the_verdict_chosen(
    reviewer, chosen
):
    """Blind, a required label unset: the page that says so still has the
    reviewer's verdict chosen (an overturn or, the automated one, a confirm),
    beside the note and the labels set."""
    replay = make_replay(verdict="divergent")
    ReviewPolicy.objects.create(project=replay.project, blind=True)
    Label.objects.create(
        project=replay.project,
        name="Root cause",
        kind="category",
        categories=["harness", "agent"],
        required=True,
    )
    merge = Label.objects.create(project=replay.project, name="merge", kind="yes_no")

    refused = as_user(reviewer).post(
        reverse("reviews:replay_detail", args=[replay.pk]),
        {
            "blind_verdict": chosen,
            "note": "Same tests pass",
            f"label_{merge.pk}": "yes",
        },
    )

    assert refused.status_code == 400
    page = refused.content.decode()
    assert "Set the label “Root cause”." in page
    assert "Same tests pass</textarea>" in page
    verdicts = re.search(r'<select name="blind_verdict".*?</select>', page)
    assert verdicts is not None
    assert re.findall(r'<option value="(\w*)" selected>', verdicts[0]) == [chosen]
    assert '<option value="yes" selected>yes</option>' in page
    assert not Review.objects.exists()
