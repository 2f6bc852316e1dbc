"""Every seed rule on constructed rollouts: the conversations replays start from."""

from __future__ import annotations

import random

import pytest

from replayhub.rollouts.seeds import (
    DEFAULT_VERIFICATION_TURN,
    SeedRules,
    compaction_seeds,
    derive,
    is_replay_output,
    recheck_seed,
    tool_call_seeds,
)
from replayhub.rollouts.trace import read_trace
from tests.traces import (
    RESTART,
    SYSTEM,
    TASK,
    Rollout,
    assistant,
    compacted,
    multi_tool,
    tool,
    user,
)


def trace(rollout: Rollout):
    return read_trace(rollout.record())


def roles(seed) -> list[str]:
    return [m["role"] for m in seed.messages]


# continue / compaction


def test_a_context_restart_seeds_its_restart_context():
    r = compacted()
    (seed,) = compaction_seeds(trace(r))
    assert seed.messages == [SYSTEM, RESTART]
    assert (seed.kind, seed.anchor) == ("continue", "compaction")
    assert seed.anchor_node == r.index_of(RESTART)
    assert seed.key == f"{r.id}:continue:compaction@{seed.anchor_node}"
    assert seed.original_completion == "final answer"
    assert [m["role"] for m in seed.continuation] == ["assistant", "tool", "assistant"]


def test_the_system_message_is_left_to_a_task_with_its_own_system_prompt():
    (seed,) = compaction_seeds(trace(compacted(system_prompt="be helpful")))
    assert seed.messages == [RESTART]


def test_a_linear_rollout_has_no_restart():
    r = Rollout().turn([SYSTEM, TASK], assistant("done"))
    assert compaction_seeds(trace(r)) == []


def test_a_restart_keeping_the_task_beside_its_notes_still_qualifies():
    r = Rollout().turn([SYSTEM, TASK], assistant("working"))
    notes = user("notes from the previous attempt")
    r.turn([SYSTEM, TASK, notes], assistant("resumed"))
    (seed,) = compaction_seeds(trace(r))
    assert seed.messages == [SYSTEM, TASK, notes]


def test_a_retokenization_split_is_not_a_restart():
    r = Rollout().turn([SYSTEM, TASK], assistant("draft"))
    rewritten = {"role": "assistant", "content": "draft (rewritten)"}
    r.turn([SYSTEM, TASK, rewritten, user("go on")], assistant("done"))
    assert compaction_seeds(trace(r)) == []


def test_a_subagent_sharing_nothing_is_not_a_restart():
    r = Rollout().turn([SYSTEM, TASK], assistant("", "c1"))
    # A separate conversation: its own root.
    r.turn(
        [{"role": "system", "content": "you are a helper"}, user("look up X")],
        assistant("X is 4"),
    )
    r.turn([SYSTEM, TASK, assistant("", "c1"), tool("c1")], assistant("done"))
    assert compaction_seeds(trace(r)) == []


@pytest.mark.parametrize("prompt", ["solve the task", None])
def test_an_auxiliary_branch_sorted_first_does_not_make_the_launch_a_restart(prompt):
    r = Rollout(prompt=prompt)
    a1 = assistant("working")
    r.turn([SYSTEM, TASK], a1)
    r.turn([SYSTEM, user("aux question")], assistant("aux answer"))
    r.turn([SYSTEM, TASK, a1, user("go on")], assistant("done"))
    assert compaction_seeds(trace(r)) == []


def test_several_restarts_seed_in_trajectory_order():
    r = compacted()
    second = user("second summary")
    r.turn([SYSTEM, second], assistant("really final"))
    seeds, _ = derive(trace(r), SeedRules())
    assert [s.messages[-1] for s in seeds] == [RESTART, second]
    assert [s.number for s in seeds] == [1, 2]


# continue / tool-call


def test_tool_call_seeds_resume_after_each_complete_tool_run():
    r = multi_tool()
    seeds = tool_call_seeds(trace(r), random.Random(0), max_anchors=None)
    assert [len(s.messages) for s in seeds] == [4, 6, 8]
    assert all(s.messages[-1]["role"] == "tool" for s in seeds)
    assert [s.anchor_node for s in seeds] == [
        r.index_of(tool(c)) for c in ("c1", "c2", "c3")
    ]
    assert seeds[0].original_completion == "final answer"


