"""The project form's checks as an admin meets them: a variable no shell
would expand, a number out of its bounds, a cap that refuses everything,
and what saving an edit says it changed."""

from __future__ import annotations

import html
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from replayhub.models import Project
from tests.gitrepos import project_repo
from tests.reviews.views.stored import post_from_page
from tests.reviews.views.test_project_page import errors_beside, form


def said_beside(response, field: str) -> list[str]:
    return [html.unescape(e) for e in errors_beside(response.content.decode())[field]]


@pytest.mark.parametrize(
    ("field", "command", "variable", "hint"),
    [
        ("test_command", "pytest $PYTEST_ARGS", "$PYTEST_ARGS", "the tests get"),
        ("setup_command", "pip install -r $REQS", "$REQS", "the setup gets"),
        ("setup_command", "pip install -r ${REQS}", "${REQS}", "the setup gets"),
    ],
)
def test_a_variable_in_the_test_or_setup_command_is_refused_beside_it(
    client, admin_user, tmp_path, field, command, variable, hint
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:project_create"), form(repo, **{field: command})
    )

    assert response.status_code == 400
    said = said_beside(response, field)
    assert len(said) == 1
    assert said[0].startswith(f"{variable} is not expanded: no shell runs the command")
    assert hint in said[0] and "sh -c" in said[0]
    assert "{max_turns}" not in said[0]  # the agent command's words only
    assert not Project.objects.filter(slug="cart").exists()


def test_a_shell_the_test_and_setup_commands_run_expands_its_own_variables(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:project_create"),
        form(
            repo,
            test_command="sh -c 'pytest $PYTEST_ARGS'",
            setup_command="sh -c 'pip install --target \"$REPLAYHUB_ENV_DIR\" .'",
        ),
    )

    assert response.status_code == 302
    project = Project.objects.get(slug="cart")
    assert project.test_command == ["sh", "-c", "pytest $PYTEST_ARGS"]
    assert project.setup_command[:2] == ["sh", "-c"]


def test_the_commands_refuse_a_variable_in_the_test_or_setup_command(db, tmp_path):
    repo = project_repo(tmp_path).path
    base = ["cart", "--repo", str(repo), "--agent-command", "./agent.sh"]
    with pytest.raises(CommandError, match=r"--test-command: \$PYTEST_ARGS is not"):
        call_command(
            "project_add",
            *base,
            "--test-command",
            "pytest $PYTEST_ARGS",
            stdout=StringIO(),
        )
    call_command("project_add", *base, "--test-command", "pytest -q", stdout=StringIO())
    with pytest.raises(CommandError, match=r"--setup-command: \$REQS is not"):
        call_command(
            "project_edit",
            "cart",
            "--setup-command",
            "pip install -r $REQS",
            stdout=StringIO(),
        )
    assert Project.objects.get(slug="cart").setup_command == []


