"""The judge: a prompt asking a model whether two outputs are equivalent, and a
strict reader of its answer. No Django import, no I/O.

The answer must be one JSON object, ``{"score": <integer 1-10>, "rationale":
"<text>"}``, alone or inside one Markdown code fence. Anything else — prose
around it, a score out of range, a float, a missing or extra key — is
``Unparseable``: the answer is kept as it came and no score is guessed from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from replayhub.lib import boundedjson

MAX_RATIONALE = 2000
# Each side of the comparison is cut to this many characters in the prompt.
MAX_SIDE = 24_000

_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL)

PROMPT = """\
You compare two answers to the same task. Decide how equivalent they are in \
substance: what they do or say, not their wording or formatting.

Score from 1 (unrelated or contradictory) to 10 (the same in substance).

Answer with exactly one JSON object and nothing else, in this shape:
{{"score": <integer from 1 to 10>, "rationale": "<one or two sentences>"}}

<task>
{task}
</task>

<answer_a>
{original}
</answer_a>

<answer_b>
{replayed}
</answer_b>
"""


class Unparseable(ValueError):
    """The judge's answer is not the JSON object the prompt asked for."""


@dataclass(frozen=True)
class Judgement:
    score: int
    rationale: str


def _cut(text: str) -> str:
    if len(text) <= MAX_SIDE:
        return text
    return text[:MAX_SIDE] + "\n[… cut]"


def judge_prompt(*, task: str, original: str, replayed: str) -> str:
    """The judge's prompt for one comparison."""
    return PROMPT.format(
        task=_cut(task), original=_cut(original), replayed=_cut(replayed)
    )


def parse_judgement(answer: str) -> Judgement:
    """The score and rationale of ``answer``; ``Unparseable`` says why not."""
    text = answer.strip()
    if fenced := _FENCE.match(text):
        text = fenced.group("body").strip()
    try:
        data = boundedjson.loads(text)
    except ValueError:
        raise Unparseable("the answer is not one JSON object") from None
    if not isinstance(data, dict):
        raise Unparseable("the answer is not one JSON object")
    if set(data) != {"score", "rationale"}:
        raise Unparseable('the object must have exactly "score" and "rationale"')
    score, rationale = data["score"], data["rationale"]
    # bool is an int in Python; true is not a score.
    if isinstance(score, bool) or not isinstance(score, int):
        raise Unparseable("the score is not an integer")
    if not 1 <= score <= 10:
        raise Unparseable(f"the score {score} is not between 1 and 10")
    if not isinstance(rationale, str) or not rationale.strip():
        raise Unparseable("the rationale is not a non-empty string")
    return Judgement(score=score, rationale=rationale.strip()[:MAX_RATIONALE])
