"""The text tier: a recorded task's prompt sent as one completion to another
provider and model, compared with the original output by token-set Jaccard
similarity and, optionally, a judge model's 1-10 equivalence score.

It answers "would another model have said the same?", never "does the change
reproduce?": nothing here reaches a verdict or enters the review queue, and
every page that shows a text replay labels it "text tier, not a
reproduction".

Modules:

- similarity (pure): the token-set Jaccard; judge (pure): the judge's
  prompt (each side cut to 24,000 characters) and the strict reader of its
  answer; an unparseable answer is stored as it came with the reason, and
  no score.
- client: one completion, called from the host (a worker or a command),
  never from a sandbox, built with the gateway's wire rules; 429 and 5xx
  retried with backoff (``REPLAYHUB_TEXT_RETRIES``,
  ``REPLAYHUB_TEXT_BACKOFF_MS``; ``Retry-After`` honoured up to 60 s),
  nothing else; each answer capped at ``REPLAYHUB_TEXT_MAX_TOKENS``; the
  timeout is ``REPLAYHUB_TEXT_TIMEOUT_SECONDS``. The key is read from the
  provider's environment variable (a missing variable is a stored failure)
  and masked in every error and in the answer before anything is stored.
- replay: one text replay; suites: a suite's summary, pure; night: the text
  tier in the night (the policy is ``replayhub.nights``'); services: the
  workflows (command, run page, suite, night).

The rules:

- Rows (``TextReplay``): one per attempt, failures included (target,
  judge, output, similarity, score, rationale, error, HTTP status,
  attempts, duration, the tokens of each call, cost). Claimed by a
  conditional UPDATE, so a redelivered message does nothing; the lease
  reaper ends one left running by a lost worker as a failure. NUL and lone
  surrogates in an answer become U+FFFD (the similarity was computed
  before). ``replay_text --json`` prints ``TextReplay.summary()``: the
  similarity and the output are null when the call failed (a failed call is
  not an answer with zero similarity), and the command exits 1.
- Suites (``TextSuite``, ``manage.py replay_suite``): a project's runs,
  newest first, filtered by recorded model, start date and ``--max``; runs
  whose original failed its tests only with ``--include-failed``. Runs with
  no prompt or no output are skipped; a failed call is counted and the
  suite goes on. Progress is one line rewritten in place on a terminal (one
  line per run otherwise, control characters replaced), then the summary,
  stored on the suite (``/text-suites/``). There, Run now makes a new suite
  of the same project, models and filters for a worker: its start
  (``suite_dispatch``) selects the runs once, under the suite's row lock, and
  queues a text replay of each; the last one to end writes the summary.
- Trends: ``?tier=text`` adds mean similarity per night per target model,
  read from the text replays themselves (``reviews.trends``).
- Pages: a run's page lists its text replays (newest first, without outputs
  or rationales) and, for admins, the Replay as text form, which queues one
  for a worker; the list polls itself (htmx, 286 when nothing is pending).
  ``/text-replays/<id>/`` shows both outputs side by side with the
  similarity, the score and the rationale; money for those who may see it.

Departure: the design lists ``text`` as a tier of ``Replay``. A text replay
is its own model instead: it has no sandbox, phase, lease, comparison or
verdict, and the replay table's invariants (a finished replay has a verdict,
and its review band is set from it) would have to be broken for it.
"""

from __future__ import annotations
