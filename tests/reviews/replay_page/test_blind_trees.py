"""The diff of diffs under blind review: no "identical trees" and no tree
hashes (equal hashes are the identical verdict) until the reviewer has
judged."""

from __future__ import annotations

from replayhub.models import Comparison
from reviews.models import ReviewPolicy
from tests.factories import make_project, make_replay

TREE = "7" * 40


def test_the_blind_page_hides_identical_trees_and_their_hashes(client, reviewer):
    project = make_project()
    ReviewPolicy.objects.create(project=project, blind=True)
    replay = make_replay(verdict="identical", project=project)
    Comparison.objects.filter(replay=replay).update(
        original_tree=TREE, replay_tree=TREE
    )
    client.force_login(reviewer)

    blind = client.get(f"/replays/{replay.pk}/").content.decode()
    assert "identical trees" not in blind
    assert TREE[:12] not in blind
    assert 'id="dod-stat"' not in blind

    client.post(f"/replays/{replay.pk}/", {"blind_verdict": "equivalent"})
    judged = client.get(f"/replays/{replay.pk}/").content.decode()
    assert "identical trees" in judged
    assert f"trees <code>{TREE[:12]}</code> / <code>{TREE[:12]}</code>" in judged
