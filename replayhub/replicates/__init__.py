"""Replicates: a run's reproducibility measured from several replays of it.

An agent is a random process, so one replay is one sample. A replicate is an
ordinary replay of a run counted as a sample of its reproducibility — the
probability that a replay under the same conditions reaches identical or
equivalent. Divergent replicates are failures; inconclusive ones are not
samples and are counted apart (coverage), never dropped. This package is the
pure statistics over those counts: no Django, no database, no I/O; the
models, the night's scheduling and the pages call it — all but ``standing``,
the one module that reads a run's replays (below).

Modules:

- stopping: the replicate policy (threshold ``p0``, confidence, most
  replicates ``k``, the indifference margin) and the sequential test that
  rules a run *reproduces*, *does not reproduce* or *undecided* after each
  replicate — Wald's SPRT between ``p0 ± margin``, truncated at ``k``, its
  thresholds calibrated exactly so that each wrong decision has probability
  at most ``1 - confidence`` (the statistics, the guarantee and what it
  assumes are in its docstring); ``next_sample_value`` ranks undecided runs
  for the scheduler by the chance of settling per replicate spent.
- intervals: Wilson's and Clopper-Pearson's binomial intervals.
- passk: the unbiased estimator of pass^k, ``C(c, k) / C(n, k)``.
- rates: the rate, its interval and the inconclusive count as one line.
- standing: a run's samples read from its replays (live ones for the
  model, tape ones for the environment) and its standing under the
  project's policy, computed on read, never stored; whether its tape replays
  name an environment problem.
- simulation: runs of known rate, simulated; the rules the test was chosen
  over (a fixed k, an interval after every look, with and without a
  Bonferroni correction), measured in the same runs by the test suite and
  ``benchmarks/replicates.py``.

Measured (``docs/replicates.md``): for ``p0 = 0.8`` at 90 % with ``k = 10``,
the test spends 3.4 replicates a run over rates spread on [0, 1] — 34 % of a
fixed ten — with exact errors of 7.5 % and 9.1 % at the zone's edges.
"""
