"""The verdict table from DESIGN.md as one pure function.

``decide`` takes plain facts about one replay (what the harness managed, where
the base came from, whether the trees match, what the test gate saw on each
tree) and returns the verdict, a machine-readable reason code, a one-sentence
reason and the checks behind it, each labelled with the class of evidence it
rests on.

The rows are evaluated top to bottom and the first match wins. Every row that
cannot be decided on evidence the sandbox produced itself ends in
``inconclusive``: a refusal, never a judgement of the agent.

Modules, none of which imports Django:

- facts: what a verdict is decided from and what it says (``Facts``,
  ``Ruling``, ``Verdict``, ``Reason`` and its sentence, ``EvidenceClass``).
- table: the code run's rows (``decide``); check_list: the checks behind a
  decision, with their evidence classes; text: the sentences of reasons and
  checks, from untrusted text made safe to show.
- rollout: a rollout replay's rows, judged by the environment's verifier.
- tape: what a tape replay's verdict says (the environment's drift, not the
  model's). toolchain: a suite that could not start, and what it lacked.

The table as revised for evidence the replay does not control:

- Disallowed paths come right after identical trees, before any test row:
  ``divergent / disallowed_paths`` cannot be traded for a test refusal.
- When there is a reference run (``replayhub.testgate``) it judges instead
  of the replay's own suite (``replay_fails_reference_tests``, naming the
  failing tests); a test the original reported and the judging run did not
  is ``tests_missing``.
- A divergence that rests only on tests known to flip is ``flaky_tests``.
- Interference caps a pass at ``test_interference``, naming the lines,
  unless the project allows it (``Project.allow_test_interference``).
- Tests that fail after refused egress are ``network_required``, naming the
  hosts. A replay that called another model than recorded is flagged, and is
  ``model_mismatch`` when the project requires the recorded model.
- A suite that executed nothing and whose output names a missing module or
  command (or exited 126 or 127) did not start, and an original tree whose
  every test failed for one is not a baseline failure: both are
  ``tests_not_run``, the reason naming what the sandbox lacks. A replay tree
  failing for a missing module while the original passes is still the
  replay's failure: the original showed the environment has what it needs.
- Agent-caused trouble is never a harness fault: ``harness_error``,
  ``worker_lost`` and ``host_failed`` mean ReplayHub's own failure, the
  leads' harness signal; and a host's failure is never the run's (a full
  disk while provisioning is ``host_failed``, naming the host, not
  ``fixture_failed``).

Reason codes the design's table does not list, all inconclusive. In row 1,
where the replay could not run as asked: ``provider_error`` (the model calls
went up and none was answered), ``tape_diverged`` (the agent left its tape),
``setup_failed`` (the project's environment could not be built),
``image_mismatch`` (the record's image is not the project's root image, when
the project requires the match), ``repo_unreachable`` (a remote that
could not be read) and ``host_failed`` (the worker's host could not
provision the replay). After the disallowed paths: ``unstorable_paths`` (paths
git cannot store, inside the allowed globs). The rollout rows add their own;
see ``rollout``.

Every decision carries its checks with evidence classes, among them test
changes, test interference, tests on reference, test ids and the model
called; a verdict never rests only on executor-supplied or agentically
inferred evidence.
"""

from __future__ import annotations

from replayhub.verdicts.facts import (
    BASE_SOURCES,
    HARNESS_REASONS,
    INCONCLUSIVE_REASONS,
    REASON_TEXT,
    REASON_VERDICT,
    ROLLOUT_REASONS,
    TRUSTED_BASE_SOURCES,
    Check,
    EvidenceClass,
    Facts,
    Outcome,
    Reason,
    Ruling,
    SuiteResult,
    Verdict,
)
from replayhub.verdicts.table import decide

__all__ = [
    "BASE_SOURCES",
    "HARNESS_REASONS",
    "INCONCLUSIVE_REASONS",
    "REASON_TEXT",
    "REASON_VERDICT",
    "ROLLOUT_REASONS",
    "TRUSTED_BASE_SOURCES",
    "Check",
    "EvidenceClass",
    "Facts",
    "Outcome",
    "Reason",
    "Ruling",
    "SuiteResult",
    "Verdict",
    "decide",
]
