"""A mini-swe-agent batch folder imported whole (``--format auto``).

mini-swe-agent's SWE-bench batch runner (``mini-extra swebench``) writes, in
its output folder, one trajectory per instance
(``<instance id>/<instance id>.traj.json``) and ``preds.json``, the same
instances' predictions keyed by instance id (``model_name_or_path`` the
trajectory's model, ``model_patch`` its submission), beside its log
(``minisweagent.log``) and its exit statuses (``exit_statuses_<time>.yaml``).

A trajectory and the prediction of the same instance by the same model are
one run: both readers name it ``<model>:<instance id>``. The trajectory holds
more (the task, the steps, the cost), so it is the run; the import reads the
folder's predictions files after its other files, and a prediction whose run
a trajectory of the import made is not imported again: counted as read from
its trajectory when its patch is the trajectory's submission, said in one
line naming the instance when the two differ (the trajectory's stands). A
prediction with no trajectory in the import is imported as a prediction. The
log and the exit statuses are not transcripts: they are passed over, each
said in one line.

The same holds across imports (:func:`stored_before`): a prediction whose
run was imported before from its trajectory is counted or said the same way,
never a conflict; a trajectory whose run was imported before from its
prediction is said in one line, and the stored run is kept, as any stored
run is (never written over). A prediction of the same patch as the
prediction its run was imported from is a duplicate, though the file's time
(the predictions' inferred start) differs: the batch runner writes
``preds.json`` again after each instance.
"""

from __future__ import annotations

import enum
import hashlib
import re
from typing import Any

from replayhub.ingest.transcripts import mini_swe_agent, swebench
from replayhub.ingest.transcripts.shapes import RecordDraft, shown

# What the batch runner writes beside the trajectories and the predictions.
_RUNNER_FILES = re.compile(r"minisweagent\.log|exit_statuses_[0-9.]+\.yaml")


def runner_file(name: str) -> str:
    """Why the file named ``name`` is passed over: the note for a file of the
    batch runner's own that is not a transcript, or "" for any other file."""
    base = name.rsplit("/", 1)[-1]
    if not _RUNNER_FILES.fullmatch(base):
        return ""
    what = "log" if base.endswith(".log") else "exit statuses"
    return f"mini-swe-agent's batch {what}, not a transcript: passed over"


class Before(enum.Enum):
    """What becomes of a record whose run was imported before."""

    IMPORT = enum.auto()  # as any record: a duplicate or a conflict
    DUPLICATE = enum.auto()  # a prediction again, of the same patch
    READ = enum.auto()  # a prediction of the same patch: counted
    PREDICTION_DIFFERS = enum.auto()  # said; the trajectory's run stands
    TRAJECTORY_SAME = enum.auto()  # said; the prediction's run stands
    TRAJECTORY_DIFFERS = enum.auto()  # said; the prediction's run stands


def stored_before(kind: str | None, stored: str | None, same_patch: bool) -> Before:
    """What becomes of a record read from a file of the format ``kind`` whose
    external id is a run's imported before from a file of the format
    ``stored`` (None: the run names none), ``same_patch`` whether the two
    outputs are the same. A prediction and a trajectory of one run are the
    same run read from its two files, never a conflict: the prediction is
    left to the trajectory's run, the trajectory is said, and the stored run
    is kept whichever it is. A prediction of the same patch as the one its
    run was imported from is a duplicate."""
    if kind == stored == swebench.FORMAT and same_patch:
        # Only the file's time, the predictions' inferred start, may differ:
        # the batch runner writes preds.json again after each instance.
        return Before.DUPLICATE
    if {kind, stored} != {swebench.FORMAT, mini_swe_agent.FORMAT}:
        return Before.IMPORT
    if kind == swebench.FORMAT:
        return Before.READ if same_patch else Before.PREDICTION_DIFFERS
    return Before.TRAJECTORY_SAME if same_patch else Before.TRAJECTORY_DIFFERS


