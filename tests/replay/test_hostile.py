"""What the agent writes can end a replay only with a verdict.

Output a database refuses, absurd usage numbers, more files than a checkout
can take, git failing in the test gate, a store that fails: each replay ends
``divergent`` or ``inconclusive`` with a reason, never left ``running``. Only
ReplayHub's own faults are ``harness_error`` or ``worker_lost``. Run on SQLite
and on PostgreSQL, which refuses NUL in text and jsonb.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.db import DataError
from django.utils import timezone

from replayhub import services
from replayhub.git import scratch
from replayhub.models import Comparison, Replay, TestOutcome, TestRecord
from replayhub.replay import execute, leftovers
from replayhub.replay.storable import escape_text, storable, unescape_text
from tests.factories import make_calc_project, make_calc_run

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
    run = make_calc_run(calc_project, prompt="nul", original=calc_good, base=calc_base)
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("equivalent", "tests_agree")
    assert "agent says a\\x00b" in result.agent_output
    assert "\x00" not in result.agent_output
    assert result.evidence["escaped_text"] == ["agent.output"]
    assert "agent says a\x00b" in unescape_text(result.agent_output)


def test_nul_in_test_output_and_failure_messages_is_stored_escaped(
    calc_project, calc_base, calc_good
):
    run = make_calc_run(
        calc_project, prompt="nultests", original=calc_good, base=calc_base
    )
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
    run = make_calc_run(
        calc_project, prompt="badname", original=calc_good, base=calc_base
    )
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
    run = make_calc_run(
        calc_project, prompt="hugeusage", original=calc_good, base=calc_base
    )
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
    run = make_calc_run(
        calc_project, prompt="other", original=calc_good, base=calc_base
    )
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


# The file cap and git failures in the test gate.


def test_more_files_than_the_cap_fires_the_cap_before_any_checkout(
    calc_repo, calc_base, calc_good, monkeypatch
):
    checkouts = []
    original_checkout = scratch.Scratch.checkout_tree
    monkeypatch.setattr(
        scratch.Scratch,
        "checkout_tree",
        lambda self, tree, dest: (
            checkouts.append(dest) or original_checkout(self, tree, dest)
        ),
    )
    project = make_calc_project(calc_repo, max_files=1000)
    run = make_calc_run(
        project, prompt="manyfiles 2000", original=calc_good, base=calc_base
    )
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "more than 1,000 files" in result.reason
    assert checkouts == []


def test_files_under_the_cap_go_on_to_a_verdict(calc_repo, calc_base, calc_good):
    project = make_calc_project(calc_repo, max_files=1000)
    run = make_calc_run(
        project, prompt="manyfiles 500", original=calc_good, base=calc_base
    )
    result = replay(run)

    # The files are outside the allowed globs.
    assert (result.verdict, result.reason_code) == ("divergent", "disallowed_paths")


def test_a_capture_that_times_out_on_few_files_is_a_harness_error(
    calc_repo, calc_base, calc_good, monkeypatch
):
    def capture(*args, **kwargs):
        raise scratch.GitError("git update-index timed out after 120s")

    monkeypatch.setattr(leftovers, "capture_workspace", capture)
    project = make_calc_project(calc_repo, max_files=1000)
    run = make_calc_run(
        project, prompt="manyfiles 10", original=calc_good, base=calc_base
    )
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "harness_error")


def test_a_comparison_too_large_for_git_fires_the_cap(
    calc_project, calc_base, calc_good, monkeypatch
):
    def compare(*args, **kwargs):
        raise scratch.GitError("git diff printed more than 67108864 bytes")

    monkeypatch.setattr(execute, "compare", compare)
    run = make_calc_run(
        calc_project, prompt="manyfiles 50", original=calc_good, base=calc_base
    )
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "53 files" in result.reason


def test_test_files_too_many_for_git_to_list_fire_the_cap(
    calc_project, calc_base, calc_good, monkeypatch
):
    def plan(*args, **kwargs):
        raise scratch.GitError("git ls-tree printed more than 67108864 bytes")

    monkeypatch.setattr(execute, "plan_tests", plan)
    run = make_calc_run(
        calc_project, prompt="other", original=calc_good, base=calc_base
    )
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "test files" in result.reason


def test_git_running_out_of_time_or_room_is_told_apart_from_its_faults(tmp_path):
    with pytest.raises(scratch.GitError) as slow:
        scratch.git("-c", "alias.wait=!sleep 5", "wait", cwd=tmp_path, timeout=0.2)
    with pytest.raises(scratch.GitError) as loud:
        scratch.git("version", output_cap=4)
    with pytest.raises(scratch.GitError) as broken:
        scratch.git("rev-parse", "--verify", "HEAD", cwd=tmp_path)

    assert leftovers.grew_too_large(slow.value)
    assert leftovers.grew_too_large(loud.value)
    assert not leftovers.grew_too_large(broken.value)


def test_the_file_cap_defaults_to_two_hundred_thousand(calc_project):
    assert calc_project.max_files == 200_000


def _checkout_failing(monkeypatch, tree: str, message: str):
    original_checkout = scratch.Scratch.checkout_tree

    def checkout(self, tree_or_commit, dest):
        if str(dest).rsplit("/", 1)[-1].startswith(f"tests-{tree}-"):
            raise scratch.GitError(message)
        return original_checkout(self, tree_or_commit, dest)

    monkeypatch.setattr(scratch.Scratch, "checkout_tree", checkout)


def test_a_checkout_of_the_replay_tree_that_times_out_fires_the_file_cap(
    calc_project, calc_base, calc_good, monkeypatch
):
    _checkout_failing(monkeypatch, "replay", "git checkout-index timed out after 120s")
    run = make_calc_run(
        calc_project, prompt="other", original=calc_good, base=calc_base
    )
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "cap_fired")
    assert "(max files)" in result.reason and "200,000" in result.reason
    # The original's run before it is kept.
    assert [o.tree for o in result.test_outcomes.all()] == ["original"]


def test_git_failing_on_the_original_tree_is_a_harness_error(
    calc_project, calc_base, calc_good, monkeypatch
):
    _checkout_failing(
        monkeypatch, "original", "git read-tree failed with exit code 128: bad tree"
    )
    run = make_calc_run(
        calc_project, prompt="other", original=calc_good, base=calc_base
    )
    result = replay(run)

    assert (result.verdict, result.reason_code) == ("inconclusive", "harness_error")
    assert "bad tree" in result.reason


def test_an_unexpected_failure_of_the_execution_ends_the_replay(
    calc_project, calc_base, calc_good, monkeypatch
):
    def explode(*args, **kwargs):
        raise RuntimeError("the diff machinery broke\nsecond line")

    monkeypatch.setattr(execute, "compare", explode)
    run = make_calc_run(
        calc_project, prompt="other", original=calc_good, base=calc_base
    )
    result = replay(run)

    assert (result.status, result.verdict, result.reason_code) == (
        "finished",
        "inconclusive",
        "harness_error",
    )
    assert "the diff machinery broke" in result.reason


# The lease reaper.


def test_one_replay_the_reaper_cannot_end_does_not_stop_the_others(
    calc_project, calc_base, calc_good, monkeypatch
):
    run = make_calc_run(calc_project, prompt="same", original=calc_good, base=calc_base)
    poisoned = services.replay_create(run=run, trigger="command")
    healthy = services.replay_create(run=run, trigger="command")
    Replay.objects.filter(pk__in=[poisoned.pk, healthy.pk]).update(
        status="running",
        lease_owner="dead-host:1:abc",
        lease_expires_at=timezone.now() - timedelta(seconds=5),
    )
    finish = services.replay_finish

    def poisoned_finish(*, replay, **kwargs):
        if replay.pk == poisoned.pk:
            raise RuntimeError("poisoned")
        return finish(replay=replay, **kwargs)

    monkeypatch.setattr(services, "replay_finish", poisoned_finish)

    assert services.replay_reap_expired() == [healthy.pk]

    assert Replay.objects.get(pk=healthy.pk).reason_code == "worker_lost"
    # Left for the next pass of the reaper.
    assert Replay.objects.get(pk=poisoned.pk).status == "running"
