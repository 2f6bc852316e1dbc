"""Label counts beside the trends: how often each label value was given with the
decisions of the page's nights, loaded after the page."""

from __future__ import annotations

import pytest

from reviews.models import Label
from reviews.services import review_decide
from tests.factories import make_project, make_replay

pytestmark = pytest.mark.django_db

# As the trends page asks for the part.
HX = {"HX-Request": "true"}


def decide_with(reviewer, project, values: dict[Label, str]) -> None:
    replay = make_replay(verdict="divergent", project=project)
    review_decide(
        replay=replay,
        reviewer=reviewer,
        decision="confirm",
        labels={label.pk: value for label, value in values.items()},
    )


@pytest.fixture
def labelled(reviewer):
    shop, billing = make_project("shop"), make_project("billing")
    cause = Label.objects.create(
        project=shop,
        name="root <b>cause</b>",
        kind="category",
        categories=["harness", "agent"],
    )
    merge = Label.objects.create(project=billing, name="would merge", kind="yes_no")
    decide_with(reviewer, shop, {cause: "harness"})
    decide_with(reviewer, shop, {cause: "harness"})
    decide_with(reviewer, shop, {cause: "agent"})
    decide_with(reviewer, billing, {merge: "yes"})
    return shop, billing


def rows(response) -> list[list[str]]:
    from html.parser import HTMLParser

    found: list[list[str]] = []

    class Cells(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                found.append([])

        def handle_data(self, data):
            if found and data.strip():
                found[-1].append(data.strip())

    Cells().feed(response.content.decode())
    return found[1:]  # the header row


def test_the_trends_page_loads_the_label_counts_of_its_nights(client, lead, labelled):
    client.force_login(lead)

    page = client.get("/trends/", {"project": "shop"})
    assert b'hx-get="/trends/labels/?' in page.content
    counts = client.get("/trends/labels/", {"project": "shop"}, headers=HX)

    assert counts.status_code == 200
    assert rows(counts) == [
        ["shop", "root <b>cause</b>", "agent", "1"],
        ["shop", "root <b>cause</b>", "harness", "2"],
    ]
    # A label's name is an admin's text: shown, never markup.
    assert b"root &lt;b&gt;cause&lt;/b&gt;" in counts.content
    everything = rows(client.get("/trends/labels/", headers=HX))
    assert ["billing", "would merge", "yes", "1"] in everything
    assert len(everything) == 3


def test_model_and_source_filters_are_said_not_to_apply(client, lead, labelled):
    client.force_login(lead)
    counts = client.get(
        "/trends/labels/", {"project": "shop", "model": "gpt-5"}, headers=HX
    )
    assert "model and source do not apply" in counts.content.decode()
    assert len(rows(counts)) == 2


def test_nights_without_labels_say_so(client, lead, labelled):
    client.force_login(lead)
    counts = client.get(
        "/trends/labels/", {"since": "2020-01-01", "until": "2020-01-31"}, headers=HX
    )
    assert "No labels given in this period." in counts.content.decode()


def test_a_reviewer_is_refused_the_label_counts(client, reviewer, labelled):
    client.force_login(reviewer)
    assert client.get("/trends/labels/").status_code == 403


def test_the_part_opened_by_its_address_is_a_page_of_its_own(client, lead, labelled):
    """A browser without script follows the placeholder's link: it gets a
    page with a title, a heading and the way back, not a bare fragment."""
    client.force_login(lead)

    page = client.get("/trends/labels/", {"project": "shop"}).content.decode()

    assert "<title>Labels given · Trends" in page and "<h1>Labels given</h1>" in page
    assert "<main" in page and 'href="/trends/?project=shop"' in page
    assert "root &lt;b&gt;cause&lt;/b&gt;" in page
    for alone in ("/trends/labels/", "/trends/reproducibility/"):
        part = client.get(alone, headers=HX).content.decode()
        assert "<title>" not in part and "<main" not in part
