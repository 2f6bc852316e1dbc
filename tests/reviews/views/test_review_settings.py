"""A project's review settings page: an admin sets the review policy and the
labels in the app, and they take effect; a refused form keeps what was typed
beside its one-line reason; a label decisions used is kept; every change is
audited; reviewers and leads are kept out."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from reviews.models import AuditEvent, Label, ReviewPolicy
from reviews.services import claim_next, review_decide
from reviews.together import gold
from tests.factories import make_project, make_replay, make_superuser, make_user
from tests.reviews.views.stored import form_stored, post_from_page

URL = "/projects/shop/review/"

POLICY = {
    "form": "policy",
    "policy-gold_rate_percent": "0",
}


def as_user(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def add_label(client, **changed):
    data = {
        "form": "label",
        "label-name": "would merge",
        "label-kind": "yes_no",
        "label-categories": "",
        "label-position": "0",
        **{f"label-{name}": value for name, value in changed.items()},
    }
    return client.post(URL, data)


@pytest.fixture
def shop(db):
    return make_project("shop")


def test_an_admin_turns_on_blind_review_and_it_hides_the_verdict(
    shop, admin_user, reviewer
):
    replay = make_replay(
        verdict="divergent", project=shop, reason="The replay's tree fails."
    )
    detail = f"/replays/{replay.pk}/"
    assert "Verdict hidden" not in as_user(reviewer).get(detail).content.decode()
    client = as_user(admin_user)

    saved = post_from_page(
        client,
        URL,
        {
            **POLICY,
            "policy-blind": "on",
            "policy-second_on_overturn": "on",
            "policy-second_on_verdicts": ["equivalent", "identical"],
        },
    )

    assert saved.status_code == 302 and saved["Location"] == URL
    policy = ReviewPolicy.objects.get(project=shop)
    assert (policy.blind, policy.second_on_overturn) == (True, True)
    assert policy.second_on_verdicts == ["equivalent", "identical"]
    assert "Verdict hidden" in as_user(reviewer).get(detail).content.decode()
    page = client.get(URL).content.decode()
    assert "Review policy of shop saved." in page
    assert "on every overturn" in page
    assert "on decisions ending equivalent, identical" in page


def test_a_gold_rate_set_on_the_page_is_the_rate_gold_is_served_at(
    shop, admin_user, reviewer
):
    sam = make_user("sam", "reviewer")
    replay = make_replay(verdict="divergent", project=shop)
    review_decide(replay=replay, reviewer=sam, decision="confirm")
    gold.gold_mark(replay=replay, actor=admin_user, verdict="divergent")

    post_from_page(
        as_user(admin_user), URL, {**POLICY, "policy-gold_rate_percent": "30"}
    )

    assert ReviewPolicy.objects.get(project=shop).gold_rate_percent == 30
    assert claim_next(reviewer=reviewer, gold_roll=30) is None
    assert claim_next(reviewer=reviewer, gold_roll=29.9) == replay


def test_the_project_page_shows_the_policy_and_labels_and_links_to_the_settings(
    shop, admin_user, reviewer, lead
):
    ReviewPolicy.objects.create(
        project=shop, blind=True, gold_rate_percent=5, second_on_verdicts=["equivalent"]
    )
    Label.objects.create(
        project=shop, name="cause", kind="category", categories=["harness", "agent"]
    )

    as_admin = as_user(admin_user).get("/projects/shop/").content.decode()
    as_lead = as_user(lead).get("/projects/shop/").content.decode()
    as_reviewer = as_user(reviewer).get("/projects/shop/").content.decode()

    for page in (as_admin, as_lead, as_reviewer):
        assert "Blind review" in page and "cause" in page and "harness, agent" in page
    assert f'href="{URL}"' in as_admin
    assert f'href="{URL}"' not in as_lead and f'href="{URL}"' not in as_reviewer
    # The rate and the second-opinion rules: for those who run the project.
    assert "5 % of the items" in as_admin and "5 % of the items" in as_lead
    assert "Gold rate" not in as_reviewer
    assert "decisions ending" not in as_reviewer


def test_labels_added_on_the_page_are_asked_for_on_the_decision_form(
    shop, admin_user, reviewer
):
    replay = make_replay(verdict="divergent", project=shop)
    client = as_user(admin_user)

    yes_no = add_label(client, name="would merge", required="on")
    category = add_label(
        client, name="cause", kind="category", categories="harness, agent\nmodel\n"
    )

    assert yes_no.status_code == category.status_code == 302
    cause = Label.objects.get(project=shop, name="cause")
    assert cause.categories == ["harness", "agent", "model"]
    assert Label.objects.get(project=shop, name="would merge").required
    form = as_user(reviewer).get(f"/replays/{replay.pk}/").content.decode()
    labels = form.split('id="labels"', 1)[1].split("</fieldset>", 1)[0]
    assert "would merge" in labels and "cause" in labels
    assert f'name="label_{cause.pk}"' in labels
    assert '<option value="model">model</option>' in labels


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        (
            {**POLICY, "policy-gold_rate_percent": "150", "policy-blind": "on"},
            "gold_rate_percent",
            "At most 100",
        ),
        (
            {**POLICY, "policy-gold_rate_percent": "-1", "policy-blind": "on"},
            "gold_rate_percent",
            "Cannot be negative.",
        ),
    ],
)
def test_a_bad_policy_is_refused_beside_its_field_and_nothing_saved(
    shop, admin_user, data, field, reason
):
    client = as_user(admin_user)

    response = post_from_page(client, URL, data)

    assert response.status_code == 400
    form = response.context["policy_form"]
    assert list(form.errors) == [field]
    assert reason in form.errors[field][0]
    assert not ReviewPolicy.objects.exists()
    assert not AuditEvent.objects.exists()
    # What was typed is still there to correct: the rate, and blind ticked.
    html = response.content.decode()
    assert f'value="{data["policy-gold_rate_percent"]}"' in html
    assert form["blind"].value() is True


@pytest.mark.parametrize(
    ("changed", "reason"),
    [
        ({"kind": "category", "categories": " , \n"}, "A category list names"),
        (
            {"name": "cause", "kind": "category", "categories": "kept"},
            "already has a label",
        ),
        (
            {"categories": "a, b"},
            "A yes / no label has no categories; choose “Category list” to use "
            "them, or leave them empty.",
        ),
        ({"kind": "scale", "categories": "a"}, "A scale 1-5 label has no categories"),
        ({"kind": "category", "categories": "x" * 81}, "over 80 characters"),
    ],
)
def test_a_bad_label_is_refused_beside_its_field_with_the_rest_kept(
    shop, admin_user, changed, reason
):
    Label.objects.create(project=shop, name="cause", kind="yes_no")
    client = as_user(admin_user)

    response = add_label(client, required="on", **changed)

    assert response.status_code == 400
    form = response.context["label_form"]
    field = "name" if "already" in reason else "categories"
    assert len(form.errors) == 1 and reason in form.errors[field][0]
    assert Label.objects.count() == 1
    assert form["required"].value() is True
    assert form["kind"].value() == changed.get("kind", "yes_no")
    html = response.content.decode()
    assert f'value="{changed.get("name", "would merge")}"' in html


def test_a_label_is_edited_and_a_duplicate_name_refused(shop, admin_user):
    merge = Label.objects.create(project=shop, name="would merge", kind="yes_no")
    Label.objects.create(project=shop, name="cause", kind="yes_no")
    client = as_user(admin_user)
    url = f"/projects/shop/review/labels/{merge.pk}/"
    data = {"name": "merge?", "kind": "scale", "position": "3", "required": "on"}

    refused = post_from_page(client, url, {**data, "name": "cause"})
    saved = post_from_page(client, url, data)

    assert refused.status_code == 400
    page = refused.content.decode()
    assert "shop already has a label “cause”." in page
    # Summed up above the form, focused, linked to its field.
    summary = page[page.index('id="form-problems"') : page.index('id="label-form"')]
    assert "autofocus" in summary and 'href="#id_name">Name</a>' in summary
    assert saved.status_code == 302 and saved["Location"] == URL
    merge.refresh_from_db()
    assert (merge.name, merge.kind, merge.position, merge.required) == (
        "merge?",
        "scale",
        3,
        True,
    )
    event = AuditEvent.objects.get(action="label.update")
    assert event.before == {
        "label": merge.pk,
        "name": "would merge",
        "kind": "yes_no",
        "required": False,
        "position": 0,
    }
    assert event.after["name"] == "merge?" and event.actor == admin_user


def test_an_unused_label_is_removed_after_a_confirmation(shop, admin_user):
    merge = Label.objects.create(project=shop, name="would merge", kind="yes_no")
    client = as_user(admin_user)
    url = f"/projects/shop/review/labels/{merge.pk}/remove/"

    asked = client.get(url)
    assert asked.status_code == 200 and Label.objects.exists()
    assert "Remove would merge</button>" in asked.content.decode()

    removed = client.post(url)

    assert removed.status_code == 302 and not Label.objects.exists()
    event = AuditEvent.objects.get(action="label.delete")
    assert event.before["name"] == "would merge" and event.object_id == str(shop.pk)
    assert "Label “would merge” removed." in client.get(URL).content.decode()


def test_a_label_decisions_used_is_kept_with_their_values(shop, admin_user, reviewer):
    merge = Label.objects.create(project=shop, name="would merge", kind="yes_no")
    replay = make_replay(verdict="divergent", project=shop)
    review = review_decide(
        replay=replay, reviewer=reviewer, decision="confirm", labels={merge.pk: "no"}
    )
    client = as_user(admin_user)
    url = f"/projects/shop/review/labels/{merge.pk}/remove/"

    asked = client.get(url).content.decode()
    refused = client.post(url)

    assert (
        "1 decision recorded a value" in asked
        and "<button" not in asked.split("<main", 1)[-1].split("</main>")[0]
    )
    assert refused.status_code == 400
    assert "“would merge” is kept: 1 decision recorded a value for it" in (
        refused.content.decode()
    )
    assert review.labels.get().value == "no"
    assert not AuditEvent.objects.filter(action="label.delete").exists()


def test_every_change_is_audited_with_its_actor(shop, admin_user):
    client = as_user(admin_user)

    post_from_page(client, URL, {**POLICY, "policy-gold_rate_percent": "10"})
    post_from_page(
        client, URL, {**POLICY, "policy-gold_rate_percent": "10"}
    )  # no change
    add_label(client)

    events = list(
        AuditEvent.objects.order_by("id").values_list("action", "actor", "object_id")
    )
    assert events == [
        ("policy.update", admin_user.pk, str(shop.pk)),
        ("label.create", admin_user.pk, str(shop.pk)),
    ]
    policy_event = AuditEvent.objects.get(action="policy.update")
    assert (policy_event.before, policy_event.after) == (
        {"gold_rate_percent": 0},
        {"gold_rate_percent": 10},
    )
    created = AuditEvent.objects.get(action="label.create")
    assert created.after["name"] == "would merge" and created.after["kind"] == "yes_no"


def test_label_names_and_values_are_escaped(shop, admin_user, reviewer):
    label = Label.objects.create(
        project=shop, name="<b>x</b>", kind="category", categories=["<i>y</i>"]
    )

    pages = [
        as_user(admin_user).get(URL),
        as_user(admin_user).get(f"/projects/shop/review/labels/{label.pk}/"),
        as_user(admin_user).get(f"/projects/shop/review/labels/{label.pk}/remove/"),
        as_user(reviewer).get("/projects/shop/"),
    ]

    for page in pages:
        html = page.content.decode()
        assert page.status_code == 200
        assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
        assert "<i>y</i>" not in html
    assert "&lt;i&gt;y&lt;/i&gt;" in pages[0].content.decode()


@pytest.mark.parametrize("role", ["reviewer", "lead"])
def test_reviewers_and_leads_may_not_open_or_post_the_settings(request, shop, role):
    label = Label.objects.create(project=shop, name="would merge", kind="yes_no")
    client = as_user(request.getfixturevalue(role))
    urls = [
        URL,
        f"/projects/shop/review/labels/{label.pk}/",
        f"/projects/shop/review/labels/{label.pk}/remove/",
    ]

    for url in urls:
        assert client.get(url).status_code == 403
    assert client.post(URL, {**POLICY, "policy-blind": "on"}).status_code == 403
    assert add_label(client, name="other").status_code == 403
    assert client.post(urls[1], {"name": "x", "kind": "yes_no"}).status_code == 403
    assert client.post(urls[2]).status_code == 403
    assert not ReviewPolicy.objects.exists()
    assert list(Label.objects.values_list("name", flat=True)) == ["would merge"]
    assert not AuditEvent.objects.exists()


def test_a_post_without_the_csrf_token_is_refused(shop, admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)

    assert client.post(URL, {**POLICY, "policy-blind": "on"}).status_code == 403
    assert not ReviewPolicy.objects.exists()


def test_a_refused_policy_is_summed_up_at_the_forms_top_and_focused(shop, admin_user):
    response = post_from_page(
        as_user(admin_user), URL, {**POLICY, "policy-gold_rate_percent": "150"}
    )

    assert response.status_code == 400
    page = response.content.decode()
    summary = page[page.index('id="form-problems"') : page.index('id="policy-form"')]
    assert "autofocus" in summary
    assert 'href="#id_policy-gold_rate_percent">Gold rate (%)</a>: At most 100' in (
        summary
    )
    # Beside the field too, and the browser does not stop it first.
    assert 'id="id_policy-gold_rate_percent_error"' in page
    tag = re.search(r'<input[^>]*name="policy-gold_rate_percent"[^>]*>', page)
    assert tag and " max=" not in tag[0] and " min=" not in tag[0]


def test_a_label_position_out_of_range_is_said_in_the_forms_words(shop, admin_user):
    client = as_user(admin_user)

    for position, said in (("-1", "Cannot be negative."), ("40000", "At most 32,767.")):
        response = add_label(client, position=position)

        assert response.status_code == 400
        assert response.context["label_form"].errors["position"] == [said]
        page = response.content.decode()
        assert "Ensure this value" not in page
        assert 'href="#id_label-position">Position</a>' in page


def test_a_long_label_name_is_sent_whole_and_refused_in_one_short_line(
    shop, admin_user
):
    client = as_user(admin_user)
    # The browser does not cut a longer paste short without a word.
    tag = re.search(r'<input[^>]*name="label-name"[^>]*>', client.get(URL).text)
    assert tag and "maxlength" not in tag[0]

    response = add_label(client, name="n" * 120)

    assert response.status_code == 400
    assert response.context["label_form"].errors["name"] == [
        "At most 80 characters (this one has 120)."
    ]
    assert not Label.objects.exists()


def test_a_policy_saved_from_an_older_page_is_refused_and_nothing_saved(
    shop, admin_user
):
    """Two admins open the page; the first saves a gold rate of 7; the
    second's save from the page opened before is refused, the rate kept."""
    first, second = (
        as_user(admin_user),
        as_user(make_superuser("other-admin", "other@example.com")),
    )
    opened = form_stored(second, URL, "policy-form")
    saved = post_from_page(first, URL, {**POLICY, "policy-gold_rate_percent": "7"})

    refused = second.post(URL, {**opened, **POLICY, "policy-blind": "on"})

    assert saved.status_code == 302
    assert refused.status_code == 409
    page = refused.content.decode()
    assert (
        "The review policy of shop was changed by someone else since you "
        "opened this page: nothing was saved."
    ) in page
    assert 'href="#id_policy-gold_rate_percent">Gold rate (%)</a>: stored now 7' in (
        page
    )
    policy = ReviewPolicy.objects.get(project=shop)
    assert (policy.gold_rate_percent, policy.blind) == (7, False)
    # Saved again from the refused page, it is taken.
    again = second.post(
        URL,
        {**form_stored(second, URL, "policy-form"), **POLICY, "policy-blind": "on"},
    )
    assert again.status_code == 302
    assert ReviewPolicy.objects.get(project=shop).blind is True


