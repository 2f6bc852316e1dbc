"""The projects page: each project's set-up and where its runs stand."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

from django.urls import reverse
from django.utils import timezone

from replayhub.models import Preflight, Run
from reviews.views.projects import ProjectForm
from tests.factories import make_project


def add_runs(project, state, count, *, ago=timedelta(hours=1)):
    for _ in range(count):
        number = Run.objects.count() + 1
        Run.objects.create(
            project=project,
            external_id=f"run-{number}",
            preflight=state,
            imported_at=timezone.now() - ago,
        )


def test_each_project_shows_its_runs_by_preflight_state_and_its_last_import(
    client, reviewer
):
    shop, billing = make_project("shop"), make_project("billing")
    make_project("<b>empty</b>")
    add_runs(shop, Preflight.READY, 3, ago=timedelta(hours=2))
    add_runs(shop, Preflight.UNREPRODUCIBLE, 2, ago=timedelta(minutes=5))
    add_runs(shop, Preflight.PENDING, 1, ago=timedelta(days=3))
    add_runs(billing, Preflight.READY, 1, ago=timedelta(days=2))
    client.force_login(reviewer)

    html = client.get(reverse("reviews:projects")).content.decode()

    rows = {
        re.sub(r"<[^>]+>", "", row.split("</td>", 1)[0]).strip(): row
        for row in html.split("<tr>")[2:]
    }
    assert (
        "3 ready · 2 can never reach a verdict · 1 not yet preflighted" in rows["shop"]
    )
    assert ">6" in rows["shop"] and "5m ago" in rows["shop"]
    assert "1 ready</div>" in rows["billing"] and "2d ago" in rows["billing"]
    assert "never" in rows["&lt;b&gt;empty&lt;/b&gt;"]
    assert "<b>empty</b>" not in html


def test_commands_are_shown_with_their_quotes_as_the_edit_form_has_them(
    client, reviewer
):
    shop = make_project("shop")
    shop.test_command = ["pytest", "-k", "not slow", "tests/it's.py"]
    shop.agent_command = ["sh", "-c", "exec ./agent.sh --task-file task.json"]
    shop.save()
    client.force_login(reviewer)

    html = unescape(client.get(reverse("reviews:projects")).content.decode())

    # Word for word the line the edit form holds, quotes and all.
    edit = ProjectForm.initial_for(shop)
    assert edit["agent_command"] == "sh -c 'exec ./agent.sh --task-file task.json'"
    assert edit["test_command"] == """pytest -k 'not slow' 'tests/it'"'"'s.py'"""
    # Shown in the list (its first lines) and whole in its title.
    for command in (edit["test_command"], edit["agent_command"]):
        assert f'<code class="clamp" title="{command}">{command}</code>' in html


def test_flaky_tests_are_listed_with_their_flip_rate(client, reviewer):
    from replayhub.models import TestRecord

    shop = make_project("shop")
    TestRecord.objects.create(
        project=shop,
        tree_sha="a" * 40,
        test_id="t::coin",
        passed=2,
        failed=2,
        replays=4,
    )
    TestRecord.objects.create(
        project=shop,
        tree_sha="b" * 40,
        test_id="t::coin",
        passed=4,
        failed=0,
        replays=4,
    )
    TestRecord.objects.create(
        project=shop, tree_sha="a" * 40, test_id="t::<steady>", passed=5, failed=0
    )
    TestRecord.objects.create(
        project=shop,
        tree_sha="a" * 40,
        test_id="t::<i>rare</i>",
        passed=9,
        failed=1,
        replays=10,
    )
    client.force_login(reviewer)

    html = client.get(reverse("reviews:projects")).content.decode()

    flaky = html[html.index('id="flaky"') :]
    assert "t::coin" in flaky and "50%" in flaky
    assert "t::&lt;i&gt;rare&lt;/i&gt;" in flaky and "10%" in flaky
    assert flaky.index("t::coin") < flaky.index("rare")
    assert "steady" not in flaky


def test_a_project_without_runs_is_removed_and_one_with_runs_is_kept(
    client, admin_user, reviewer
):
    from replayhub.models import Project
    from reviews.models import AuditEvent

    shop, mistake = make_project("shop"), make_project("mistake")
    add_runs(shop, Preflight.READY, 1)
    client.force_login(admin_user)

    form = client.get(reverse("reviews:project_edit", args=["mistake"]))
    kept = client.post(
        reverse("reviews:project_remove", args=["shop"]), SURE, follow=True
    )
    removed = client.post(
        reverse("reviews:project_remove", args=["mistake"]), SURE, follow=True
    )

    assert 'action="/projects/mistake/remove/"' in form.content.decode()
    assert "shop is kept: it holds 1 run, which removing it would delete." in (
        kept.content.decode()
    )
    assert "Removed project mistake." in removed.content.decode()
    assert list(Project.objects.values_list("slug", flat=True)) == ["shop"]
    event = AuditEvent.objects.get(action="project.delete")
    assert event.before == {"slug": "mistake", "repo": mistake.repo_path}
    client.force_login(reviewer)
    response = client.post(reverse("reviews:project_remove", args=["shop"]), SURE)
    assert response.status_code == 403


# A removal's ticked "Yes, remove …" box.
SURE = {"sure": "yes"}


def test_a_project_is_removed_only_once_its_yes_box_is_ticked(client, admin_user):
    from replayhub.models import Project

    make_project("mistake")
    client.force_login(admin_user)

    form = client.get(reverse("reviews:project_edit", args=["mistake"]))
    refused = client.post(
        reverse("reviews:project_remove", args=["mistake"]), follow=True
    )

    box = re.search(
        r'<label class="confirm-check">(.*?)</label>', form.content.decode()
    )
    assert box and 'name="sure" value="yes" required' in box[1]
    assert "Yes, remove project mistake (" in box[1]
    # Said beside the removal's own form, on the edit page itself.
    assert refused.status_code == 400 and refused.redirect_chain == []
    section = refused.content.decode().split('id="remove-project"', 1)[1]
    assert "Nothing removed: tick “Yes, remove project mistake” first." in section
    assert Project.objects.filter(slug="mistake").exists()


def test_a_project_with_runs_is_removed_with_them_once_its_name_is_typed(
    client, admin_user
):
    from replayhub.models import Project, Replay
    from reviews.models import AuditEvent, Review
    from reviews.services import review_decide
    from tests.factories import make_replay

    shop, other = make_project("shop"), make_project("other")
    decided = make_replay(verdict="divergent", project=shop)
    review_decide(replay=decided, reviewer=admin_user, decision="confirm")
    add_runs(shop, Preflight.READY, 1)
    kept_elsewhere = make_replay(project=other)
    client.force_login(admin_user)
    url = reverse("reviews:project_remove", args=["shop"])

    form = unescape(
        client.get(reverse("reviews:project_edit", args=["shop"])).content.decode()
    )
    untyped = client.post(url, {**SURE, "runs": "2"}, follow=True)
    mistyped = client.post(url, {**SURE, "name": "shop2", "runs": "2"}, follow=True)
    stale = client.post(url, {**SURE, "name": "shop", "runs": "1"}, follow=True)
    removed = client.post(url, {**SURE, "name": " shop ", "runs": "2"}, follow=True)

    said = "It holds 2 runs, 1 replay and 1 decision: removing it deletes them all"
    assert said in re.sub(r"<[^>]+>", "", form)
    assert re.search(
        r'<input type="text" id="remove-name" name="name" value="" required', form
    )
    assert '<input type="hidden" name="runs" value="2">' in form
    assert "Type its name to remove it with them." in untyped.content.decode()
    mistyped_page = mistyped.content.decode()
    section = mistyped_page.split('id="remove-project"', 1)[1]
    assert mistyped.status_code == 400
    assert "Nothing removed: type its name, shop." in section
    # What was typed and ticked is kept for the second try.
    assert 'name="name" value="shop2"' in section
    assert 'name="sure" value="yes" required checked' in section
    assert "You confirmed 1: look again first." in stale.content.decode()
    assert removed.redirect_chain[-1][0] == reverse("reviews:projects")
    assert (
        "Removed project shop with its 2 runs, 1 replay and 1 decision."
        in removed.content.decode()
    )
    assert list(Project.objects.values_list("slug", flat=True)) == ["other"]
    assert list(Run.objects.all()) == [kept_elsewhere.run]
    assert list(Replay.objects.all()) == [kept_elsewhere]
    assert not Review.objects.exists()
    event = AuditEvent.objects.get(action="project.delete")
    assert event.actor == admin_user
    assert event.before == {
        "slug": "shop",
        "repo": shop.repo_path,
        "runs": 2,
        "replays": 1,
        "decisions": 1,
    }


def test_a_project_is_kept_while_one_of_its_replays_runs(client, admin_user):
    from replayhub.models import Project, Replay, ReplayStatus
    from tests.factories import make_replay

    shop = make_project("shop")
    finished = make_replay(project=shop)
    Replay.objects.create(
        run=finished.run, project=shop, status=ReplayStatus.RUNNING, phase="agent"
    )
    client.force_login(admin_user)

    form = client.get(reverse("reviews:project_edit", args=["shop"])).content.decode()
    kept = client.post(
        reverse("reviews:project_remove", args=["shop"]),
        {**SURE, "name": "shop", "runs": "1"},
        follow=True,
    )

    assert "1 of its replays is running: it can be removed once it has ended." in (form)
    assert "shop is kept: 1 replay of it is running; remove it once they have" in (
        kept.content.decode()
    )
    assert Project.objects.filter(slug="shop").exists()


def test_a_decision_taken_back_is_not_counted_among_what_a_removal_deletes(
    client, admin_user
):
    from reviews.services import review_decide, review_undo
    from tests.factories import make_replay

    shop = make_project("shop")
    decided = make_replay(verdict="divergent", project=shop)
    review = review_decide(replay=decided, reviewer=admin_user, decision="confirm")
    review_undo(review=review, reviewer=admin_user)
    client.force_login(admin_user)

    form = unescape(
        client.get(reverse("reviews:project_edit", args=["shop"])).content.decode()
    )

    said = "It holds 1 run, 1 replay and 0 decisions: removing it deletes them all"
    assert said in re.sub(r"<[^>]+>", "", form)
