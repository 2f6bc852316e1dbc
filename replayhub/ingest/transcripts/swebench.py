"""SWE-bench predictions, with the dataset's instances they answer.

A prediction holds ``instance_id``, ``model_name_or_path`` and
``model_patch`` (the diff the model proposed). A predictions file is any of
the three shapes the SWE-bench harness reads: JSONL, one prediction a line; a
JSON list of predictions; or a JSON object of predictions keyed by instance id
(mini-swe-agent's ``preds.json``), where a prediction may leave out its
``instance_id``. A JSON document is read whole, within the record size limit;
its problems are reported under line 1, each naming its prediction.

The instances file (``--instances``) is the dataset as JSONL: ``instance_id``,
``repo``, ``base_commit``, ``problem_statement``, ``created_at`` and more. A
prediction may carry the instance's ``base_commit`` and ``problem_statement``
itself (the upload page and the API have no instances file).

One run per prediction, identified as ``<model>:<instance id>``. The prompt is
the problem statement, the base the instance's ``base_commit`` (recorded, so
trusted), the original the patch applied at the base
(:func:`replayhub.ingest.transcripts.repository.apply_patch`), the patch
stored with the run and never written to the repository. Predictions
record no time: ``started_at`` is the predictions file's time, named as
inferred.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from replayhub.ingest.lines import RecordLine
from replayhub.ingest.native import RecordError, parse_line
from replayhub.ingest.transcripts.documents import document_or_refusal
from replayhub.ingest.transcripts.shapes import (
    LineError,
    Parsed,
    RecordDraft,
    Search,
    iso,
    json_objects,
    shown,
)

FORMAT = "swebench"
_SHA = re.compile(r"[0-9a-f]{40}")
# The record size limit's default; the loader passes the configured one.
DEFAULT_LIMIT = 8 * 1024 * 1024
INSTANCE_FIELDS = ("repo", "base_commit", "problem_statement", "created_at", "version")


def read_instances(
    lines: Iterable[RecordLine],
) -> tuple[dict[str, dict[str, Any]], list[LineError]]:
    """The instances of a dataset file by id (only the fields used), and the
    lines that are not instances."""
    found: dict[str, dict[str, Any]] = {}
    errors: list[LineError] = []
    for item in json_objects(lines):
        if isinstance(item, LineError):
            errors.append(item)
            continue
        number, value = item
        key = value.get("instance_id")
        if not isinstance(key, str) or not key:
            errors.append(LineError(number, "an instance without an instance_id"))
            continue
        found[key] = {name: value.get(name) for name in INSTANCE_FIELDS}
    return found, errors


def parse(
    lines: Iterable[RecordLine],
    *,
    name: str = "",
    instances: dict[str, dict[str, Any]] | None = None,
    file_time: datetime | None = None,
    limit: int = DEFAULT_LIMIT,
) -> Iterator[Parsed]:
    instances = instances or {}
    lines = iter(lines)
    head: list[RecordLine] = []
    for line in lines:
        head.append(line)
        if line.data is None or line.data.strip():
            break
    lines = itertools.chain(head, lines)
    if not (head and _document_start(head[-1].data or b"")):
        for item in json_objects(lines):
            if isinstance(item, LineError):
                yield item
                continue
            number, value = item
            yield _prediction(number, value, instances, file_time)
        return
    found = yield from document_or_refusal(lines, limit, what="the predictions file")
    if found is None:
        return
    _, document = found
    for value in _listed(document):
        if isinstance(value, LineError):
            yield value
        else:
            yield _prediction(1, value, instances, file_time)


def _document_start(data: bytes) -> bool:
    """Whether the first line with text opens a JSON document rather than
    holding a JSONL file's first prediction: a list, an object spread over
    lines (a lone brace), or an object of predictions by id on one line."""
    text = data.strip().removeprefix(b"\xef\xbb\xbf")
    if text.startswith(b"[") or text == b"{":
        return True
    try:
        value = parse_line(text, terminated=True)
    except RecordError:
        return False  # a JSONL line that is not JSON: reported as such
    return isinstance(value, dict) and bool(value) and not _a_prediction(value)


def _a_prediction(value: dict[str, Any]) -> bool:
    return any(k in value for k in ("instance_id", "model_name_or_path", "model_patch"))


def _listed(document: Any) -> Iterator[dict[str, Any] | LineError]:
    """Each prediction of a list or of an object keyed by instance id, as a
    copy of its own (its id filled in from its key), or why it is not one."""
    if isinstance(document, dict) and _a_prediction(document):
        document = [document]
    if isinstance(document, list):
        for number, value in enumerate(document, 1):
            if isinstance(value, dict):
                yield dict(value)
            else:
                yield LineError(1, f"prediction {number}: not a JSON object")
        return
    if not isinstance(document, dict):
        yield LineError(1, "predictions must be a JSON list or object")
        return
    for key, value in document.items():
        if not isinstance(value, dict):
            # Said as read: a record of another kind ({"external_id": …}) in
            # a SWE-bench file reads as predictions keyed by instance id.
            yield LineError(
                1,
                f"{shown(key)}: read as an instance id (predictions keyed by "
                "instance id), its value must be a prediction, a JSON object",
            )
            continue
        named = value.get("instance_id", key)
        if named != key:
            yield LineError(
                1,
                f"{shown(key)}: the prediction names another instance_id, "
                f"{shown(named)}",
            )
            continue
        yield {**value, "instance_id": key}


def _prediction(
    number: int,
    value: dict[str, Any],
    instances: dict[str, dict[str, Any]],
    file_time: datetime | None,
) -> Parsed:
    key = value.get("instance_id")
    model = value.get("model_name_or_path")
    patch = value.get("model_patch")
    if not isinstance(key, str) or not key:
        return LineError(number, "instance_id: required field is missing")
    if not isinstance(model, str) or not model:
        return LineError(number, f"{key}: model_name_or_path is missing")
    if patch is not None and not isinstance(patch, str):
        return LineError(number, f"{key}: model_patch must be a string")
    instance = {**instances.get(key, {})}
    for field in INSTANCE_FIELDS:
        if value.get(field) is not None:
            instance[field] = value[field]
    base = instance.get("base_commit")
    statement = instance.get("problem_statement")
    if not isinstance(base, str) or not _SHA.fullmatch(base):
        return LineError(
            number,
            f"{key}: no instance with a base_commit (give the dataset with "
            f"--instances); got {shown(base)}",
        )
    if not isinstance(statement, str) or not statement.strip():
        return LineError(number, f"{key}: the instance has no problem_statement")
    record: dict[str, Any] = {
        "external_id": f"{model}:{key}",
        "title": key,
        "prompt": statement,
        "model": model,
        "base_sha": base,
        "transcript": {
            "format": FORMAT,
            "prediction": value,
            "instance": {k: v for k, v in instance.items() if k != "problem_statement"},
        },
    }
    if patch:
        record["output"] = patch
    draft = RecordDraft(number, record)
    draft.search = Search(
        patch=patch or "",
        patch_label=f"{key} ({model})",
        time_from_base=file_time is None,
    )
    if file_time is not None:
        draft.infer(
            "started_at",
            iso(file_time),
            "predictions record no time; this is the predictions file's",
        )
    return draft
