"""project_forge and project_webhook: the settings' checks, in one line each."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from replayhub.models import Forge, Webhook
from tests.factories import make_project
from tests.outbound.conftest import SECRET, SECRET_ENV, TOKEN, TOKEN_ENV

pytestmark = pytest.mark.usefixtures("outbound_settings")


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_a_forge_is_named_shown_and_forgotten(db, stand):
    make_project("shop")
    said = run(
        "project_forge",
        "shop",
        "--forge",
        "gitlab",
        "--forge-repo",
        "acme/shop",
        "--forge-token-env",
        TOKEN_ENV,
        "--forge-url",
        f"{stand.url}/api/v4/",
    )
    assert said.strip() == (
        f"shop: gitlab acme/shop at {stand.url}/api/v4, token from ${TOKEN_ENV}"
    )
    assert TOKEN not in said
    assert run("project_forge", "shop") == said
    assert run("project_forge", "shop", "--off").strip() == "shop: forge forgotten"
    assert not Forge.objects.exists()


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        (["--forge-repo", "shop", "--forge-token-env", TOKEN_ENV], "not owner/repo"),
        (["--forge-repo", "a/b", "--forge-token-env", "HOME"], "allows"),
        (["--forge-repo", "a/b", "--forge-token-env", "SECRET_KEY"], "never sent"),
        (["--forge-repo", "a/b"], "needs --forge-repo and --forge-token-env"),
    ],
)
def test_a_forge_is_refused_in_one_line(db, stand, options, refusal):
    make_project("shop")
    url = ["--forge-url", stand.url]
    with pytest.raises(CommandError, match=refusal):
        run("project_forge", "shop", "--forge", "github", *url, *options)
    assert not Forge.objects.exists()


def test_a_forge_api_on_a_private_address_is_refused(db, settings):
    settings.REPLAYHUB_OUTBOUND_ALLOW_PRIVATE = []
    make_project("shop")
    with pytest.raises(CommandError, match="not a public address"):
        run(
            "project_forge",
            "shop",
            "--forge",
            "github",
            "--forge-repo",
            "a/b",
            "--forge-token-env",
            TOKEN_ENV,
            "--forge-url",
            "http://127.0.0.1:3000/api/v1",
        )


def test_webhooks_are_added_listed_by_host_only_and_removed(db, stand):
    make_project("shop")
    added = run(
        "project_webhook",
        "add",
        "shop",
        f"{stand.url}/services/T000/B000/secret-path",
        "--events",
        "replay.finished,trends.signal",
        "--secret-env",
        SECRET_ENV,
    )
    hook = Webhook.objects.get()
    assert added.strip() == (
        f"{hook.pk}: {stand.url}/… cloudevents replay.finished,trends.signal "
        f"(signed with ${SECRET_ENV})"
    )
    listed = run("project_webhook", "list", "shop")
    assert listed == added
    assert "secret-path" not in listed and SECRET not in listed
    run("project_webhook", "remove", "shop", str(hook.pk))
    assert not Webhook.objects.exists()
    with pytest.raises(CommandError, match="has no webhook"):
        run("project_webhook", "remove", "shop", str(hook.pk))


def test_a_webhook_on_a_private_address_is_refused_by_the_command(db, settings):
    settings.REPLAYHUB_OUTBOUND_ALLOW_PRIVATE = []
    make_project("shop")
    with pytest.raises(CommandError, match="not a public address"):
        run(
            "project_webhook",
            "add",
            "shop",
            "http://192.168.1.10/hook",
            "--events",
            "night.closed",
            "--format",
            "slack",
        )
    assert not Webhook.objects.exists()


def test_a_forge_without_the_base_url_is_taken_with_a_warning(db, stand, settings):
    make_project("shop")
    settings.REPLAYHUB_BASE_URL = ""
    out, err = StringIO(), StringIO()
    call_command(
        "project_forge",
        "shop",
        "--forge",
        "github",
        "--forge-repo",
        "acme/shop",
        "--forge-token-env",
        TOKEN_ENV,
        "--forge-url",
        stand.url,
        stdout=out,
        stderr=err,
    )
    assert Forge.objects.filter(project__slug="shop").exists()
    assert "REPLAYHUB_BASE_URL is not set" in err.getvalue()
