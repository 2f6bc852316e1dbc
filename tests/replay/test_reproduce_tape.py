"""``reproduce --tape``: a tape replay queued for a run that has a tape, and
a clear refusal for one that has none."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from replayhub.models import Replay
from tests.factories import make_replay

pytestmark = pytest.mark.django_db


def test_reproduce_tape_queues_a_tape_replay_of_a_run_with_a_tape():
    run = make_replay().run
    run.raw = {"tape": [{"provider_kind": "openai", "path": "/v1/models"}]}
    run.save(update_fields=["raw"])

    call_command("reproduce", str(run.pk), "--tape")

    assert Replay.objects.filter(run=run).latest("id").tier == "tape"


def test_reproduce_tape_refuses_a_run_without_one():
    run = make_replay().run
    with pytest.raises(CommandError, match="has no tape"):
        call_command("reproduce", str(run.pk), "--tape")
