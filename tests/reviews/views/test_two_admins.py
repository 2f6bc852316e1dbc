"""Two admins with the same settings open: a save from a page whose stored
values changed since is refused (409), nothing saved, the values typed kept
beside the stored ones; on the budgets page and the project form alike."""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from replayhub.models import BudgetShare, Project
from reviews.models import AuditEvent
from reviews.views.stale import DIGITS, fingerprint
from tests.factories import make_budget
from tests.gitrepos import project_repo

BUDGETS = "/budgets/"
REPLAYS = "share-shop-agentic-max_replays"
TIME_LIMIT = "caps-shop-time_limit_seconds"


class FormValues(HTMLParser):
    """What a browser would post from the form whose ``attr`` is ``value``."""

    def __init__(self, attr: str, value: str):
        super().__init__()
        self.attr, self.value = attr, value
        self.inside = False
        self.select: str | None = None
        self.textarea: str | None = None
        self.data: dict[str, list[str]] = {}

    def _add(self, name: str, value: str) -> None:
        self.data.setdefault(name, []).append(value)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get(self.attr) == self.value:
            self.inside = True
        if not self.inside or ("name" not in a and tag != "option"):
            return
        if tag == "input" and a.get("type") not in ("submit", "button"):
            if a.get("type") == "checkbox":
                if "checked" in a:
                    self._add(a["name"], a.get("value") or "on")
            else:
                self._add(a["name"], a.get("value", ""))
        elif tag == "select":
            self.select = a["name"]
        elif tag == "option" and self.select and "selected" in a:
            self._add(self.select, a.get("value", ""))
        elif tag == "textarea":
            self.textarea = a["name"]
            self._add(a["name"], "")

    def handle_data(self, data):
        if self.textarea:
            self.data[self.textarea][-1] += data

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self.select = None
        elif tag == "textarea":
            self.textarea = None


def form_of(html: str, attr: str, value: str) -> dict[str, list[str]]:
    parser = FormValues(attr, value)
    parser.feed(html)
    assert parser.data, f"no form with {attr}={value}"
    return parser.data


def card_form(client) -> dict[str, list[str]]:
    html = client.get(BUDGETS).content.decode()
    return form_of(html, "action", reverse("reviews:budget_edit", args=["shop"]))


def text(response) -> str:
    return unescape(re.sub(r"\s+", " ", response.content.decode()))


def words(response) -> str:
    """What the page says, without its tags."""
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", text(response))))


@pytest.fixture
def shop(db):
    project = Project.objects.create(
        slug="shop", repo_path="/srv/shop.git", time_limit_seconds=900
    )
    make_budget(project, shares={"agentic": {"max_replays": 8}})
    return project


def agentic_replays(project) -> int:
    return BudgetShare.objects.get(budget__project=project, tier="agentic").max_replays


@pytest.mark.parametrize("htmx", [False, True])
def test_the_second_save_from_one_page_is_refused_and_keeps_what_was_typed(
    client, admin_user, shop, htmx
):
    client.force_login(admin_user)
    headers = {"HX-Request": "true"} if htmx else {}
    url = reverse("reviews:budget_edit", args=["shop"])
    tab1, tab2 = card_form(client), card_form(client)
    assert tab1["stored"] == tab2["stored"]
    assert len(tab1["stored"][0]) == DIGITS
    saved = client.post(url, {**tab2, REPLAYS: "11"}, headers=headers)
    assert saved.status_code == (200 if htmx else 302)
    assert agentic_replays(shop) == 11
    events = AuditEvent.objects.count()

    refused = client.post(url, {**tab1, TIME_LIMIT: "12"}, headers=headers)

    assert refused.status_code == 409
    shop.refresh_from_db()
    assert (agentic_replays(shop), shop.time_limit_seconds) == (11, 900)
    assert AuditEvent.objects.count() == events
    said = text(refused)
    assert "shop's budget was changed by someone else" in said
    assert "nothing was saved" in said
    assert "Saved." not in said
    # What was typed stays in the form; the stored values are listed.
    assert re.search(rf'name="{TIME_LIMIT}" value="12"', said)
    assert re.search(rf'name="{REPLAYS}" value="8"', said)
    listed = words(refused)
    assert "Agentic tier — replays per night: stored now 11 (this form: 8)" in listed
    assert "Agent time limit (s): stored now 900 (this form: 12)" in listed

    # Saved again from the refusal, once checked: it is current now.
    again = form_of(refused.content.decode(), "action", url)
    assert again["stored"] != tab1["stored"]
    resaved = client.post(url, {**again, REPLAYS: "11"}, headers=headers)
    assert resaved.status_code == (200 if htmx else 302)
    shop.refresh_from_db()
    assert (agentic_replays(shop), shop.time_limit_seconds) == (11, 12)


@pytest.mark.parametrize("stored", ["", "zz", "0" * DIGITS + "0", "<b>x</b>"])
def test_an_unreadable_fingerprint_is_refused_as_a_stale_form(
    client, admin_user, shop, stored
):
    client.force_login(admin_user)
    url = reverse("reviews:budget_edit", args=["shop"])
    data = {**card_form(client), REPLAYS: "9", "stored": stored}
    refused = client.post(url, data, headers={"HX-Request": "true"})
    assert refused.status_code == 400
    assert "Nothing was saved: this form did not say which stored values" in text(
        refused
    )
    assert agentic_replays(shop) == 8
    assert not AuditEvent.objects.exists()


