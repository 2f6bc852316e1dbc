"""Index-selected loading: the same records as a full parse, filtered rows
never read, a stale index never trusted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replayhub.rollouts.index import LoadReport, index_path, load
from replayhub.rollouts.seeds import SeedRules, derive
from tests.traces import compacted, line, multi_tool, write_records


def rollouts(count: int) -> list[dict]:
    """Alternately compacted and linear rollouts with rewards 0, 0.5, 1."""
    records = []
    for n in range(count):
        build = compacted if n % 2 else multi_tool
        records.append(build(f"{n:032x}", reward=(n % 3) / 2).record())
    return records


def loaded(path: Path, rules: SeedRules, **kw) -> tuple[list, LoadReport]:
    report = LoadReport()
    return list(load(path, rules=rules, report=report, **kw)), report


def accepted(items, rules: SeedRules) -> dict[str, list[str]]:
    """What an import would keep: trace id -> seed keys, by the parse-side rules."""
    kept = {}
    for item in items:
        trace = item.trace
        if trace is None or not rules.reward_allowed(trace.reward):
            continue
        seeds, _ = derive(trace, rules)
        if seeds:
            kept[trace.id] = [s.key for s in seeds]
    return kept


RULES = [
    SeedRules(),
    SeedRules(anchor="tool-call", max_anchors=None),
    SeedRules(mode="recheck", min_source_reward=0.5),
    SeedRules(max_source_reward=0.0),
]


@pytest.mark.parametrize("rules", RULES)
def test_index_selected_loading_equals_a_full_parse(tmp_path, rules):
    path = write_records(tmp_path, rollouts(24))
    selected, report = loaded(path, rules)
    full, _ = loaded(path, rules, use_index=False)
    assert report.indexed and not report.index_problem
    assert accepted(selected, rules) == accepted(full, rules)
    assert accepted(full, rules)  # the case is not empty
    # Every row filtered index-side is counted by its reason.
    assert len(selected) + sum(report.skipped.values()) == 24


def test_rows_filtered_by_the_index_are_never_read(tmp_path):
    records = rollouts(12)
    path = write_records(tmp_path, records)
    rules = SeedRules(min_source_reward=0.5)  # and compaction: two branches
    rows = [json.loads(r) for r in index_path(path).read_bytes().splitlines()]
    data = bytearray(path.read_bytes())
    filtered = [r for r in rows if r["reward"] < 0.5 or r["branches"] < 2]
    for row in filtered:
        # Garbage of the same length: parsing it would fail loudly.
        data[row["offset"] : row["offset"] + row["len"] - 1] = b"\xff" * (
            row["len"] - 1
        )
    path.write_bytes(bytes(data))
    items, report = loaded(path, rules)
    assert not report.index_problem
    assert all(item.trace is not None for item in items)
    assert len(items) == 12 - len(filtered)
    assert report.skipped == {"source_reward": 4, "no_seed": 4}


def test_a_stale_index_is_noticed_and_the_whole_file_read(tmp_path):
    records = rollouts(6)
    path = write_records(tmp_path, records)
    # The file is rewritten in another order; the index still names the old spans.
    path.write_bytes(b"".join(line(r) for r in reversed(records)))
    rules = SeedRules(anchor="tool-call")
    items, report = loaded(path, rules)
    assert "does not match the file" in report.index_problem
    full, _ = loaded(path, rules, use_index=False)
    assert accepted(items, rules) == accepted(full, rules)
    assert sorted(i.offset for i in items) == sorted(i.offset for i in full)


def test_a_record_that_is_not_the_one_its_row_describes_is_never_taken(tmp_path):
    records = rollouts(4)
    path = write_records(tmp_path, records)
    index = index_path(path)
    rows = [json.loads(r) for r in index.read_bytes().splitlines()]
    rows[1]["reward"] = 1.0 - rows[1]["reward"] + 0.25
    index.write_bytes(b"".join(line(r) for r in rows))
    items, report = loaded(path, SeedRules(anchor="tool-call"))
    assert "reward is not the line's" in report.index_problem
    assert sorted(i.trace.id for i in items) == sorted(r["id"] for r in records)


def test_lines_past_the_last_row_are_read_as_they_are(tmp_path):
    records = rollouts(6)
    path = write_records(tmp_path, records[:4])
    with open(path, "ab") as out:
        out.write(line(records[4]) + line(records[5]))
    items, report = loaded(path, SeedRules(anchor="tool-call"))
    assert report.indexed and not report.index_problem
    assert [i.trace.id for i in items][-2:] == [records[4]["id"], records[5]["id"]]
    assert [i.number for i in items][-2:] == [5, 6]


def test_an_unreadable_index_means_a_full_parse(tmp_path):
    path = write_records(tmp_path, rollouts(3))
    index_path(path).write_bytes(b'{"task_name": "x"}\n')
    items, report = loaded(path, SeedRules(anchor="tool-call"))
    assert "lacks one of" in report.index_problem
    assert len(items) == 3


def test_without_an_index_every_line_is_read_and_bad_ones_named(tmp_path):
    records = rollouts(3)
    path = tmp_path / "train_rollouts_env.jsonl"
    path.write_bytes(line(records[0]) + b"{not json}\n\n" + line(records[1]))
    items, report = loaded(path, SeedRules())
    assert not report.indexed
    assert [(i.number, bool(i.error)) for i in items] == [
        (1, False),
        (2, True),
        (4, False),
    ]


def test_a_partial_last_line_is_left_unless_the_file_is_complete(tmp_path):
    records = rollouts(2)
    path = tmp_path / "train_rollouts_env.jsonl"
    whole = line(records[1])
    path.write_bytes(line(records[0]) + whole[:50])
    growing, _ = loaded(path, SeedRules(), final=False)
    assert [i.number for i in growing] == [1]
    finished, _ = loaded(path, SeedRules())
    assert "cut off" in finished[1].error
    path.write_bytes(line(records[0]) + whole[:-1])  # complete but no newline
    finished, _ = loaded(path, SeedRules())
    assert finished[1].trace.id == records[1]["id"]


def test_the_index_of_a_record_file_is_its_sibling():
    assert index_path(Path("/r/step_3/train_rollouts_math.jsonl")) == Path(
        "/r/step_3/index_math.jsonl"
    )
    assert index_path(Path("eval_rollouts_code.jsonl")) == Path("index_code.jsonl")
    assert index_path(Path("records.jsonl")) is None
