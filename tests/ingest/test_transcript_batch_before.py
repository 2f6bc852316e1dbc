"""The rule for a prediction or a mini-swe-agent trajectory whose run was
imported before (:func:`replayhub.ingest.transcripts.batches.stored_before`)."""

from __future__ import annotations

import pytest

from replayhub.ingest.transcripts.batches import Before, stored_before

PREDICTION, TRAJECTORY = "swebench", "mini-swe-agent"


@pytest.mark.parametrize(
    ("kind", "stored", "same_patch", "expected"),
    [
        (PREDICTION, TRAJECTORY, True, Before.READ),
        (PREDICTION, TRAJECTORY, False, Before.PREDICTION_DIFFERS),
        (TRAJECTORY, PREDICTION, True, Before.ENRICH),
        (TRAJECTORY, PREDICTION, False, Before.ENRICH_DIFFERS),
    ],
)
def test_a_run_read_from_its_other_file_is_never_a_conflict(
    kind, stored, same_patch, expected
):
    assert stored_before(kind, stored, same_patch) is expected


@pytest.mark.parametrize("same_patch", [True, False])
def test_a_trajectory_enriches_its_predictions_run_once(same_patch):
    # The same trajectory again is a duplicate; another one leaves the run
    # enriched from the first as it is.
    assert stored_before(TRAJECTORY, PREDICTION, same_patch, True) is Before.DUPLICATE
    assert (
        stored_before(TRAJECTORY, PREDICTION, same_patch, False)
        is Before.ENRICHED_BEFORE
    )


def test_a_prediction_of_the_patch_its_run_was_imported_from_is_a_duplicate():
    # Whatever else differs: the file's time is the predictions' start.
    assert stored_before(PREDICTION, PREDICTION, True) is Before.DUPLICATE
    assert stored_before(PREDICTION, PREDICTION, False) is Before.IMPORT


@pytest.mark.parametrize("same_patch", [True, False])
@pytest.mark.parametrize(
    ("kind", "stored"),
    [
        # The same trajectory again: a duplicate, or a conflict.
        (TRAJECTORY, TRAJECTORY),
        # A run of a native record or of another agent's file, or an old row
        # naming no format, is no prediction's or trajectory's.
        (PREDICTION, None),
        (TRAJECTORY, None),
        (PREDICTION, "claude-code"),
        (TRAJECTORY, "swe-agent"),
        (None, TRAJECTORY),
    ],
)
def test_any_other_run_leaves_the_record_to_the_import(kind, stored, same_patch):
    assert stored_before(kind, stored, same_patch) is Before.IMPORT
