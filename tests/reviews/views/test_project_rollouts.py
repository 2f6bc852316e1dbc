"""How a rollout project draws and judges its seeds, set on the project form:
shown, saved and audited, each refusal beside its field in the words the
commands use too, and the commands still setting them."""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from replayhub.models import Project
from reviews.models import AuditEvent
from tests.factories import make_user
from tests.gitrepos import project_repo
from tests.reviews.views.stored import post_from_page
from tests.reviews.views.test_project_page import form


@pytest.fixture
def rl(db, tmp_path):
    repo = project_repo(tmp_path).path
    call_command(
        "project_add", "rl", "--repo", str(repo), "--harness-command", "./harness"
    )
    return Project.objects.get(slug="rl")


def posted(project: Project, **changes) -> dict:
    """What the edit form posts as shown for ``project``, with ``changes``."""
    data = form(
        project.repo_path,
        slug=project.slug,
        test_command="",
        agent_command="",
        harness_command="./harness",
        rollout_mode=project.rollout_mode,
        rollout_anchor=project.rollout_anchor,
        max_anchors="" if project.max_anchors is None else str(project.max_anchors),
        rollout_seed=str(project.rollout_seed),
        min_source_reward="",
        max_source_reward="",
        max_seed_tokens="",
        pass_threshold=str(project.pass_threshold),
        verification_turn=project.verification_turn,
    )
    data.update(changes)
    return data


def field_box(page: str, name: str) -> str:
    """The form's box of one field: its label, input, help and problems."""
    start = page.index(f'for="id_{name}"')
    return page[start : page.index('<div class="field', start)]


def test_an_admin_sees_and_changes_the_draw_on_the_form_and_it_is_audited(
    client, admin_user, rl
):
    client.force_login(admin_user)
    edit = reverse("reviews:project_edit", args=["rl"])

    shown = client.get(edit).content.decode()
    rollouts = shown[shown.index('id="group-rollouts"') :]
    for label in (
        "Rollout mode",
        "Anchor",
        "Anchors drawn per rollout",
        "Draw seed",
        "Minimum source reward",
        "Pass threshold",
        "Verification turn",
    ):
        assert f">{label}</label>" in rollouts
    assert re.search(r'name="max_anchors" value="1"', rollouts)
    assert "those the commands set" not in shown

    response = post_from_page(
        client,
        edit,
        posted(
            rl,
            rollout_anchor="tool-call",
            max_anchors="3",
            rollout_seed="7",
            min_source_reward="0.25",
            max_source_reward="1",
            max_seed_tokens="4000",
            pass_threshold="0.5",
        ),
    )

    assert response.status_code == 302
    rl.refresh_from_db()
    assert (
        rl.rollout_anchor,
        rl.max_anchors,
        rl.rollout_seed,
        rl.min_source_reward,
        rl.max_source_reward,
        rl.max_seed_tokens,
        rl.pass_threshold,
    ) == ("tool-call", 3, 7, 0.25, 1.0, 4000, 0.5)
    event = AuditEvent.objects.get(action="project.update")
    assert event.actor == admin_user
    assert event.before["max_anchors"] == 1 and event.after["max_anchors"] == 3
    assert event.after["rollout_anchor"] == "tool-call"
    assert event.after["pass_threshold"] == 0.5

    # Empty: every anchor is drawn. The command keeps setting the draw.
    post_from_page(client, edit, posted(rl, max_anchors=""))
    assert Project.objects.get(slug="rl").max_anchors is None
    call_command("project_edit", "rl", "--max-anchors", "2")
    assert Project.objects.get(slug="rl").max_anchors == 2


def test_a_bad_draw_is_refused_beside_its_field_and_nothing_changes(
    client, admin_user, rl
):
    client.force_login(admin_user)
    edit = reverse("reviews:project_edit", args=["rl"])

    response = post_from_page(
        client,
        edit,
        posted(
            rl,
            rollout_anchor="tool-call",
            max_anchors="0",
            min_source_reward="1",
            max_source_reward="0",
            rollout_seed=str(2**31),
        ),
    )

    assert response.status_code == 400
    page = response.content.decode()
    assert "Draw at least one anchor." in field_box(page, "max_anchors")
    assert "The minimum source reward is above the maximum." in field_box(
        page, "max_source_reward"
    )
    assert "At most 2,147,483,647." in field_box(page, "rollout_seed")
    assert "above the maximum" not in field_box(page, "max_anchors")
    rl.refresh_from_db()
    assert (rl.rollout_anchor, rl.max_anchors, rl.rollout_seed) == (
        "compaction",
        1,
        0,
    )
    assert not AuditEvent.objects.filter(action="project.update").exists()

    # The command refuses the same values with the same check.
    with pytest.raises(CommandError, match="--max-anchors: draw at least one anchor"):
        call_command(
            "project_edit", "rl", "--anchor", "tool-call", "--max-anchors", "0"
        )


def test_a_post_without_the_draw_keeps_it(client, admin_user, rl):
    Project.objects.filter(pk=rl.pk).update(rollout_anchor="tool-call", max_anchors=4)
    client.force_login(admin_user)
    data = form(
        rl.repo_path,
        slug="rl",
        test_command="",
        agent_command="",
        harness_command="./h",
    )
    response = post_from_page(
        client, reverse("reviews:project_edit", args=["rl"]), data
    )
    assert response.status_code == 302
    rl.refresh_from_db()
    assert (rl.harness_command, rl.rollout_anchor, rl.max_anchors) == (
        ["./h"],
        "tool-call",
        4,
    )


def test_only_those_who_edit_projects_change_the_draw(client, rl):
    client.force_login(make_user("lena", "lead"))
    edit = reverse("reviews:project_edit", args=["rl"])
    assert client.get(edit).status_code == 403
    assert client.post(edit, posted(rl, max_anchors="5")).status_code == 403
    assert Project.objects.get(slug="rl").max_anchors == 1
