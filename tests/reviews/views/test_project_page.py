"""A project's page, "Replay now" (budget-checked, audited) and the project form."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from replayhub.models import Project, Replay, Run
from replayhub.models.project_settings import SETTINGS
from replayhub.models.projects import DEFAULT_IGNORED_PATHS
from reviews.models import AuditEvent
from tests.factories import make_budget, make_night, make_project, make_replay, share_of
from tests.gitrepos import project_repo
from tests.gitservers import HttpGitServer
from tests.reviews.views.stored import post_from_page


def page(client, slug="shop", **query):
    return client.get(reverse("reviews:project_detail", args=[slug]), query)


def run_ids(response) -> set[str]:
    return {run.external_id for run in response.context["runs"]}


@pytest.fixture
def runs(db):
    shop = make_project("shop")
    done = make_replay(verdict="divergent", project=shop, model="gpt-5")
    other = make_replay(verdict="equivalent", project=shop, model="claude-x")
    fresh = Run.objects.create(
        project=shop, external_id="never", title="Not yet", preflight="ready"
    )
    gone = Run.objects.create(
        project=shop,
        external_id="gone",
        preflight="unreproducible",
        preflight_reason="the base commit is missing",
        imported_at=timezone.now() - timedelta(days=40),
    )
    return {"done": done, "other": other, "fresh": fresh, "gone": gone}


def test_a_project_page_lists_its_runs_with_links_to_their_replays(
    client, reviewer, runs
):
    client.force_login(reviewer)
    response = page(client)
    assert response.status_code == 200
    html = response.content.decode()
    assert run_ids(response) == {
        runs["done"].run.external_id,
        runs["other"].run.external_id,
        "never",
        "gone",
    }
    detail = reverse("reviews:replay_detail", args=[runs["done"].pk])
    assert f'href="{detail}"' in html
    assert "never replayed" in html
    assert "Replay now" not in html  # a reviewer does not start replays
    projects = client.get(reverse("reviews:projects")).content.decode()
    assert f'href="{reverse("reviews:project_detail", args=["shop"])}"' in projects


def test_the_runs_filter_by_preflight_status_verdict_model_and_date(
    client, reviewer, runs
):
    client.force_login(reviewer)
    assert run_ids(page(client, preflight="unreproducible")) == {"gone"}
    assert run_ids(page(client, status="never")) == {"never", "gone"}
    assert run_ids(page(client, verdict="divergent")) == {runs["done"].run.external_id}
    assert run_ids(page(client, model="claude")) == {runs["other"].run.external_id}
    since = (timezone.now() - timedelta(days=1)).date().isoformat()
    assert "gone" not in run_ids(page(client, since=since))
    until = (timezone.now() - timedelta(days=30)).date().isoformat()
    assert run_ids(page(client, until=until)) == {"gone"}
    # A bad filter is said and ignored, not a 500.
    response = page(client, since="yesterday")
    assert response.status_code == 200 and len(run_ids(response)) == 4


def test_an_admin_replays_a_run_now_and_it_is_audited(client, admin_user, runs):
    client.force_login(admin_user)
    run = runs["fresh"]
    url = reverse("reviews:run_replay_now", args=["shop", run.pk])
    response = client.post(url)
    replay = Replay.objects.get(run=run)
    assert response.status_code == 302
    assert response["Location"] == reverse("reviews:replay_detail", args=[replay.pk])
    assert (replay.trigger, replay.requested_by) == ("now", admin_user)
    event = AuditEvent.objects.get(action="replay.request")
    assert event.actor == admin_user and event.after["run"] == "never"
    html = client.get(response["Location"]).content.decode()
    assert "started a replay now" in html


def test_replay_now_respects_tonights_budget(client, admin_user, runs):
    client.force_login(admin_user)
    now = timezone.now()
    night = make_night(
        runs["fresh"].project,
        start=now - timedelta(hours=1),
        hours=3,
        shares={
            "agentic": {
                "limit_replays": 1,
                "limit_sandbox_seconds": 100_000,
                "limit_tokens": 1_000_000,
                "limit_cost_usd": Decimal(10),
            }
        },
    )
    url = reverse("reviews:run_replay_now", args=["shop", runs["fresh"].pk])
    client.post(url)
    assert share_of(night).reserved_replays == 1
    assert Replay.objects.get(run=runs["fresh"]).night == night

    again = client.post(url, follow=True)
    assert b"Not started: Tonight&#x27;s budget has no room" in again.content
    assert Replay.objects.filter(run=runs["fresh"]).count() == 1
    assert AuditEvent.objects.filter(action="replay.request").count() == 1


def test_replay_now_outside_a_night_must_fit_a_nights_budget(client, admin_user, runs):
    client.force_login(admin_user)
    make_budget(runs["fresh"].project, shares={"agentic": {"max_replays": 0}})
    url = reverse("reviews:run_replay_now", args=["shop", runs["fresh"].pk])
    response = client.post(url, follow=True)
    assert b"Not started: One replay is estimated past a whole night" in (
        response.content
    )
    # With the figures: what one replay needs, and what a night has.
    assert b"(replays: 1 needed, 0 a night)" in response.content
    assert not Replay.objects.filter(run=runs["fresh"]).exists()


def test_an_unreproducible_run_is_not_replayed(client, admin_user, runs):
    client.force_login(admin_user)
    url = reverse("reviews:run_replay_now", args=["shop", runs["gone"].pk])
    response = client.post(url, follow=True)
    assert b"can never reach a verdict: the base commit is missing" in (
        response.content
    )
    assert not Replay.objects.filter(run=runs["gone"]).exists()


@pytest.mark.parametrize("role", ["reviewer", "lead"])
def test_only_admins_start_replays_and_edit_projects(client, request, runs, role):
    client.force_login(request.getfixturevalue(role))
    url = reverse("reviews:run_replay_now", args=["shop", runs["fresh"].pk])
    assert client.post(url).status_code == 403
    assert client.get(reverse("reviews:project_create")).status_code == 403
    assert client.get(reverse("reviews:project_edit", args=["shop"])).status_code == 403
    assert not Replay.objects.filter(run=runs["fresh"]).exists()


def form(repo_path, **overrides):
    """What the form posts as it is shown for a new project, with these changes."""
    data = {
        setting.field: " ".join(setting.default)
        if setting.kind == "globs"
        else ("" if setting.default is None else str(setting.default))
        for setting in SETTINGS
    }
    data.update(
        {
            "slug": "cart",
            "repo": str(repo_path),
            "test_command": "python -m pytest -q",
            "agent_command": "./agent.sh --fast",
            "allowed_paths": "src/** tests/**",
            "test_paths": "",
            "time_limit_seconds": "900",
            "default_branch": "",
            "egress_agent": "pypi.org:443",
            "egress_tests": "",
        }
    )
    data.update(overrides)
    return data


def test_an_admin_registers_a_project_in_the_browser_form(client, admin_user, tmp_path):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    response = client.post(reverse("reviews:project_create"), form(repo))
    assert response.status_code == 302
    project = Project.objects.get(slug="cart")
    assert project.test_command == ["python", "-m", "pytest", "-q"]
    assert project.agent_command == ["./agent.sh", "--fast"]
    assert project.allowed_paths == ["src/**", "tests/**"]
    assert project.egress_agent == ["pypi.org:443"]
    assert project.test_paths  # the default layouts, as project_add stores them
    assert AuditEvent.objects.get(action="project.create").actor == admin_user


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("allowed_paths", "../outside src/**", "leaves the repository"),
        ("allowed_paths", "/abs/**", "is absolute"),
        ("test_paths", "src/[unclosed", "is never closed"),
        ("default_branch", "bad..branch", "is not a branch name git takes"),
        # A repository on this host says which branches it has.
        ("default_branch", "no-such-branch", "has no branch 'no-such-branch'"),
    ],
)
def test_the_form_refuses_paths_and_branches_that_can_never_match(
    client, admin_user, tmp_path, field, value, said
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    sent = form(repo, **{field: value})
    response = client.post(reverse("reviews:project_create"), sent)
    assert response.status_code == 400
    assert said in html.unescape(response.content.decode())
    assert not Project.objects.filter(slug="cart").exists()


def test_one_submit_says_every_fields_problem_at_once(client, admin_user, tmp_path):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    sent = form(
        repo,
        allowed_paths="../x /abs/** src/[unclosed",
        test_paths="../tests/**",
        default_branch="no-such-branch",
    )

    response = client.post(reverse("reviews:project_create"), sent)

    page = html.unescape(response.content.decode())
    assert response.status_code == 400
    for said in [
        "'../x' leaves the repository",
        "'/abs/**' is absolute",
        "'src/[unclosed' has a '[' that is never closed",
        "'../tests/**' leaves the repository",
        "has no branch 'no-such-branch'",
    ]:
        assert said in page, said
    assert not Project.objects.filter(slug="cart").exists()


def test_an_admin_registers_a_private_remote_by_its_url_and_variable(
    client, admin_user, tmp_path, mirror_dir, monkeypatch
):
    repo = project_repo(tmp_path)
    monkeypatch.setenv("REPLAYHUB_REPO_TOKEN_CART", "tok-for-the-form")
    client.force_login(admin_user)
    with HttpGitServer(tmp_path, password="tok-for-the-form") as server:
        url = server.url(repo.path.name)
        refused = client.post(
            reverse("reviews:project_create"),
            form(url, repo_credential_env="CART-TOKEN"),
        )
        response = client.post(
            reverse("reviews:project_create"),
            form(url, repo_credential_env="REPLAYHUB_REPO_TOKEN_CART"),
        )

    assert refused.status_code == 400
    assert "is not an environment variable name" in refused.content.decode()
    assert response.status_code == 302
    project = Project.objects.get(slug="cart")
    assert (project.repo_path, project.repo_credential_env) == (
        url,
        "REPLAYHUB_REPO_TOKEN_CART",
    )
    event = AuditEvent.objects.get(action="project.create")
    assert "tok-for-the-form" not in str(event.after)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("repo", "/nonexistent/repo", "is not a git repository."),
        # Paths this host cannot even look at: said the same way, never a 500.
        ("repo", "/" + "a" * 300, "is not a git repository."),
        ("repo", "~no-such-user-here/repo", "is not a git repository."),
        ("allowed_paths", "[z-a].py", "is not a valid"),
        ("test_command", "pytest 'unclosed", "Cannot split"),
        ("time_limit_seconds", "0", "At least 1 s."),
        ("max_tokens", "0", "At least 1 token."),
        ("ignored_paths", ".aider* [z-a]", "is not a valid"),
        ("max_cost_usd", "-1", "Cannot be negative."),
        ("egress_agent", "pypi.org", "pypi.org"),
        ("slug", "shop", "already exists"),
        ("test_command", "", "Required, unless the project runs rollouts"),
        ("setup_inputs", "[z-a].lock", "is not a valid"),
        ("egress_setup", "index.example", "index.example"),
        ("setup_command", "sh -c 'unclosed", "Cannot split"),
        ("default_branch", "bad..branch", "is not a branch name git takes."),
        ("default_branch", "no-such-branch", "(its branches: main)."),
    ],
)
def test_the_form_refuses_what_project_add_refuses_beside_the_field(
    client, admin_user, tmp_path, field, value, message
):
    make_project("shop")
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:project_create"), form(repo, **{field: value})
    )
    assert response.status_code == 400
    html = response.content.decode()
    at = html.index(f'name="{field}"')
    # Beside its field, and listed at the top with a link to it.
    error = html.index(message, at)
    assert html.rfind('class="field', 0, error) < at
    assert html.index(message) < html.index('id="project-form"')
    assert not Project.objects.filter(slug="cart").exists()


def errors_beside(html: str) -> dict[str, list[str]]:
    """Each field's errors as the form shows them, by the field's name."""
    found: dict[str, list[str]] = {}
    for block in html.split('<div class="field')[1:]:
        name = re.search(r'name="([a-z_]+)"', block)
        errors = re.findall(r'<p class="error" role="alert">([^<]*)</p>', block)
        if name and errors:
            found[name.group(1)] = errors
    return found


def test_the_form_reports_every_fields_error_at_once_in_its_own_words(
    client, admin_user, tmp_path
):
    make_project("shop")
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    bad = {
        "slug": "shop",
        "time_limit_seconds": "0",
        "max_tokens": "0",
        "max_cost_usd": "-1",
        "allowed_paths": "[z-a].py",
        "egress_agent": "pypi.org",
        "test_command": "pytest 'unclosed",
        "agent_command": "",
    }

    response = client.post(reverse("reviews:project_create"), form(repo, **bad))

    assert response.status_code == 400
    html = response.content.decode()
    errors = errors_beside(html)
    assert set(errors) == set(bad)
    assert errors["time_limit_seconds"] == ["At least 1 s."]
    assert errors["agent_command"] == [
        "Required, unless the project runs rollouts (give a harness command then)."
    ]
    # The form's words: no command-line option is named.
    assert not [e for shown in errors.values() for e in shown if "--" in e]


def test_a_field_the_form_refuses_does_not_hide_the_other_problems(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:project_create"),
        form(repo, time_limit_seconds="soon", repo="/nonexistent/repo"),
    )

    errors = errors_beside(response.content.decode())
    assert errors["time_limit_seconds"] == ["Enter a whole number."]
    assert errors["repo"] == ["/nonexistent/repo is not a git repository."]


def test_a_bad_default_branch_is_said_beside_its_field_beside_other_problems(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:project_create"),
        form(repo, time_limit_seconds="soon", default_branch="bad..branch"),
    )

    page = response.content.decode()
    errors = errors_beside(page)
    assert errors["time_limit_seconds"] == ["Enter a whole number."]
    assert errors["default_branch"] == [
        "&#x27;bad..branch&#x27; is not a branch name git takes."
    ]
    # Listed at the top too, as a link to the field.
    top = page[: page.index('id="project-form"')]
    assert '<a href="#id_default_branch">' in top


@pytest.mark.parametrize(
    ("command", "variable"),
    [
        ("./agent.sh --model $MODEL", "$MODEL"),
        ("./agent.sh --steps ${MAX_STEPS}", "${MAX_STEPS}"),
        # Only the script a shell runs is expanded, not the shell's other words.
        ("sh -c 'exec ./agent.sh \"$0\"' $HOME", "$HOME"),
    ],
)
def test_a_variable_in_the_agent_command_is_refused_beside_it(
    client, admin_user, tmp_path, command, variable
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    response = client.post(
        reverse("reviews:project_create"), form(repo, agent_command=command)
    )

    assert response.status_code == 400
    said = [
        html.unescape(e)
        for e in errors_beside(response.content.decode())["agent_command"]
    ]
    assert len(said) == 1
    assert said[0].startswith(f"{variable} is not expanded: no shell runs the command")
    assert "{max_turns} or {max_tokens}" in said[0]
    assert not Project.objects.filter(slug="cart").exists()


def test_a_shell_the_agent_command_runs_expands_its_own_variables(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    command = "sh -c 'exec ./agent.sh --model \"$REPLAYHUB_MODEL\"'"
    response = client.post(
        reverse("reviews:project_create"), form(repo, agent_command=command)
    )

    assert response.status_code == 302
    assert Project.objects.get(slug="cart").agent_command == [
        "sh",
        "-c",
        'exec ./agent.sh --model "$REPLAYHUB_MODEL"',
    ]


def test_a_test_time_limit_longer_than_a_whole_night_is_refused_beside_it(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    client.post(reverse("reviews:project_create"), form(repo))
    make_budget(
        Project.objects.get(slug="cart"),
        shares={"agentic": {"max_sandbox_minutes": 30}},
    )
    edit = reverse("reviews:project_edit", args=["cart"])

    longer = post_from_page(client, edit, form(repo, test_time_limit_seconds="3600"))
    unset = post_from_page(
        client, edit, form(repo, time_limit_seconds="1801", test_time_limit_seconds="")
    )
    whole = post_from_page(client, edit, form(repo, test_time_limit_seconds="1800"))

    assert longer.status_code == 400
    assert errors_beside(longer.content.decode())["test_time_limit_seconds"] == [
        "The test time limit, 3,600 s, is longer than a night&#x27;s whole "
        "sandbox time of 1,800 s (the agentic tier&#x27;s 30 minutes): shorten "
        "it, or give the night more sandbox minutes."
    ]
    assert errors_beside(unset.content.decode())["test_time_limit_seconds"] == [
        "Empty, the test time limit is the agent&#x27;s, 1,801 s, longer than a "
        "night&#x27;s whole sandbox time of 1,800 s (the agentic tier&#x27;s 30 "
        "minutes): give a shorter one."
    ]
    assert whole.status_code == 302
    assert Project.objects.get(slug="cart").test_time_limit_seconds == 1800


def test_editing_a_project_is_audited_field_by_field(client, admin_user, tmp_path):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    client.post(reverse("reviews:project_create"), form(repo))
    edit = reverse("reviews:project_edit", args=["cart"])
    shown = client.get(edit).content.decode()
    assert 'value="./agent.sh --fast"' in shown
    response = post_from_page(client, edit, form(repo, time_limit_seconds="1200"))
    assert response.status_code == 302
    assert Project.objects.get(slug="cart").time_limit_seconds == 1200
    event = AuditEvent.objects.get(action="project.update")
    assert event.before == {"time_limit_seconds": 900}
    assert event.after == {"time_limit_seconds": 1200}


def test_a_command_with_quoted_words_survives_an_edit_unchanged(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    command = 'sh -c "python -m pytest -q tests"'
    client.post(reverse("reviews:project_create"), form(repo, test_command=command))
    stored = ["sh", "-c", "python -m pytest -q tests"]
    assert Project.objects.get(slug="cart").test_command == stored
    edit = reverse("reviews:project_edit", args=["cart"])
    shown = client.get(edit).context["form"].initial

    response = post_from_page(
        client, edit, form(repo, test_command=shown["test_command"])
    )

    assert response.status_code == 302
    assert Project.objects.get(slug="cart").test_command == stored
    assert not AuditEvent.objects.filter(action="project.update").exists()


def test_the_form_sets_the_setup_phase_and_a_rollout_harness(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    data = form(
        repo,
        setup_command="sh setup.sh --quiet",
        setup_inputs="requirements*.txt",
        egress_setup="127.0.0.1:8766",
    )
    assert client.post(reverse("reviews:project_create"), data).status_code == 302
    cart = Project.objects.get(slug="cart")
    assert cart.setup_command == ["sh", "setup.sh", "--quiet"]
    assert cart.setup_inputs == ["requirements*.txt"]
    assert cart.egress_setup == ["127.0.0.1:8766"]

    # A project of rollouts needs no test or agent command, and is warned
    # that without a separate verifier none of its replays can be equivalent.
    rollouts = form(
        repo, slug="rl", test_command="", agent_command="", harness_command="./run"
    )
    response = client.post(reverse("reviews:project_create"), rollouts, follow=True)
    rl = Project.objects.get(slug="rl")
    assert (rl.harness_command, rl.test_command, rl.verifier_command) == (
        ["./run"],
        [],
        [],
    )
    assert "has a rollout harness but no separate verifier" in response.content.decode()
    edit = reverse("reviews:project_edit", args=["rl"])
    data = {**rollouts, "verifier_command": "python3 verify.py"}
    response = post_from_page(client, edit, data, follow=True)
    assert Project.objects.get(slug="rl").verifier_command == ["python3", "verify.py"]
    assert "no separate verifier" not in response.content.decode()


def test_the_replay_now_address_opened_again_leads_back(client, admin_user, runs):
    client.force_login(admin_user)
    url = reverse("reviews:run_replay_now", args=["shop", runs["fresh"].pk])
    response = client.get(url)
    assert response["Location"] == reverse("reviews:project_detail", args=["shop"])
    assert not Replay.objects.filter(run=runs["fresh"]).exists()


def test_the_form_groups_caps_setup_limits_and_paths_and_saves_them(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    shown = client.get(reverse("reviews:project_create")).content.decode()
    for legend in ("Paths", "Caps per replay", "Setup limits", "Test gate"):
        assert f"<legend>{legend}</legend>" in shown
    caps = shown.index('id="group-caps-per-replay"')
    setup = shown.index('id="group-setup-limits"')
    assert caps < shown.index('name="max_cost_usd"') < setup
    assert setup < shown.index('name="setup_memory_mb"')
    paths = shown.index('id="group-paths"')
    assert paths < shown.index('name="ignored_paths"') < caps
    assert 'value=".aider* .aider*/** .claude/**' in shown

    response = client.post(
        reverse("reviews:project_create"),
        form(
            repo,
            max_tokens="5000",
            max_cost_usd="1.5",
            cap_grace_seconds="3",
            setup_memory_mb="8192",
            runner="docker",
            ignored_paths=".aider* .claude/**",
        ),
    )

    assert response.status_code == 302
    cart = Project.objects.get(slug="cart")
    assert (cart.max_tokens, cart.max_cost_usd, cart.cap_grace_seconds) == (
        5000,
        Decimal("1.5"),
        3,
    )
    assert (cart.setup_memory_mb, cart.runner) == (8192, "docker")
    assert cart.ignored_paths == [".aider*", ".claude/**"]
    edit = reverse("reviews:project_edit", args=["cart"])
    assert client.get(edit).context["form"].initial["max_tokens"] == 5000
    post_from_page(client, edit, form(repo, max_tokens="", max_cost_usd="1.5000"))
    event = AuditEvent.objects.get(action="project.update")
    assert (event.before, event.after) == (
        {
            "max_tokens": 5000,
            "runner": "docker",
            "setup_memory_mb": 8192,
            "cap_grace_seconds": 3,
            "ignored_paths": [".aider*", ".claude/**"],
        },
        {
            "max_tokens": None,
            "runner": "bwrap",
            "setup_memory_mb": 4096,
            "cap_grace_seconds": 10,
            "ignored_paths": list(DEFAULT_IGNORED_PATHS),
        },
    )


IMAGE = "registry.example/base@sha256:" + "ab" * 32


def test_the_form_sets_the_sandbox_settings_project_add_takes_and_the_share_group(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)
    chosen = {
        "root_image": IMAGE,
        "require_image_match": "on",
        "allow_test_interference": "on",
        "env_share_group": "python-3.11",
    }

    assert (
        client.post(reverse("reviews:project_create"), form(repo, **chosen)).status_code
        == 302
    )

    project = Project.objects.get(slug="cart")
    assert (project.root_image, project.require_image_match) == (IMAGE, True)
    assert project.allow_test_interference is True
    assert project.env_share_group == "python-3.11"
    # Shown again on the edit page, and an edit that unticks one keeps the rest.
    edit = reverse("reviews:project_edit", args=["cart"])
    shown = client.get(edit).content.decode()
    assert f'value="{IMAGE}"' in shown and 'value="python-3.11"' in shown
    unticked = {**chosen}
    del unticked["allow_test_interference"]
    assert post_from_page(client, edit, form(repo, **unticked)).status_code == 302
    project.refresh_from_db()
    assert project.allow_test_interference is False
    assert project.root_image == IMAGE


def test_a_root_image_or_share_group_that_can_never_work_is_refused_beside_it(
    client, admin_user, tmp_path
):
    repo = project_repo(tmp_path).path
    client.force_login(admin_user)

    answer = client.post(
        reverse("reviews:project_create"),
        form(
            repo,
            root_image="registry.example/base:latest",
            env_share_group="../shared",
            allowed_paths="../outside",
        ),
    )

    assert answer.status_code == 400
    said = errors_beside(answer.content.decode())
    assert said["root_image"] == [
        "Give an image pinned by digest: name@sha256:&lt;64 hex digits&gt;."
    ]
    assert "letters, digits, dots" in said["env_share_group"][0]
    assert "leaves the repository" in said["allowed_paths"][0]  # all at once
    # A match required of no image is refused too.
    answer = client.post(
        reverse("reviews:project_create"), form(repo, require_image_match="on")
    )
    assert errors_beside(answer.content.decode())["root_image"] == [
        "Give an image pinned by digest: name@sha256:&lt;64 hex digits&gt;, "
        "or do not require a match."
    ]
    assert not Project.objects.filter(slug="cart").exists()