def test_a_stale_fingerprint_is_refused(client, admin_user, shop):
    client.force_login(admin_user)
    url = reverse("reviews:budget_edit", args=["shop"])
    data = {**card_form(client), REPLAYS: "9", "stored": fingerprint({"x": 1})}
    assert client.post(url, data).status_code == 409
    assert agentic_replays(shop) == 8


def test_a_post_without_the_field_is_refused_and_saves_nothing(
    client, admin_user, shop, tmp_path
):
    """A script's post, or a page from before the fingerprint, names no
    stored values: saved, it could undo a change made since unseen."""
    client.force_login(admin_user)
    data = {**card_form(client), REPLAYS: "9"}
    del data["stored"]
    response = client.post(reverse("reviews:budget_edit", args=["shop"]), data)
    assert response.status_code == 400
    assert "this form did not say which stored values" in words(response)
    assert agentic_replays(shop) == 8

    repo = project_repo(tmp_path).path
    Project.objects.filter(pk=shop.pk).update(repo_path=str(repo))
    edit = reverse("reviews:project_edit", args=["shop"])
    sent = form_of(client.get(edit).content.decode(), "id", "project-form")
    del sent["stored"]
    refused = client.post(edit, {**sent, "time_limit_seconds": "1200"})
    assert refused.status_code == 400
    assert "this form did not say which stored values" in words(refused)
    shop.refresh_from_db()
    assert shop.time_limit_seconds == 900


def test_a_save_on_the_project_form_refuses_a_budget_card_rendered_before(
    client, admin_user, shop
):
    """Both edit the replay's caps: each refuses a save from a page older
    than the other's."""
    client.force_login(admin_user)
    budget_page = card_form(client)
    Project.objects.filter(pk=shop.pk).update(max_turns=33)
    url = reverse("reviews:budget_edit", args=["shop"])
    refused = client.post(url, {**budget_page, "caps-shop-memory_limit_mb": "4096"})
    assert refused.status_code == 409
    assert "Turns per replay: stored now 33 (this form: empty)" in words(refused)
    shop.refresh_from_db()
    assert shop.max_turns == 33


def test_the_project_form_refuses_a_save_from_a_page_older_than_a_change(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    project = Project.objects.create(
        slug="cart",
        repo_path=str(repo),
        test_command=["pytest", "-q"],
        agent_command=["./agent.sh"],
    )
    client.force_login(admin_user)
    edit = reverse("reviews:project_edit", args=["cart"])
    page = client.get(edit).content.decode()
    tab1, tab2 = (
        form_of(page, "id", "project-form"),
        form_of(page, "id", "project-form"),
    )
    assert len(tab1["stored"][0]) == DIGITS

    saved = client.post(edit, {**tab2, "max_turns": "33"})
    assert saved.status_code == 302, text(saved)
    assert "turns per replay none → 33" in words(client.get(saved.url))
    project.refresh_from_db()
    assert project.max_turns == 33
    memory = project.memory_limit_mb

    refused = client.post(edit, {**tab1, "memory_limit_mb": "4096"})

    assert refused.status_code == 409
    project.refresh_from_db()
    assert (project.max_turns, project.memory_limit_mb) == (33, memory)
    assert AuditEvent.objects.filter(action="project.update").count() == 1
    said = text(refused)
    assert "Project cart was changed by someone else" in said
    assert "Saved project" not in said
    assert "33 → none" not in said
    assert re.search(r'name="memory_limit_mb" value="4096"', said)
    assert "Turns per replay: stored now empty (this form: 33)" not in words(refused)
    assert "Turns per replay: stored now 33 (this form: empty)" in words(refused)

    blank = client.post(edit, {**tab1, "stored": ""})
    assert blank.status_code == 400
    assert "Nothing was saved: this form did not say" in text(blank)

    again = form_of(refused.content.decode(), "id", "project-form")
    resaved = client.post(edit, {**again, "max_turns": "33"})
    assert resaved.status_code == 302
    project.refresh_from_db()
    assert (project.max_turns, project.memory_limit_mb) == (33, 4096)


def test_a_card_shown_before_its_budget_was_ever_saved_saves(client, admin_user, db):
    """The card of a project with no budget row shows the defaults; the
    save creates the row and is taken, the defaults being what it had."""
    Project.objects.create(slug="shop", repo_path="/srv/shop.git")
    client.force_login(admin_user)
    data = {**card_form(client), REPLAYS: "9"}
    response = client.post(reverse("reviews:budget_edit", args=["shop"]), data)
    assert response.status_code == 302
    assert agentic_replays(Project.objects.get(slug="shop")) == 9


def test_a_budget_card_save_refuses_a_project_form_rendered_before(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    project = Project.objects.create(
        slug="cart",
        repo_path=str(repo),
        test_command=["pytest", "-q"],
        agent_command=["./agent.sh"],
        time_limit_seconds=900,
    )
    client.force_login(admin_user)
    edit = reverse("reviews:project_edit", args=["cart"])
    opened = form_of(client.get(edit).content.decode(), "id", "project-form")
    html = client.get(BUDGETS).content.decode()
    card = form_of(html, "action", reverse("reviews:budget_edit", args=["cart"]))
    budget_url = reverse("reviews:budget_edit", args=["cart"])
    saved = client.post(budget_url, {**card, "caps-cart-time_limit_seconds": "1200"})
    assert saved.status_code == 302

    refused = client.post(edit, {**opened, "memory_limit_mb": "4096"})

    assert refused.status_code == 409
    project.refresh_from_db()
    assert project.time_limit_seconds == 1200
    assert project.memory_limit_mb != 4096
    assert "Agent time limit (s): stored now 1200 (this form: 900)" in words(refused)