def test_the_draw_is_deterministic_in_the_seed_and_trace_id_and_keeps_order():
    t = trace(multi_tool())
    every = tool_call_seeds(t, random.Random(0), max_anchors=None)
    rules = SeedRules(anchor="tool-call", max_anchors=2, seed=7)
    pair, _ = derive(t, rules)
    again, _ = derive(t, rules)
    assert [s.key for s in pair] == [s.key for s in again]
    # The draw of the verifiers replay taskset: same salt, same anchors.
    keep = sorted(random.Random(f"7:{t.id}").sample(range(3), 2))
    assert [s.key for s in pair] == [every[i].key for i in keep]
    assert [s.number for s in pair] == [1, 2]


def test_different_trace_ids_draw_independently():
    rules = SeedRules(anchor="tool-call", max_anchors=1)
    draws = {
        derive(trace(multi_tool(f"{n:032x}")), rules)[0][0].anchor_node
        for n in range(30)
    }
    assert len(draws) > 1


def test_a_partially_answered_tool_run_is_no_anchor():
    r = Rollout()
    a1 = assistant("", "c1", "c2")
    r.turn([SYSTEM, TASK], a1)
    r.turn([SYSTEM, TASK, a1, tool("c1")], assistant("gave up"))
    assert tool_call_seeds(trace(r), random.Random(0), max_anchors=None) == []


def test_a_run_of_several_results_anchors_once_at_its_end():
    r = Rollout()
    a1 = assistant("", "c1", "c2")
    r.turn([SYSTEM, TASK], a1)
    r.turn([SYSTEM, TASK, a1, tool("c1"), tool("c2")], assistant("done"))
    (seed,) = tool_call_seeds(trace(r), random.Random(0), max_anchors=None)
    assert seed.anchor_node == r.index_of(tool("c2"))


def thinking(text: str, *call_ids: str) -> dict:
    """An assistant reply with its reasoning, as the model sampled it."""
    return {**assistant(text, *call_ids), "reasoning_content": f"why {text}"}


def stripped(message: dict) -> dict:
    """The same turn rendered again into a later context, reasoning dropped."""
    return {k: v for k, v in message.items() if k != "reasoning_content"}


def test_a_turn_rendered_again_unsampled_still_issues_its_calls():
    # The first turn's history copy loses its reasoning, so the next context
    # forks onto an unsampled copy of it; the later turns carry none.
    r = Rollout()
    a1, a2, a3 = thinking("", "c1"), assistant("", "c2"), assistant("", "c3")
    r.turn([SYSTEM, TASK], a1)
    r.turn([SYSTEM, TASK, stripped(a1), tool("c1")], a2)
    r.turn([SYSTEM, TASK, stripped(a1), tool("c1"), a2, tool("c2")], a3)
    done = [SYSTEM, TASK, stripped(a1), tool("c1"), a2, tool("c2"), a3, tool("c3")]
    r.turn(done, assistant("final answer"))
    assert not r.nodes[r.index_of(stripped(a1))]["sampled"]

    seeds = tool_call_seeds(trace(r), random.Random(0), max_anchors=None)

    # As the replay taskset anchors: after every complete tool run.
    assert [s.anchor_node for s in seeds] == [4, 6, 8]
    assert [s.anchor_node for s in seeds] == [
        r.index_of(tool(c)) for c in ("c1", "c2", "c3")
    ]


def test_with_reasoning_stripped_from_every_turn_each_tool_run_still_seeds():
    r = Rollout()
    replies = [thinking("", "c1"), thinking("", "c2"), thinking("", "c3")]
    history = [SYSTEM, TASK]
    for n, reply in enumerate(replies):
        r.turn(history, reply)
        history = [*history, stripped(reply), tool(f"c{n + 1}")]
    r.turn(history, thinking("final answer"))
    issuers = [r.nodes[r.index_of(stripped(reply))] for reply in replies]
    assert not any(node["sampled"] for node in issuers)

    seeds, skipped = derive(trace(r), SeedRules(anchor="tool-call", max_anchors=None))

    assert (len(seeds), skipped) == (3, 0)
    assert [s.messages[-1]["tool_call_id"] for s in seeds] == ["c1", "c2", "c3"]


