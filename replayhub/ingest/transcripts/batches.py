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
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from replayhub.ingest.transcripts import mini_swe_agent
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


class Trajectories:
    """The runs the import's mini-swe-agent trajectories made, and what was
    said of the predictions of the same runs."""

    def __init__(self) -> None:
        # External id -> the SHA-256 of the trajectory's submission.
        self.submissions: dict[str, bytes] = {}
        # Predictions files -> (their first line left to a trajectory, how
        # many predictions were).
        self.same: dict[str, tuple[int, int]] = {}
        self.differing: list[tuple[str, int, str]] = []

    def saw(self, data: bytes) -> None:
        """Take note of a run the import made of a record (its JSON line),
        when a mini-swe-agent trajectory of an instance made it."""
        record: dict[str, Any] = orjson.loads(data)
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

    @property
    def read_from_trajectories(self) -> int:
        """How many predictions were the same as their trajectories."""
        return sum(count for _, count in self.same.values())

    def notes(self) -> list[tuple[str, int, str]]:
        """One line per predictions file for the predictions already read
        from their trajectories, and one per prediction that differs from
        its trajectory: (file, line, note)."""
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
