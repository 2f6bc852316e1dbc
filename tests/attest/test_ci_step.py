"""The README's CI step, run word for word against a live server."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest

from replayhub.ingest.tokens import token_issue
from replayhub.models import Run
from tests.conftest import ROOT
from tests.factories import make_project, make_replay


def ci_step() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("    gate=$(curl")
    end = readme.index("    esac\n", start) + len("    esac\n")
    return textwrap.dedent(readme[start:end])


@pytest.mark.django_db(transaction=True)
def test_the_step_exits_0_reproduced_1_divergent_2_unknown(live_server):
    project = make_project("shop")
    for commit, verdict in (("1" * 40, "equivalent"), ("2" * 40, "divergent")):
        run = Run.objects.create(
            project=project, external_id=commit[:8], original_commit=commit
        )
        make_replay(verdict=verdict, run=run, project=project)
    token = token_issue(project=project)[1]
    for commit, status in (("1" * 40, 0), ("2" * 40, 1), ("3" * 40, 2)):
        result = subprocess.run(
            ["bash", "-c", ci_step()],
            env={
                "PATH": os.environ["PATH"],
                "REPLAYHUB_URL": live_server.url,
                "REPLAYHUB_TOKEN": token,
                "GIT_COMMIT": commit,
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == status, (commit, result.stderr)
