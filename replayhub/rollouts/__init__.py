"""verifiers rollout records and their replays.

Reading the records (docs/formats.md, "verifiers rollout records") is pure:
``trace`` (both record shapes into a plain ``Trace``), ``graph`` (branches),
``seeds`` (the seed rules, after the verifiers replay taskset's, with
``SeedRules`` built from a project) and ``index`` (index-selected loading)
know nothing of the database; storing and following them is
``replayhub.ingest`` (``verifiers``, ``follow``).

Replaying them: ``replay`` (the harness continues a seed in the sandbox),
``verifier`` (a separate verifier scores the completion), ``result`` (the
untrusted result files, read strictly), ``completions`` (messages normalised
for comparing and showing) and ``output`` (the replay's output as a
verifiers record). The verdict is ``verdicts.rollout``'s.

A replay with a seed, or any replay of a rollout run (the scheduler queues
runs; such a replay takes the run's first seed), is a rollout replay: the
worker (``services.replay_execute``) hands it to ``replay.execute_rollout``
instead of ``replay.execute.execute``. Retries and reruns keep the seed.

- The run. The project's ``harness_command`` runs in the same sandbox, with
  the same limits and the same way out, as a code run's agent. Its
  workspace is a checkout of the project's repository (the environment's
  code) at the run's recorded base, else the default branch's tip. Inside:
  ``REPLAYHUB_SEED_FILE`` (the seed's messages), ``REPLAYHUB_RESULT_FILE``,
  ``REPLAYHUB_USAGE_FILE``, ``REPLAYHUB_TASK_ID`` (the trace id),
  ``REPLAYHUB_SEED_KIND``, ``REPLAYHUB_REPLAY_ID``, ``REPLAYHUB_MODEL`` and
  ``REPLAYHUB_REPLAY_MARK``, the object a harness that writes verifiers
  records puts under ``info.replayhub``, which ingest skips as replayed.
- The separate verifier (``verifier``'s docstring): the model's tool calls
  run in the harness's sandbox, so nothing written there can tell ReplayHub
  how good the completion is. A project's ``verifier_command`` scores it
  instead, in a second sandbox with no network at all, a fresh checkout of
  the same commit, the seed and the completion as read-only files, and the
  test phase's limits. The harness then owes only the completion: a reward
  it writes is kept as ``harness_reward`` and never judged. A verifier that
  exits non-zero, runs past its limit, hits a cap or writes no readable
  reward ends the replay ``inconclusive / verifier_failed``, with its exit
  status, duration and the end of its output on the page. The evidence and
  ``reproduce --json`` name where the reward came from (``reward_source``).
- Without a verifier command the harness's own reward is used, labelled as
  the harness's, and ``manage.py check --deploy`` warns of each such
  project (``replayhub.W003``; ``project_add`` and the admin say so when it
  is saved).
- The result files are untrusted (``result``): opened without following
  links, only a regular file of at most 4 MiB, UTF-8, one JSON object
  without repeated keys (a parser-dependent reward), no NaN or Infinity, a
  finite numeric reward, a completion that is a string or a list of chat
  messages (at most 2,000). For the harness's file anything else is
  ``result_malformed``, no file ``result_missing``, and a non-zero exit is
  ``harness_failed`` even with a result; for the verifier's, each is
  ``verifier_failed``.
- Comparing completions (``completions``): the original is the seed's
  continuation (a recheck seed has none: its final answer). The similarity
  is the text tier's token-set Jaccard, recorded as secondary evidence only.
- The replay's output is offered on its page as one verifiers record
  (``/replays/<id>/rollout.jsonl``), marked so that importing it back skips
  it as replayed. The replay's completion is stored capped at 64 KiB per
  message.

Departures from DESIGN.md, and why:

- Both rewards below the threshold, completions differ: ``divergent /
  both_rewards_fail``. The design names only the passing and the
  opposite-side cases; as with two red suites, two failures are never
  ``equivalent``, and ``inconclusive`` is kept for refusals.
- The same completion scored on the other side of the threshold:
  ``inconclusive / verifier_disagrees``, not ``identical``. The verifier
  judged one text two ways, so its reward is no evidence either way.
- ``harness_failed`` beside ``harness_error``. The harness is the project's
  code (and whatever the model made it do): its failure is not ReplayHub's,
  so it is kept out of the ``harness_error`` rate leads read as ReplayHub's
  own health.
- What the verdict rests on. The original's reward is executor-supplied
  (the record says so). The replay's is independently executed only from a
  separate verifier; from the harness's own sandbox it is executor-supplied,
  and the design's rule that no verdict rests only on such evidence is why
  it cannot make a replay ``equivalent``: where it would (completions
  differ, both rewards pass) the replay is ``inconclusive /
  reward_unverified``, a refusal whose rate by project says who should add a
  verifier. A harness reward still decides the other rows: below the
  threshold it makes the replay ``divergent`` (a model gains nothing by
  scoring itself low), and ``identical`` rests on the completions, which
  ReplayHub compares itself. The separate verifier still reads a completion
  the model wrote: it is the thing judged, and the verifier's sandbox has
  nowhere to send it.
"""
