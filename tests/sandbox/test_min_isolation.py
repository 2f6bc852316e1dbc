"""A project may require a minimum isolation; its runner must give it."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from replayhub.environments.images import runner_for
from replayhub.models import MinIsolation, Project
from replayhub.sandbox import SandboxUnavailable
from replayhub.sandbox.gvisor import GvisorRunner

pytestmark = pytest.mark.django_db


def project(**fields) -> Project:
    return Project(slug="iso", repo_path="/srv/iso", **fields)


def test_a_project_requiring_gvisor_cannot_have_another_runner() -> None:
    for runner in ("bwrap", "docker"):
        with pytest.raises(IntegrityError), transaction.atomic():
            project(runner=runner, min_isolation=MinIsolation.GVISOR).save()


def test_a_project_requiring_gvisor_gets_the_gvisor_runner() -> None:
    required = project(runner="gvisor", min_isolation=MinIsolation.GVISOR)
    required.save()

    assert isinstance(runner_for(required), GvisorRunner)


def test_a_runner_short_of_the_required_isolation_refuses_to_run() -> None:
    # Not saved: the database refuses it; the runner lookup holds the line too.
    short = project(runner="bwrap", min_isolation=MinIsolation.GVISOR)

    with pytest.raises(SandboxUnavailable, match="requires gvisor isolation"):
        runner_for(short)


def test_without_a_requirement_every_runner_is_accepted() -> None:
    for runner in ("bwrap", "docker", "gvisor"):
        assert runner_for(project(runner=runner)).name == runner


def test_the_admin_form_says_why_the_runner_is_refused() -> None:
    short = project(runner="bwrap", min_isolation=MinIsolation.GVISOR)
    with pytest.raises(ValidationError, match="must use the gVisor runner"):
        short.validate_constraints()
