"""Every form page links each field to its help and its errors for a screen
reader: each id an input's ``aria-describedby`` names is in the page, shown
as it first loads and refused with errors beside its fields."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import Client

from replayhub.models import Provider
from reviews.models import Label, ReviewPolicy
from tests.factories import make_project, make_replay
from tests.reviews.views.stored import post_from_page


class Idrefs(HTMLParser):
    """The page's ids, and every idref its ``aria-describedby``s name."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.described: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for idref in (found.get("aria-describedby") or "").split():
            self.described.append((str(found.get("name") or tag), idref))


def broken_idrefs(page: str) -> tuple[int, list[tuple[str, str]]]:
    """How many idrefs the page has, and those naming no element."""
    parser = Idrefs()
    parser.feed(page)
    return len(parser.described), [
        (name, idref) for name, idref in parser.described if idref not in parser.ids
    ]


WEBHOOK = {
    "form": "webhook",
    "webhook-url": "https://10.0.0.1/hook",
    "webhook-events": ["replay.finished"],
    "webhook-format": "cloudevents",
    "webhook-secret_env": "<b>X</b>",
}
FORGE = {
    "form": "forge",
    "forge-kind": "github",
    "forge-repo": "not a repo",
    "forge-token_env": "HOME",
}
PROVIDER = {
    "name": "acme",
    "kind": "anthropic",
    "base_url": "ftp://models.example",
    "key_env": "",
    "prices": "claude-x=3",
}
# Each form page, and a post that comes back with errors beside its fields.
PAGES = [
    ("/projects/new/", {"slug": "", "time_limit_seconds": "0", "max_anchors": "-5"}),
    ("/projects/shop/edit/", {"slug": "shop", "repo": "", "max_tokens": "0"}),
    ("/providers/", PROVIDER),
    ("/providers/gpt/edit/", {**PROVIDER, "name": "gpt"}),
    ("/projects/shop/connections/", WEBHOOK),
    ("/projects/shop/connections/", FORGE),
    (
        "/projects/shop/review/",
        {"form": "policy", "policy-gold_rate_percent": "150"},
    ),
    (
        "/projects/shop/review/",
        {"form": "label", "label-name": "", "label-position": "-1"},
    ),
    ("/text-suites/", None),
]


@pytest.fixture
def admin(db, admin_user) -> Client:
    make_project("shop")
    Provider.objects.create(
        name="gpt",
        kind="openai",
        base_url="https://models.example/v1",
        key_env="GPT_API_KEY",
    )
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize(("url", "bad"), PAGES, ids=[url for url, _ in PAGES])
def test_every_fields_help_and_errors_are_in_the_page_it_names(admin, url, bad):
    count, broken = broken_idrefs(admin.get(url).content.decode())
    assert not broken, broken

    if url == "/text-suites/":
        refused = admin.post(
            "/text-suites/new/", {"project": "shop", "most": "0", "model": ""}
        )
    elif url == "/projects/shop/edit/" or bad.get("form") == "policy":
        # With the fingerprint its page sends: the errors are the fields'.
        refused = post_from_page(admin, url, bad)
    else:
        refused = admin.post(url, bad)

    assert refused.status_code == 400
    page = refused.content.decode()
    # The summary says what did not happen: a suite is started, not saved.
    said = "Not started:" if url == "/text-suites/" else "Not saved:"
    assert said in page
    count, broken = broken_idrefs(page)
    assert '_error"' in page and count and not broken, broken


@pytest.mark.parametrize("blind", [False, True], ids=["decision", "blind"])
def test_a_required_label_left_unset_names_its_error_in_the_page(reviewer, blind):
    """The replay page refused for a label: the label's select is described
    by its error, beside it, in the decision form and in blind review's."""
    replay = make_replay(verdict="divergent")
    if blind:
        ReviewPolicy.objects.create(project=replay.project, blind=True)
    label = Label.objects.create(
        project=replay.project, name="would merge", kind="yes_no", required=True
    )
    client = Client()
    client.force_login(reviewer)

    if blind:
        url, data = f"/replays/{replay.pk}/", {"blind_verdict": "equivalent"}
    else:
        url, data = f"/replays/{replay.pk}/decide/", {"decision": "confirm"}
    refused = client.post(url, data)

    assert refused.status_code == 400
    page = refused.content.decode()
    assert f'aria-describedby="id_label_{label.pk}_error"' in page
    count, broken = broken_idrefs(page)
    assert count and not broken, broken
    assert re.search(
        rf'<span class="error" id="id_label_{label.pk}_error"[^>]*>'
        "Set the label “would merge”.</span>",
        page,
    )