def test_a_policy_posted_without_the_fingerprint_is_refused(shop, admin_user):
    refused = as_user(admin_user).post(URL, {**POLICY, "policy-blind": "on"})

    assert refused.status_code == 400
    assert "Nothing was saved: this form did not say" in refused.content.decode()
    assert not ReviewPolicy.objects.filter(blind=True).exists()


def test_a_label_edited_from_an_older_page_is_refused(shop, admin_user):
    label = Label.objects.create(project=shop, name="would merge", kind="yes_no")
    url = f"/projects/shop/review/labels/{label.pk}/"
    first, second = (
        as_user(admin_user),
        as_user(make_superuser("other-admin", "other@example.com")),
    )
    opened = form_stored(second, url, "label-form")
    data = {"name": "would merge", "kind": "yes_no", "position": "0"}
    post_from_page(first, url, {**data, "required": "on"})

    refused = second.post(url, {**opened, **data, "position": "4"})
    unsaid = second.post(url, {**data, "position": "4"})

    assert refused.status_code == 409
    assert "changed by someone else" in refused.content.decode()
    assert unsaid.status_code == 400
    label.refresh_from_db()
    assert (label.required, label.position) == (True, 0)


@pytest.mark.parametrize("sent", ["policy", "label", "label edit"])
def test_a_form_sent_with_htmx_is_refused_in_place_and_a_save_goes_to_the_settings(
    shop, admin_user, sent
):
    """The policy's and the labels' forms are sent with htmx: a refused save
    is the page again (400, swapped in place, so Back has no post to send
    again); a save taken sends the browser to the settings, as a plain post
    is redirected."""
    client = as_user(admin_user)
    htmx = {"HX-Request": "true"}
    if sent == "policy":
        url, good = URL, {**POLICY, "policy-gold_rate_percent": "5"}
        bad = {**POLICY, "policy-gold_rate_percent": "101"}
    elif sent == "label":
        url = URL
        good = {
            "form": "label",
            "label-name": "would merge",
            "label-kind": "yes_no",
            "label-position": "0",
        }
        bad = {**good, "label-categories": "a, b"}
    else:
        label = Label.objects.create(project=shop, name="cause", kind="yes_no")
        url = f"/projects/shop/review/labels/{label.pk}/"
        good = {"name": "merge?", "kind": "yes_no", "position": "0"}
        bad = {**good, "categories": "a, b"}

    refused = post_from_page(client, url, bad, headers=htmx)

    assert refused.status_code == 400
    assert 'id="form-problems"' in refused.content.decode()

    saved = post_from_page(client, url, good, headers=htmx)

    assert saved.status_code == 200
    assert saved["HX-Redirect"] == URL
    assert AuditEvent.objects.count() == 1