_BEFORE_NOTES = {
    Before.PREDICTION_DIFFERS: "{title}: the prediction's patch differs from its "
    "trajectory's submission; the trajectory's run, imported before, stands: "
    "the prediction was not imported",
    Before.TRAJECTORY_SAME: "the run was imported before from its prediction "
    "(the same instance, model and patch) and is kept: this trajectory's "
    "transcript, usage and cost were not imported (to have them, delete the "
    "run and import the trajectory again)",
    Before.TRAJECTORY_DIFFERS: "the run was imported before from its "
    "prediction, whose patch differs from this trajectory's submission, and is "
    "kept: this trajectory was not imported (to have it, delete the run and "
    "import the trajectory again)",
}


class Trajectories:
    """The runs the import's mini-swe-agent trajectories made, and what was
    said of the predictions of the same runs and of the records left to runs
    imported before."""

    def __init__(self) -> None:
        # External id -> the SHA-256 of the trajectory's submission.
        self.submissions: dict[str, bytes] = {}
        # Predictions files -> (their first line left to a trajectory, how
        # many predictions were).
        self.same: dict[str, tuple[int, int]] = {}
        self.differing: list[tuple[str, int, str]] = []
        # Predictions of runs imported before from the same prediction.
        self.duplicates = 0

    def saw(self, record: dict[str, Any]) -> None:
        """Take note of a run the import made of a record, when a
        mini-swe-agent trajectory of an instance made it."""
        transcript = record.get("transcript") or {}
        document = transcript.get("document") or {}
        if transcript.get("format") == mini_swe_agent.FORMAT and isinstance(
            document.get("instance_id"), str
        ):
            self.submissions[record["external_id"]] = _digest(record.get("output"))

    def take(self, draft: RecordDraft, name: str) -> bool:
        """Whether the prediction ``draft`` of the file ``name`` is left to
        the trajectory that made its run (then it is counted or said)."""
        record = draft.record
        submission = self.submissions.get(record["external_id"])
        if submission is None:
            return False
        if submission == _digest(record.get("output")):
            line, count = self.same.get(name, (draft.line, 0))
            self.same[name] = (line, count + 1)
        else:
            self.differing.append(
                (
                    name,
                    draft.line,
                    f"{shown(record['title'])}: the prediction's patch differs "
                    "from its trajectory's submission; the trajectory's run was "
                    "imported, the prediction was not",
                )
            )
        return True

    def left_to_stored(
        self,
        record: dict[str, Any],
        where: tuple[str, int],
        stored: tuple[str | None, str] | None,
    ) -> bool:
        """Whether the prediction or trajectory ``record`` read at ``where``
        (its file and line) is left to the run imported before of its
        external id (``stored``: that run's format and output, None when
        there is no such run); then it is counted or said."""
        if stored is None:
            return False
        kind = (record.get("transcript") or {}).get("format")
        same = _digest(record.get("output")) == _digest(stored[1])
        before = stored_before(kind, stored[0], same)
        name, line = where
        if before is Before.IMPORT:
            return False
        if before is Before.DUPLICATE:
            self.duplicates += 1
        elif before is Before.READ:
            first, count = self.same.get(name, (line, 0))
            self.same[name] = (first, count + 1)
        else:
            note = _BEFORE_NOTES[before].format(title=shown(record.get("title")))
            self.differing.append((name, line, note))
        return True

    @property
    def read_from_trajectories(self) -> int:
        """How many predictions were the same as their trajectories."""
        return sum(count for _, count in self.same.values())

    def notes(self) -> list[tuple[str, int, str]]:
        """One line per predictions file for the predictions already read
        from their trajectories, and one per prediction that differs from
        its trajectory and per trajectory left to its prediction's run
        imported before: (file, line, note)."""
        counted = [
            (
                name,
                line,
                (
                    "1 prediction already read from its trajectory"
                    if count == 1
                    else f"{count} predictions already read from their trajectories"
                )
                + " (the same instance, model and patch): not imported again",
            )
            for name, (line, count) in self.same.items()
        ]
        return sorted(counted + self.differing)


def _digest(patch: Any) -> bytes:
    text = patch if isinstance(patch, str) else ""
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()
