"""Every response carries the Content-Security-Policy, exactly as written.

Pages show untrusted diffs, prompts and agent output; the policy is the second
line of defence behind escaping, so it must be on every page, the admin's too,
and no template may need it relaxed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib import admin
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from replayhub.models import (
    EgressAttempt,
    ImportJob,
    ModelCall,
    TextReplay,
    TextSuite,
    WorkerCheck,
)
from reviews.models import Label
from tests.factories import make_replay, make_superuser

ROOT = Path(__file__).resolve().parents[2]

POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
}

# Pages that must render (not only redirect or refuse) in the walk below, so a
# walk of redirects alone cannot pass.
MUST_RENDER = {
    "reviews:queue",
    "reviews:running",
    "reviews:replay_detail",
    "reviews:replay_diff_file",
    "reviews:trends",
    "reviews:budgets",
    "reviews:projects",
    "reviews:status",
    "reviews:run_detail",
    "reviews:text_replay_detail",
    "reviews:text_suites",
    "reviews:text_suite_detail",
    "runs_upload",
    "runs_upload_job",
    "admin:index",
    "admin:replayhub_replay_changelist",
    "admin:replayhub_replay_change",
    "admin:replayhub_project_add",
}


def directives(header: str) -> dict[str, str]:
    """The policy as {directive: sources}; the header's order carries no meaning."""
    parts = [part.strip() for part in header.split(";") if part.strip()]
    return dict(part.split(" ", 1) for part in parts)


def walk(resolver: URLResolver, namespace: str = "", groups: tuple[str, ...] = ()):
    """(qualified name, the names of its arguments) of every named URL pattern,
    included ones too (an include's prefix may hold arguments)."""
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            inner = namespace
            if pattern.namespace:
                inner = f"{namespace}{pattern.namespace}:"
            yield from walk(
                pattern, inner, (*groups, *pattern.pattern.regex.groupindex)
            )
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield (
                f"{namespace}{pattern.name}",
                (*groups, *pattern.pattern.regex.groupindex),
            )


def admin_model(name: str):
    """The model an admin URL name such as ``admin:replayhub_run_change`` is about."""
    for model in admin.site._registry:
        prefix = f"admin:{model._meta.app_label}_{model._meta.model_name}_"
        if name.startswith(prefix):
            return model
    return None


@pytest.fixture
def seeded(db):
    replay = make_replay(verdict="divergent")
    ModelCall.objects.create(
        replay=replay, provider="acme", model_requested="m", status="200"
    )
    EgressAttempt.objects.create(
        replay=replay,
        phase="agent",
        host="pypi.org",
        port=443,
        allowed=False,
        outcome="denied",
    )
    return {
        "replay": replay,
        "text_replay": TextReplay.objects.create(
            run=replay.run,
            project=replay.project,
            target_provider="p",
            target_model="m",
        ),
        "suite": TextSuite.objects.create(project=replay.project, target="p:m"),
        "label": Label.objects.create(
            project=replay.project, name="would merge", kind="yes_no"
        ),
        "check": WorkerCheck.objects.create(),
        "job": ImportJob.objects.create(
            project=replay.project,
            filename="runs.jsonl",
            size_bytes=10,
            path="/nonexistent",
            status="done",
        ),
    }


def kwargs_for(name: str, arguments: tuple[str, ...], seeded: dict) -> dict:
    replay = seeded["replay"]
    values = {
        "replay_id": replay.pk,
        "kind": "dod",
        "index": 0,
        "slug": replay.project.slug,
        "check_id": seeded["check"].pk,
        "job_id": seeded["job"].pk,
        "run_id": replay.run_id,
        "text_replay_id": seeded["text_replay"].pk,
        "suite_id": seeded["suite"].pk,
        "label_id": seeded["label"].pk,
        "review_id": 0,
        "sha": replay.run.original_commit,
        # A provider no one registered: the 404 page carries the header too.
        "name": "acme",
        "app_label": "replayhub",
        # POST-only: a GET answers 405, with the header.
        "comment_id": 1,
    }
    model = admin_model(name)
    if model is not None:
        row = model._default_manager.order_by("pk").first()
        # A missing row still answers (a redirect to the index), with the header.
        values["object_id"] = str(row.pk) if row else "0"
        values["id"] = row.pk if row else 0
    if name == "admin:view_on_site":
        from django.contrib.contenttypes.models import ContentType

        values["content_type_id"] = ContentType.objects.get_for_model(type(replay)).pk
        values["object_id"] = str(replay.pk)
    return {key: values[key] for key in arguments}


def test_every_page_answers_with_the_policy_for_a_logged_in_admin(client, seeded):
    client.force_login(make_superuser())
    rendered, seen = set(), []
    for name, arguments in walk(get_resolver()):
        url = reverse(name, kwargs=kwargs_for(name, arguments, seeded))
        response = client.get(url)
        assert "Content-Security-Policy" in response, (name, url)
        assert directives(response["Content-Security-Policy"]) == POLICY, (name, url)
        assert "Content-Security-Policy-Report-Only" not in response
        seen.append(name)
        if response.status_code == 200:
            rendered.add(name)
    assert len(seen) > 60  # the admin's pages are in the walk
    assert not MUST_RENDER - rendered, MUST_RENDER - rendered


@pytest.mark.parametrize("path", ["/accounts/login/", "/healthz", "/", "/no-such"])
def test_public_answers_carry_the_policy_too(client, db, path):
    response = client.get(path)
    assert directives(response["Content-Security-Policy"]) == POLICY


def test_an_htmx_partial_carries_the_policy(client, admin_user, seeded):
    client.force_login(admin_user)
    response = client.get(reverse("reviews:queue"), headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert directives(response["Content-Security-Policy"]) == POLICY


# What the policy would block, as it appears in a template: a style attribute
# or element, an inline script, an event handler attribute, a javascript: URL,
# hx-on (htmx evaluates it).
FORBIDDEN = re.compile(
    r"""\sstyle\s*=|<style|<script(?![^>]*\ssrc=)[^>]*>|\son[a-z]+\s*=|javascript:|hx-on""",
    re.IGNORECASE,
)


def test_no_template_needs_the_policy_relaxed():
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)!r}"
        for path in sorted((ROOT / "templates").rglob("*.html"))
        for match in FORBIDDEN.finditer(path.read_text())
    ]
    assert found == []
