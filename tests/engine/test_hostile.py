"""What the agent writes can end a replay only with a verdict.

Output a database refuses, absurd usage numbers, more files than a checkout
can take, git failing in the test gate, a store that fails: each replay ends
``divergent`` or ``inconclusive`` with a reason, never left ``running``. Only
ReplayHub's own faults are ``harness_error`` or ``worker_lost``. Run on SQLite
and on PostgreSQL, which refuses NUL in text and jsonb.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from django.db import DataError

from replayhub import gitops, services
from replayhub.models import Comparison, Replay, TestOutcome, TestRecord
from replayhub.services import escape_text, storable, unescape_text
from tests.engine.scripted import make_run

pytestmark = pytest.mark.django_db

AGENT_FAULTS = {"harness_error", "worker_lost"}


def replay(run):
    replay = services.replay_create(run=run, trigger="command")
    services.replay_execute(replay_id=replay.pk)
    return Replay.objects.get(pk=replay.pk)


def assert_ended_by_the_agent(result):
    assert result.status == "finished"
    assert result.verdict in {"divergent", "inconclusive", "equivalent"}
    assert result.reason_code not in AGENT_FAULTS


# Escaping: pure.


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain",
        "a\x00b",
        "\x00",
        "\\x00 and a real \x00",
        "\\\\x00\x00\\",
        "C:\\new\\x00\x00",
        "bytes \udcff\udc80 that were not UTF-8, and \x00",
        "\\udcff\udcff",
        "\\u00e9 \x00 é",
    ],
)
def test_escaping_is_undone_exactly(text):
    assert unescape_text(escape_text(text)) == text


def test_text_a_database_stores_is_kept_as_it_is():
    value = {"patch": "a diff with \\x00 and \\n in it, é, \U0001f600"}
    assert storable(value, "comparison") == (value, [], [])
    assert storable(value, "comparison")[0] is value


def test_escaped_text_holds_no_nul_and_no_surrogate():
    escaped = escape_text("a\x00b\udcff\\")
    assert escaped == "a\\x00b\\udcff\\\\"
    escaped.encode("utf-8")  # no lone surrogate left


@dataclass(frozen=True)
class Case:
    id: str
    message: str
    seconds: float | None = None


@dataclass
class Run:
    output: str
    cases: list[Case] = field(default_factory=list)
    usage: dict = field(default_factory=dict)


def test_storable_escapes_a_field_whole_and_names_it():
    run = Run(
        output="fine",
        cases=[
            Case("C:\\dir", "ok"),
            Case("a\x00b", "ok", float("nan")),
        ],
        usage={"note": "fine"},
    )
    stored, escaped, dropped = storable(run, "report")

    # Every id is escaped, so each is unescaped the same way.
    assert [c.id for c in stored.cases] == ["C:\\\\dir", "a\\x00b"]
    assert [c.message for c in stored.cases] == ["ok", "ok"]
    assert stored.cases[1].seconds is None
    assert stored.output is run.output and stored.usage is run.usage
    assert escaped == ["report.cases.id"]
    assert dropped == ["report.cases.seconds"]
    assert [unescape_text(c.id) for c in stored.cases] == ["C:\\dir", "a\x00b"]


def test_storable_reaches_dict_keys_and_names_them_by_their_container():
    stored, escaped, _ = storable({"hunk_classes": {"a\udcff.py": "whitespace"}}, "x")
    assert stored == {"hunk_classes": {"a\\udcff.py": "whitespace"}}
    assert escaped == ["x"]


# Whole replays in the real sandbox.


def test_nul_in_the_agents_output_is_stored_escaped(calc_project, calc_base, calc_good):
    run = make_run(calc_project, prompt="nul", original=calc_good, base=calc_base)
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("equivalent", "tests_agree")
    assert "agent says a\\x00b" in result.agent_output
    assert "\x00" not in result.agent_output
    assert result.evidence["escaped_text"] == ["agent.output"]
    assert "agent says a\x00b" in unescape_text(result.agent_output)


def test_nul_in_test_output_and_failure_messages_is_stored_escaped(
    calc_project, calc_base, calc_good
):
    run = make_run(calc_project, prompt="nultests", original=calc_good, base=calc_base)
    result = replay(run)

    assert_ended_by_the_agent(result)
    tail = result.test_outcomes.get(tree="replay", attempt=1)
    assert "imported a\\x00b" in tail.output_tail
    messages = [case[3] for case in tail.cases]
    assert any("expected a\\x00b" in message for message in messages)
    assert {"gate.attempts.output_tail", "gate.attempts.cases.message"} <= set(
        result.evidence["escaped_text"]
    )
    ids = TestRecord.objects.values_list("test_id", flat=True)
    assert ids and not any("\x00" in test_id for test_id in ids)


def test_a_test_file_whose_name_is_not_utf8_is_stored_escaped(
    calc_project, calc_base, calc_good
):
    run = make_run(calc_project, prompt="badname", original=calc_good, base=calc_base)
    result = replay(run)

    assert_ended_by_the_agent(result)
    added = result.evidence["test_changes"]["added"]
    assert added == ["test_\\udcff.py"]
    assert unescape_text(added[0]).encode("utf-8", "surrogateescape") == (
        b"test_\xff.py"
    )
    assert "plan.changes.added" in result.evidence["escaped_text"]


def test_usage_numbers_out_of_range_are_refused_and_noted(
    calc_project, calc_base, calc_good
):
    run = make_run(calc_project, prompt="hugeusage", original=calc_good, base=calc_base)
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("equivalent", "tests_agree")
    assert result.usage == {"output_tokens": 300, "turns": 3}
    assert result.tokens == 300
    assert result.cost_usd == 0
    assert result.evidence["usage_refused"] == {
        "input_tokens": "9223372036854775807",
        "cost_usd": "1000000000000000.0",
    }


def test_a_store_that_fails_still_ends_the_replay(
    calc_project, calc_base, calc_good, monkeypatch
):
    def fail(replay, report):
        raise DataError("value too long for type character varying(64)\nDETAIL: x")

    monkeypatch.setattr(services, "_store_findings", fail)
    run = make_run(calc_project, prompt="other", original=calc_good, base=calc_base)
    result = replay(run)

    assert (result.status, result.verdict, result.reason_code) == (
        "finished",
        "inconclusive",
        "harness_error",
    )
    assert "value too long for type character varying(64)" in result.reason
    assert "DETAIL" not in result.reason
    assert not Comparison.objects.filter(replay=result).exists()
    assert not TestOutcome.objects.filter(replay=result).exists()


def test_an_unexpected_failure_of_the_execution_ends_the_replay(
    calc_project, calc_base, calc_good, monkeypatch
):
    def explode(*args, **kwargs):
        raise RuntimeError("the diff machinery broke\nsecond line")

    monkeypatch.setattr(gitops, "compare", explode)
    run = make_run(calc_project, prompt="other", original=calc_good, base=calc_base)
    result = replay(run)

    assert (result.status, result.verdict, result.reason_code) == (
        "finished",
        "inconclusive",
        "harness_error",
    )
    assert "the diff machinery broke" in result.reason
