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
prediction enriches that run (:mod:`enrich`): the fields it leaves empty are
filled, nothing stored is written over (a differing submission is said, the
stored patch stands), and the same trajectory again is a duplicate. A
prediction of the same patch as the prediction its run was imported from is
a duplicate, though the file's time (the predictions' inferred start)
differs: the batch runner writes ``preds.json`` again after each instance.
"""

from __future__ import annotations

import enum
import hashlib
import re
from typing import Any

import orjson

from replayhub.gateway.redact import mask_key_shapes
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
    DUPLICATE = enum.auto()  # a prediction again, of the same patch, or the
    # trajectory the run was enriched from again
    READ = enum.auto()  # a prediction of the same patch: counted
    PREDICTION_DIFFERS = enum.auto()  # said; the trajectory's run stands
    ENRICH = enum.auto()  # a trajectory of the same patch: enriches the run
    ENRICH_DIFFERS = enum.auto()  # enriches the run, its patch kept; said
    ENRICHED_BEFORE = enum.auto()  # from another trajectory: said; kept


def stored_before(
    kind: str | None,
    stored: str | None,
    same_patch: bool,
    enriched: bool | None = None,
) -> Before:
    """What becomes of a record read from a file of the format ``kind`` whose
    external id is a run's imported before from a file of the format
    ``stored`` (None: the run names none), ``same_patch`` whether the two
    outputs are the same; ``enriched`` whether that run was enriched from
    this very trajectory (None: from none). A prediction and a trajectory of
    one run are the same run read from its two files, never a conflict: the
    prediction is left to the trajectory's run, the trajectory enriches the
    prediction's run once. A prediction of the same patch as the one its run
    was imported from is a duplicate."""
    if kind == stored == swebench.FORMAT and same_patch:
        # Only the file's time, the predictions' inferred start, may differ:
        # the batch runner writes preds.json again after each instance.
        return Before.DUPLICATE
    if {kind, stored} != {swebench.FORMAT, mini_swe_agent.FORMAT}:
        return Before.IMPORT
    if kind == swebench.FORMAT:
        return Before.READ if same_patch else Before.PREDICTION_DIFFERS
    if enriched is not None:
        return Before.DUPLICATE if enriched else Before.ENRICHED_BEFORE
    return Before.ENRICH if same_patch else Before.ENRICH_DIFFERS


_BEFORE_NOTES = {
    Before.PREDICTION_DIFFERS: "{title}: the prediction's patch differs from its "
    "trajectory's submission; the trajectory's run, imported before, stands: "
    "the prediction was not imported",
    Before.ENRICHED_BEFORE: "the run imported before from its prediction was "
    "enriched before from another trajectory and is kept: this trajectory was "
    "not imported",
}
_ENRICHED = {
    Before.ENRICH: "the run imported before from its prediction (the same "
    "instance, model and patch) was enriched from this trajectory with {taken}; "
    "nothing stored was changed",
    Before.ENRICH_DIFFERS: "the run imported before from its prediction was "
    "enriched from this trajectory with {taken}; its submission differs from "
    "the prediction's patch, which is kept",
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
        # Predictions of runs imported before from the same prediction, and
        # trajectories of runs enriched before from the same trajectory.
        self.duplicates = 0
        # Runs imported before from their predictions, enriched.
        self.enriched = 0

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
        stored: tuple[str | None, str, str | None] | None,
    ) -> Before:
        """What becomes of the prediction or trajectory ``record`` read at
        ``where`` (its file and line), given the run imported before of its
        external id (``stored``: that run's format, output and the SHA-256 of
        the trajectory it was enriched from, None when there is no such
        run). A record to import or to enrich a run with is the caller's;
        any other is counted or said here."""
        if stored is None:
            return Before.IMPORT
        kind = (record.get("transcript") or {}).get("format")
        same = _digest(record.get("output")) == _digest(stored[1])
        enriched = None
        if stored[2] is not None and kind == mini_swe_agent.FORMAT:
            enriched = stored[2] == digest(record)
        before = stored_before(kind, stored[0], same, enriched)
        name, line = where
        if before is Before.DUPLICATE:
            self.duplicates += 1
        elif before is Before.READ:
            first, count = self.same.get(name, (line, 0))
            self.same[name] = (first, count + 1)
        elif before in _BEFORE_NOTES:
            note = _BEFORE_NOTES[before].format(title=shown(record.get("title")))
            self.differing.append((name, line, note))
        return before

    def enrichment(
        self, where: tuple[str, int], before: Before, outcome: list[str] | str | None
    ) -> None:
        """Count or say what enriching a run from the trajectory read at
        ``where`` did (:func:`enrich.enrich`): the fields given, why not, or
        nothing as the run changed meanwhile (a duplicate)."""
        name, line = where
        if outcome is None:
            self.duplicates += 1
        elif isinstance(outcome, str):
            self.differing.append((name, line, outcome))
        else:
            self.enriched += 1
            taken = ", ".join(outcome)
            self.differing.append((name, line, _ENRICHED[before].format(taken=taken)))

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


def digest(record: dict[str, Any]) -> str:
    """The SHA-256 of a trajectory record's transcript, less the file's name,
    with key shapes masked (no provider key is stored, nor its hash): the
    trajectory a run was enriched from (:mod:`enrich`)."""
    transcript = record.get("transcript")
    content = (
        {k: v for k, v in transcript.items() if k != "file"}
        if isinstance(transcript, dict)
        else {}
    )
    data = orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(mask_key_shapes(data)).hexdigest()


def _digest(patch: Any) -> bytes:
    text = patch if isinstance(patch, str) else ""
    # Any surrogate, escaped byte or lone escape: only compared, never stored.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
