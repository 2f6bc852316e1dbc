"""Budgets and the night: admitting replays while a night's budget lasts.

A Night is one project's nightly window (start hour, end hour, time zone;
``[start, end)``, an end hour not after the start hour ending the next day,
DST-aware). Its budget is spent per tier, each tier with its own share — a
row per tier (``NightShare``, copied from the budget's ``BudgetShare`` rows
when the night opens), the same columns on every row: the agentic tier over
four dimensions (replays, sandbox seconds, tokens, money), the text tier over
replays, tokens and money, the tape tier over replays and sandbox seconds.
Nothing here spends past a share, and nothing a share cannot take is
dropped: it is deferred, counted and first in line next night. A later kind
of spending is one more tier in ``tiers``, not more columns.

Modules:

- arithmetic: the budget arithmetic and the window, pure (``Amounts``,
  ``remaining``, ``fits``, the estimate, the caps a replay starts with).
- shares: the one way every tier spends its share: ``open_shares``,
  ``reserve``, ``admit`` (k estimates at once), ``settle``, ``remaining``,
  ``defer``; and the one report of an admission (``NightReport``).
- scheduler: open a night, select the agentic tier's candidates, admit
  them, settle any replay on its tier's share, close.
- tiers: the tier policy, pure (which dimensions each tier budgets, its
  default share, the admission order, where a replay's spend is charged;
  which runs the text tier passes on, the most a text replay can spend, the
  tape tier's estimate).
- replicate_tier: the replicate tier: more replays of runs whose
  reproducibility is undecided under the project's replicate policy, on a
  share of their own, tape replicates first, then live ones ranked by
  ``replicates.next_sample_value``; never a decided run.
- admitted: what one run of a night admitted, as figures and as the lines
  ``manage.py nightly`` and the budgets page's "Start tonight now" say.
- tape_tier: the tape tier in the night. The text tier's part is
  ``texttier.night``; the workflows that run a night tier by tier are
  ``services.night_run`` and ``services.nights_tick``.

The rules:

- Admission (``shares.reserve``) locks the night's row, checks it is open
  and its window not ended, then reserves an estimate with one conditional
  UPDATE of the tier's share row whose WHERE says, for every dimension and
  with that row's own columns only, that reserved plus used plus the
  estimate stays within the limit; on PostgreSQL a concurrent update
  re-checks that condition after the row lock, so no interleaving overspends
  (tests reserve from 16 and 24 threads). A join or subquery through the
  night in that WHERE would not be re-checked so. A named
  ``CheckConstraint`` (``nightshare_reserved_within_limits``) is the
  backstop.
- Estimate: the median of the project's last 20 finished replays of the
  tier, each dimension at most its cap. Without history, the caps: sandbox
  seconds are the agent's limit plus every test run (2 x (1 + flake reruns) x
  the test limit). Estimates of the agentic tier read live replays only, so
  free tape replays never pull them down.
- Caps: a replay starts with the smaller of the project's limit and what
  remains, for wall time and tokens (``Replay.caps``; the agent command's
  ``{max_tokens}`` and ``{max_turns}`` placeholders are filled from them).
- Settlement happens in the transaction that stores the verdict, once per
  replay (``Replay.settled``): the reservation is released and the actual
  replays, sandbox seconds, tokens and money are added to what is used (an
  overrun is recorded as it is): each dimension on the replay's tier's
  share when the tier budgets it, else on the agentic share
  (``tiers.charges``). A replay the night never admitted (an explicit
  ``reproduce``, a reviewer's rerun, a retry after a lost worker) is
  charged to the project's night running at that moment, if any, on its
  tier's share. A lost worker's attempt settles nothing but its
  reservation.
- Selection (``scheduler.candidates``): runs that passed preflight with no
  replay in flight; deferred runs first (oldest deferral first), then
  never-replayed, then runs whose last replay is inconclusive with attempts
  left and at least 6 hours old, then the rest by oldest last replay. Once
  one candidate does not fit, the rest are deferred: counted on the share,
  marked on the run, first in line next night.
- The tick (beat, every two minutes) claims each night once (a conditional
  UPDATE of when it was scheduled, so two beats cannot both spend it) and
  closes nights whose window ended; a closed night admits nothing, and its
  closing is announced (``signals.night_closed``) for the rollups.
  ``manage.py nightly --now`` opens today's window from now and runs it.
- The window's end: a scheduler replay no worker reached before its night
  ended is not started; it is cancelled, its reservation goes back, and its
  run is deferred to the next night (a tape replay stays the tape tier's).
  Running replays finish or hit their caps; explicit replays are not bound
  to the window.

The tier policy (``tiers``; the budget holds its switches and thresholds):

- Order: preflight (free), tape (no model spend, runs with a tape only),
  text (one completion), agentic (sandboxed, expensive), then replicates
  (more samples of the runs already replayed whose standing is undecided,
  for projects with a replicate policy; every tick in the window admits
  them again). A night admits the tape tier first, then the text tier, then
  the agentic tier; with the text
  tier on, every tick in the window admits again, so runs the text tier
  passed on during the night reach the agentic tier the same night.
- Tape tier (off by default): its candidates are the ready runs with nothing
  in flight that have a tape (their record's, or one a replay recorded) and
  no tape replay since their last finished live replay; never tape-replayed
  first, then oldest import. So a run alternates: a tape replay asks whether
  the environment still reproduces it, the next live replay whether the
  model does. While the tier is on, the agentic candidates leave out the
  runs it is to replay, even those its share deferred: a taped run never
  spends model money on a night its tape could answer. A tape replay starts
  with the wall time cut to the share left and a token cap cut to what the
  agentic tier has left; tokens or money it spends after leaving its tape
  (``Project.tape_then_live``) are charged to the agentic tier. The tier
  admits once per night; what its share deferred waits for the next night.
- Passing on (``tiers.passes_on``): the run's latest successful text replay
  has a similarity below the project's threshold, or a judge's score at or
  below its limit, or the record's category is one the project escalates. A
  failed text call passes nothing on. With ``agentic_after_text`` the
  agentic candidates are only such runs, never replayed or inconclusive
  with attempts left, oldest first; a run an agentic replay decided is not
  replayed again by the scheduler.
- Text tier: each text replay reserves the most it can spend
  (``tiers.text_bound``: no tokenizer counts more tokens than the text has
  bytes, each answer is capped, the judge reads at most three capped sides;
  money at the provider's prices; a model without a price counts no money),
  one conditional UPDATE each, and settles the actual spend when it ends.
  Candidates are the ready runs with no answer yet and none tried this night
  (a failure waits for the next night), never-asked first.

Departures, and why:

- Tokens and money have no per-replay cap unless the project sets
  ``max_tokens`` (money never), so without history they are estimated at
  zero rather than at the whole night's budget; the actual spend is settled
  at the end and feeds later estimates.
- Admission in bulk is one statement, not the ORM's ``bulk_create``. Every
  candidate of a night shares one estimate, so the night reserves k
  estimates with one conditional UPDATE and creates the k replays with one
  ``INSERT ... SELECT`` (``Replay.objects.queue_for_runs``, when their caps
  are all the same, the usual case); a worker task (``dispatch_night``) then
  sends the broker messages. With ``bulk_create``, admitting the same 10,000
  replays took 9.0x its floor (median 1.87 s) against 5.9x for the statement
  in the same kind of run (``benchmarks/nightly_admission.py``; the machine
  was shared, so read the ratios), most of it spent preparing 300,000
  parameters in Python. The statement's column list is made from the
  model's fields, each taking its default, and a test compares a row it
  creates with one the ORM would create, field by field. The tape tier
  admits the same way.
"""
