"""The judge's prompt and the strict reading of its answer."""

from __future__ import annotations

import pytest

from replayhub.texttier import judge


def test_the_prompt_carries_the_task_both_answers_and_the_json_shape():
    text = judge.judge_prompt(task="Add a flag", original="A says", replayed="B says")
    assert "Add a flag" in text and "A says" in text and "B says" in text
    assert '{"score": <integer from 1 to 10>, "rationale":' in text


def test_a_very_long_side_is_cut_in_the_prompt():
    text = judge.judge_prompt(task="t", original="x" * 100_000, replayed="y")
    assert len(text) < 30_000 and "[… cut]" in text


@pytest.mark.parametrize(
    "answer",
    [
        '{"score": 8, "rationale": "Same fix, other names."}',
        '  {"rationale": "Same fix, other names.", "score": 8}\n',
        '```json\n{"score": 8, "rationale": "Same fix, other names."}\n```',
        '```\n{"score": 8, "rationale": "Same fix, other names."}\n```',
    ],
)
def test_a_well_formed_answer_is_read(answer):
    assert judge.parse_judgement(answer) == judge.Judgement(8, "Same fix, other names.")


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("Score: 8/10. Same fix.", "not one JSON object"),
        ('Sure! {"score": 8, "rationale": "x"}', "not one JSON object"),
        ('[{"score": 8, "rationale": "x"}]', "not one JSON object"),
        ('{"score": 8}', "exactly"),
        ('{"score": 8, "rationale": "x", "confidence": 0.9}', "exactly"),
        ('{"score": 8.5, "rationale": "x"}', "not an integer"),
        ('{"score": "8", "rationale": "x"}', "not an integer"),
        ('{"score": true, "rationale": "x"}', "not an integer"),
        ('{"score": 0, "rationale": "x"}', "not between 1 and 10"),
        ('{"score": 11, "rationale": "x"}', "not between 1 and 10"),
        ('{"score": 5, "rationale": "  "}', "rationale"),
        ("", "not one JSON object"),
    ],
)
def test_anything_else_is_unparseable_and_no_score_is_guessed(answer, why):
    with pytest.raises(judge.Unparseable, match=why):
        judge.parse_judgement(answer)


def test_an_answer_nested_past_the_bound_is_unparseable_not_a_crash():
    answer = '{"score": 8, "rationale": ' + "[" * 50_000 + "]" * 50_000 + "}"
    with pytest.raises(judge.Unparseable, match="not one JSON object"):
        judge.parse_judgement(answer)