@pytest.mark.parametrize(
    ("field", "values", "said"),
    [
        ("time_limit_seconds", ["-5", "0"], "At least 1 s."),
        ("max_tokens", ["-5", "0"], "At least 1 token."),
        ("evidence_floor", ["-5", "-1"], "Cannot be negative."),
        ("time_limit_seconds", ["86401", str(10**20)], "At most 86,400 s."),
        ("max_cost_usd", ["100001", "1" + "0" * 15], "At most 100,000 USD."),
        ("max_anchors", ["-5", "0"], "Draw at least one anchor."),
        ("max_seed_tokens", ["-5", "0"], "A seed holds at least one token."),
    ],
)
def test_a_number_out_of_its_bounds_gets_one_message_whatever_the_value(
    client, admin_user, tmp_path, field, values, said
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    for value in values:
        response = client.post(
            reverse("reviews:project_create"), form(repo, **{field: value})
        )
        assert response.status_code == 400
        assert said_beside(response, field) == [said], value
    # Nor does the browser answer first, in its own words.
    shown = client.get(reverse("reviews:project_create")).content.decode()
    assert 'name="time_limit_seconds" value="600" required' in shown
    for name in ("max_anchors", "max_seed_tokens", "rollout_seed"):
        tag = re.search(rf'<input[^>]*name="{name}"[^>]*>', shown)
        assert tag and " min=" not in tag[0] and " max=" not in tag[0], tag


@pytest.mark.parametrize(
    ("slug", "said"),
    [
        ("s" * 120, "At most 64 characters (this one has 120)."),
        (
            "my project ü",
            "Use letters a-z or A-Z, digits, '-' and '_' only, starting with a "
            "letter or digit.",
        ),
        (
            "_shop",
            "Use letters a-z or A-Z, digits, '-' and '_' only, starting with a "
            "letter or digit.",
        ),
    ],
)
def test_a_bad_slug_is_sent_whole_and_refused_in_one_short_line_of_the_apps_words(
    client, admin_user, tmp_path, slug, said
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    # The browser does not cut a longer paste short without a word.
    shown = client.get(reverse("reviews:project_create")).content.decode()
    tag = re.search(r'<input[^>]*name="slug"[^>]*>', shown)
    assert tag and "maxlength" not in tag[0]

    response = client.post(reverse("reviews:project_create"), form(repo, slug=slug))

    assert response.status_code == 400
    assert said_beside(response, "slug") == [said]
    # The value is shown once, in its field, never again in the message.
    assert response.content.decode().count(html.escape(slug)) == 1
    assert not Project.objects.exists()


def test_a_money_cap_of_zero_is_refused_as_a_count_of_zero_is(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:project_create"),
        form(repo, max_cost_usd="0", max_requests="0"),
    )

    assert response.status_code == 400
    assert said_beside(response, "max_requests") == ["At least 1 call."]
    assert said_beside(response, "max_cost_usd") == [
        "More than 0 USD: a cap of 0 refuses every model call (empty: no cap)."
    ]
    with pytest.raises(CommandError, match=r"--max-cost-usd: more than 0 USD"):
        call_command(
            "project_add",
            "cart",
            "--repo",
            str(repo),
            "--test-command",
            "pytest",
            "--agent-command",
            "./agent.sh",
            "--max-cost-usd",
            "0",
            stdout=StringIO(),
        )
    response = client.post(
        reverse("reviews:project_create"), form(repo, max_cost_usd="0.5")
    )
    assert response.status_code == 302
    assert str(Project.objects.get(slug="cart").max_cost_usd) == "0.5000"


def test_saving_an_edit_says_what_changed_or_that_nothing_did(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    assert client.post(reverse("reviews:project_create"), form(repo)).status_code == 302
    edit = reverse("reviews:project_edit", args=["cart"])
    shown = client.get(edit).context["form"]
    # The form posted back as it is shown: nothing changed.
    unchanged = {
        name: value
        for name, value in (
            (field.name, field.value()) for field in shown if field.value() is not None
        )
    }
    unchanged["providers"] = []

    response = post_from_page(client, edit, unchanged, follow=True)

    said = [str(m) for m in response.context["messages"]]
    assert said == ["No changes to project cart: nothing was saved."]

    response = post_from_page(
        client,
        edit,
        {
            **unchanged,
            "time_limit_seconds": "300",
            "max_tokens": "200000",
            "test_command": "pytest -x",
        },
        follow=True,
    )

    said = [str(m) for m in response.context["messages"]]
    assert said == [
        "Saved project cart: test command python -m pytest -q → pytest -x; "
        "agent time limit (s) 900 → 300; tokens per replay none → 200,000."
    ]


def test_no_text_input_of_the_project_form_cuts_a_paste_short(
    client, admin_user, tmp_path
):
    """Every length is the form's to say: a repository path past its limit is
    sent whole and refused with its count, what was typed kept."""
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    shown = client.get(reverse("reviews:project_create")).content.decode()
    assert "maxlength" not in shown.split("<main", 1)[1]

    response = client.post(
        reverse("reviews:project_create"), form(repo, agent_version="9" * 70)
    )

    assert response.status_code == 400
    assert said_beside(response, "agent_version") == [
        "At most 64 characters (this one has 70)."
    ]
    assert "9" * 70 in response.content.decode()