def test_a_tool_run_pasted_into_the_context_anchors_as_the_taskset_has_it():
    pasted = assistant("", "old")
    r = Rollout().turn([SYSTEM, TASK, pasted, tool("old")], assistant("continuing"))
    [seed] = tool_call_seeds(trace(r), random.Random(0), max_anchors=None)
    assert seed.anchor_node == r.index_of(tool("old"))


def test_a_tool_call_seed_keeps_the_system_message_only_without_a_task_system_prompt():
    with_own = trace(multi_tool(system_prompt="be helpful"))
    without = trace(multi_tool())
    assert tool_call_seeds(with_own, random.Random(0))[0].messages[0] == TASK
    assert tool_call_seeds(without, random.Random(0))[0].messages[0] == SYSTEM


def test_tool_nodes_shared_by_two_branches_anchor_once():
    r = multi_tool()
    r.turn(
        [SYSTEM, TASK, assistant("", "c1"), tool("c1"), user("nudge")], assistant("ok")
    )
    seeds = tool_call_seeds(trace(r), random.Random(0), max_anchors=None)
    keys = [s.key for s in seeds]
    assert len(keys) == len(set(keys)) == 3


# recheck


def test_recheck_hands_back_the_final_attempt_with_the_verification_turn():
    r = compacted()
    seed = recheck_seed(trace(r), "check your work")
    assert roles(seed) == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert seed.messages[1] == RESTART
    assert seed.messages[-1] == {"role": "user", "content": "check your work"}
    assert seed.original_completion == "final answer"
    assert seed.key == f"{r.id}:recheck:final@{len(r.nodes) - 1}"


def test_recheck_cuts_a_dangling_tool_call_and_trailing_user_turns():
    r = Rollout()
    a1 = assistant("partial work")
    r.turn([SYSTEM, TASK], a1)
    r.turn([SYSTEM, TASK, a1, user("continue")], assistant("", "c9"))
    seed = recheck_seed(trace(r), "check")
    assert roles(seed) == ["system", "user", "assistant", "user"]
    assert seed.messages[2]["content"] == "partial work"


def test_recheck_has_nothing_to_check_when_no_model_turn_survives():
    r = Rollout()
    a1 = assistant("", "c1", "c2")
    r.turn([SYSTEM, TASK], a1)
    r.turn([SYSTEM, TASK, a1, tool("c1")], assistant("gave up"))
    assert recheck_seed(trace(r), "check") is None


def test_the_default_verification_turn_is_the_projects_unless_set():
    r = compacted()
    (seed,), _ = derive(trace(r), SeedRules(mode="recheck"))
    assert seed.messages[-1]["content"] == DEFAULT_VERIFICATION_TURN


# snapshots


def test_seeds_carry_the_snapshot_of_their_anchor():
    r = compacted()
    restart, last = r.index_of(RESTART), len(r.nodes) - 1
    r.info["snapshots"] = {str(restart): "snap-restart", str(last): "snap-final"}
    t = trace(r)
    assert compaction_seeds(t)[0].snapshot == "snap-restart"
    assert recheck_seed(t, "check").snapshot == "snap-final"
    # Only snapshotted tool results are anchors once a record has snapshots: none here.
    assert tool_call_seeds(t, random.Random(0), max_anchors=None) == []


def test_a_snapshotted_record_offers_only_snapshotted_anchors():
    r = compacted()
    r.info["snapshots"] = {"0": "ref-at-the-system-node"}
    t = trace(r)
    assert compaction_seeds(t) == []
    assert recheck_seed(t, "check") is None
    assert tool_call_seeds(t, random.Random(0), max_anchors=None) == []
    r = multi_tool()
    r.info["snapshots"] = {str(r.index_of(tool("c2"))): "snap-c2"}
    (seed,) = tool_call_seeds(trace(r), random.Random(0), max_anchors=None)
    assert seed.snapshot == "snap-c2"


