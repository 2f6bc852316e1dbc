"""Reading rollout records: both shapes, and the first field wrong named."""

from __future__ import annotations

import json

import pytest

from replayhub.rollouts.graph import branches
from replayhub.rollouts.seeds import SeedRules, derive
from replayhub.rollouts.trace import ShapeError, parse_record, read_trace
from tests.traces import RECORDS, compacted, multi_tool


def test_the_fixture_reads_as_three_rollouts_with_their_rewards_and_branches():
    traces = [parse_record(line)[0] for line in RECORDS.read_bytes().splitlines()]
    assert [t.id[:8] for t in traces] == ["5c1f0e9a", "9e8d7c6b", "0a1b2c3d"]
    assert [t.reward for t in traces] == [1.0, 0.0, 1.0]
    assert [len(branches(t.nodes)) for t in traces] == [1, 2, 1]
    assert traces[1].snapshots[6] == "snap://invoicer/31/9e8d7c6b/n6"
    assert traces[0].prompt.startswith("The test tests/test_totals.py")
    # Each call's usage, summed; the turns are the sampled nodes.
    assert traces[0].usage == {
        "input_tokens": 36 + 76 + 115,
        "output_tokens": 16 + 15 + 24,
        "turns": 3,
    }


@pytest.mark.parametrize("build", [compacted, multi_tool])
def test_both_shapes_read_to_the_same_rollout_and_seeds(build):
    rollout = build()
    legacy = read_trace(rollout.record())
    current = read_trace(rollout.record(version=1))
    assert (legacy.version, current.version) == (None, 1)
    for field in ("id", "task_name", "task_idx", "prompt", "reward", "nodes"):
        assert getattr(legacy, field) == getattr(current, field)
    assert legacy.usage == current.usage
    for rules in (
        SeedRules(),
        SeedRules(anchor="tool-call"),
        SeedRules(mode="recheck"),
    ):
        assert derive(legacy, rules) == derive(current, rules)


def test_version_1_rewards_are_weighted_scores_and_a_null_reward_counts_nothing():
    record = multi_tool().record(version=1)
    record["rewards"] = {
        "tests": {"score": 0.5, "weight": 2.0},
        "style": {"score": 1.0, "weight": 0.25},
        "judge": None,
    }
    assert read_trace(record).reward == 1.25


def test_a_null_prompt_stays_null():
    trace = read_trace(multi_tool(prompt=None).record())
    assert trace.prompt is None


def test_chat_completions_tool_calls_read_as_plain_calls():
    record = multi_tool().record()
    call = record["nodes"][2]["message"]["tool_calls"][0]
    record["nodes"][2]["message"]["tool_calls"] = [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": "run", "arguments": "{}"},
        }
    ]
    assert read_trace(record).nodes[2].message["tool_calls"] == [call]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(version=7), "version: 7 is not a record shape"),
        (lambda r: r.pop("id"), "id: the trace id is missing"),
        (lambda r: r.update(task="t"), "task: missing or not an object"),
        (
            lambda r: r["nodes"][1].update(parent=5),
            r"nodes\[1\].parent: 5 is not the index",
        ),
        (
            lambda r: r["nodes"][0]["message"].update(role="robot"),
            r"nodes\[0\].message.role",
        ),
        (
            lambda r: r["nodes"][3]["message"].pop("tool_call_id"),
            "tool message names its call",
        ),
        (lambda r: r.update(rewards={"x": "high"}), "rewards.x: not a finite number"),
        (lambda r: r["info"].update(snapshots={"99": "s"}), "'99' is not a node index"),
        (
            lambda r: r["nodes"][2]["message"]["tool_calls"][0].pop("arguments"),
            "arguments: missing",
        ),
    ],
)
def test_a_shape_that_cannot_be_read_is_refused_naming_the_field(change, message):
    record = multi_tool().record()
    change(record)
    with pytest.raises(ShapeError, match=message):
        read_trace(record)


def test_a_version_1_record_without_task_data_is_refused():
    record = multi_tool().record(version=1)
    del record["task"]["data"]
    with pytest.raises(ShapeError, match=r"task\.data"):
        read_trace(record)


def test_a_line_that_is_not_json_is_refused():
    with pytest.raises(ShapeError, match="not valid JSON"):
        parse_record(b'{"id": ', terminated=False)
    with pytest.raises(ShapeError, match="a record is a JSON object"):
        parse_record(json.dumps([1]).encode())
