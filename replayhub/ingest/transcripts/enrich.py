"""A run imported from its SWE-bench prediction, enriched from its
mini-swe-agent trajectory imported later (:mod:`batches`).

The trajectory holds what the prediction lacks (the usage and cost, the
steps); its record is not stored as a run of its own but fills the fields the
stored run leaves empty. Nothing stored is written over: the run's change
(its base, patch and original commit), its start and every field it holds
stay. The trajectory's transcript is kept under the stored transcript's
``trajectory`` key, with its SHA-256 (``trajectory_sha256``), by which the same
trajectory imported again is a duplicate.

The enriched record is checked, masked and bounded as any imported record
(:func:`replayhub.ingest.fastpath.read_record`, ``REPLAYHUB_MAX_RECORD_BYTES``),
and written with one conditional ``UPDATE``: a run changed meanwhile (a
concurrent import enriched it) is left as it is.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.conf import settings

from replayhub.ingest.fastpath import read_record
from replayhub.ingest.native import RecordError, stored_part, whole_record
from replayhub.ingest.rows import COLUMNS
from replayhub.lib.boundedjson import REFUSED_KEY
from replayhub.models import Project, Run

# The run's identity and its change: the stored values stand, whatever the
# trajectory says (a differing submission is said by the caller).
_KEPT = frozenset(
    {
        "project",
        "external_id",
        "base_sha",
        "original_commit",
        "original_branch",
        "output",
        "transcript",
        "inferred",
        # The notes speak of how the stored fields were found.
        "import_notes",
    }
)
_SHOWN = {"transcript": "the trajectory's steps"}


def merged(
    stored: dict[str, Any], trajectory: dict[str, Any], sha256: str
) -> tuple[dict[str, Any], list[str]] | None:
    """The ``stored`` record with the fields it leaves empty taken from the
    ``trajectory`` record, the trajectory's transcript kept beside its own,
    and the names of the fields taken; None when the stored transcript holds
    a trajectory already. Pure."""
    transcript = stored.get("transcript")
    if not isinstance(transcript, dict) or "trajectory" in transcript:
        return None
    record = dict(stored)
    taken = []
    for name, value in trajectory.items():
        if name not in _KEPT and _empty(record.get(name)) and not _empty(value):
            record[name] = value
            taken.append(name)
    how = trajectory.get("inferred")
    known = record.get("inferred", {})
    if isinstance(how, dict) and isinstance(known, dict):
        also = {name: how[name] for name in taken if name in how}
        if also:
            record["inferred"] = {**known, **also}
    record["transcript"] = {
        **transcript,
        "trajectory": trajectory.get("transcript"),
        "trajectory_sha256": sha256,
    }
    return record, [*taken, "transcript"]


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == {} or value == []


def enrich(
    project: Project, trajectory: dict[str, Any], sha256: str
) -> list[str] | str | None:
    """Enrich the run of the ``trajectory`` record's external id in
    ``project`` from it: the names of the fields it was given, why it was
    not in one line, or None when the run changed meanwhile (it is left as
    it is)."""
    run = (
        Run.objects.filter(project=project, external_id=trajectory["external_id"])
        .only("pk", "prompt", "output", "raw", "record_sha256")
        .first()
    )
    if run is None:
        return None
    if not isinstance(run.raw, dict) or REFUSED_KEY in run.raw:
        return f"{_STORED} cannot be read: kept, this trajectory was not imported"
    stored = whole_record(run.raw, {"prompt": run.prompt, "output": run.output})
    found = merged(stored, trajectory, sha256)
    if found is None:
        return (
            f"{_STORED} holds another trajectory already: kept, this trajectory "
            "was not imported"
        )
    record, taken = found
    data = orjson.dumps(record)
    limit = settings.REPLAYHUB_MAX_RECORD_BYTES
    if len(data) > limit:
        return (
            f"{_STORED} was kept: with this trajectory it would be "
            f"{len(data):,} bytes, above the limit of {limit:,}"
        )
    try:
        checked = read_record(
            data,
            max_prompt_bytes=settings.REPLAYHUB_MAX_PROMPT_BYTES,
            project=project.slug,
        )
    except RecordError as error:
        reason = str(error)
        reason = reason if len(reason) <= 200 else reason[:199] + "…"
        return f"{_STORED} was kept: with this trajectory it is refused ({reason})"
    columns = {name: getattr(checked, name) for name in _COLUMNS}
    changed = Run.objects.filter(pk=run.pk, record_sha256=run.record_sha256).update(
        **columns, raw=stored_part(checked.raw), record_sha256=checked.sha256
    )
    if not changed:
        return None
    return [_SHOWN.get(name, name) for name in taken]


_STORED = "the run imported before from its prediction"
# The columns a record fills, besides its id, ``raw`` and its hash.
_COLUMNS = tuple(
    name for name in COLUMNS if name not in {"external_id", "raw", "record_sha256"}
)