# limits and the source reward


def test_max_seed_tokens_uses_recorded_token_counts_else_characters():
    recorded = trace(multi_tool(tokens=True))
    estimated = trace(multi_tool())
    every = SeedRules(anchor="tool-call", max_anchors=None)
    counts = [s.token_count for s in derive(recorded, every)[0]]
    assert counts == sorted(counts) and counts[0] > 0
    limit = SeedRules(anchor="tool-call", max_anchors=None, max_seed_tokens=counts[1])
    kept, dropped = derive(recorded, limit)
    assert (len(kept), dropped) == (2, 1)
    chars = derive(estimated, every)[0][0]
    text = "be helpful" + "solve the task" + "run{}" + "result of c1"
    assert chars.token_count == len(text) // 4


def test_the_reward_window_is_inclusive():
    rules = SeedRules(min_source_reward=0.0, max_source_reward=0.5)
    assert rules.reward_allowed(0.0) and rules.reward_allowed(0.5)
    assert not rules.reward_allowed(0.51) and not rules.reward_allowed(-0.1)


# replay output


def test_a_record_marked_by_replayhub_is_replay_output():
    r = multi_tool()
    r.info["replayhub"] = {"replay": 12, "seed": "x:continue:tool-call@3"}
    assert is_replay_output(trace(r), DEFAULT_VERIFICATION_TURN)


def test_a_task_named_like_a_replay_is_still_a_source_rollout():
    r = multi_tool(name="recheck:5c1f0e9a")
    assert not is_replay_output(trace(r), DEFAULT_VERIFICATION_TURN)


def test_the_tasksets_continue_from_a_compaction_is_replay_output():
    # What the replay taskset launches for the canonical [system, summary]
    # restart: the summary as a plain prompt, under its own task name.
    summary = RESTART["content"]
    r = Rollout(prompt=summary, name="continue:c0ffee00:compaction0")
    r.turn([SYSTEM, RESTART], assistant("", "c2"))
    r.turn([SYSTEM, RESTART, assistant("", "c2"), tool("c2")], assistant("done"))
    assert is_replay_output(trace(r), DEFAULT_VERIFICATION_TURN)
    # Its other restart shapes launch system and user messages.
    notes = [TASK, user("notes from the previous attempt")]
    r = Rollout(prompt=notes, name="continue:c0ffee00:compaction1")
    r.turn([SYSTEM, *notes], assistant("resumed"))
    assert is_replay_output(trace(r), DEFAULT_VERIFICATION_TURN)


def test_a_compaction_continue_name_alone_does_not_make_replay_output():
    # A prompt no compaction seed has (opened by the user side) keeps it a
    # source; so does a name that is not the taskset's.
    r = Rollout(prompt=None, name="continue:c0ffee00:compaction0")
    r.turn([SYSTEM, TASK], assistant("done"))
    assert not is_replay_output(trace(r), DEFAULT_VERIFICATION_TURN)
    r = Rollout(name="continue: the invoice")
    r.turn([SYSTEM, TASK], assistant("done"))
    assert not is_replay_output(trace(r), DEFAULT_VERIFICATION_TURN)


def test_a_launch_context_shaped_like_a_seed_is_replay_output():
    recheck = [TASK, assistant("answer"), user("verify please")]
    r = Rollout(prompt=recheck).turn([SYSTEM, *recheck], assistant("fixed"))
    assert is_replay_output(trace(r), "verify please")
    assert not is_replay_output(trace(r), DEFAULT_VERIFICATION_TURN)
    resumed = [TASK, assistant("", "c1"), tool("c1")]
    r = Rollout(prompt=resumed).turn([SYSTEM, *resumed], assistant("done"))
    assert is_replay_output(trace(r), DEFAULT_VERIFICATION_TURN)


def test_stable_keys_do_not_depend_on_which_anchors_were_drawn():
    t = trace(multi_tool())
    every = {s.anchor_node: s.key for s in tool_call_seeds(t, random.Random(0), None)}
    for salt in range(5):
        for seed in tool_call_seeds(t, random.Random(salt), 1):
            assert every[seed.anchor_node] == seed.key
