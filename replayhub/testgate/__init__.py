"""The test gate: the project's own test command on the trees a replay compares.

A replay's own tests are code the replay wrote, so they cannot be its judge.
The gate runs the project's test command on clean checkouts of the original
tree, the replay's tree and, when the two differ in a test path, the
reference tree (the replay's code with the original's tests), each in a
fresh sandbox; the verdict (``replayhub.verdicts``) reads what it saw.

Modules:

- gate: the runs, their reruns and flakes (``run_gate``), and the first
  runs compared test by test.
- reference: which test files differ, and the reference tree built in the
  host-owned scratch git dir with a private index.
- paths: what a test path is (``DEFAULT_TEST_PATHS``), and the changed code
  that could decide a test run itself (``find_interference``). Pure.
- summary: how many tests ran, in the runner's own words. Pure.
- cases: which tests ran and how each ended (JUnit, or the verbose output of
  pytest, unittest, go test, cargo test, jest and vitest). Pure.
- memory: what the gate remembers across replays (flakes, the original's
  cached result); its tables are ``models.evidence``.

The rules:

- Test paths are ``Project.test_paths`` (default: the common test layouts
  plus the runner's configuration: ``conftest.py``, ``pytest.ini``,
  ``tox.ini``, ``setup.cfg``, ``pyproject.toml``, ``package.json``,
  Makefiles, jest and vitest configs), listed with ``git ls-tree`` in the
  scratch git dir. When the two result trees differ there, the reference
  tree is the replay's tree with every test path taken from the original
  (added, changed and deleted to match it), and its run judges the replay.
- Each run gets ``REPLAYHUB_JUNIT_XML`` (a writable path outside the
  checkout) and is not told which tree or attempt it is. When the first
  outcomes differ, every tree runs ``Project.flake_reruns`` more times; an
  outcome that changes makes that suite flaky.
- A suite ran when no limit stopped it and its runner printed a summary (or
  wrote JUnit) or it exited 0 or 1; a command that cannot be executed (exit
  126 or 127) did not run, nor did one whose toolchain is missing
  (``verdicts.toolchain``). Counts come from JUnit first, then the runner's
  summary; an unknown count never meets the evidence floor.
- Per-test outcomes are stored per run (``TestOutcome.cases``). The first
  runs are compared by id: a test that passed on the original must pass on
  the judging run; one the original reported and the judging run did not is
  missing evidence (a run with a summary but no ids, where the original had
  ids, misses them all).
- Interference: the replay's changes to non-test files are read from the
  scratch git dir (sizes first, so a huge blob is never read) and searched
  for what can report a run's success itself: a process exit at import, the
  JUnit path, a runner's summary text. Hits the original's version of the
  same file already has are not the replay's doing.
- Flake memory (``TestRecord``): every outcome on an original tree is
  counted per project, tree and test id with one ``INSERT ... ON CONFLICT DO
  UPDATE`` that adds to the counts (the same statement on PostgreSQL and
  SQLite), in the transaction that stores the verdict. A test seen both
  passing and failing on one tree is flaky. Trees a replay wrote are not
  remembered: a test flipping there is that replay's nondeterminism and must
  not excuse a later replay's failure as known flaky.
- Cache (``CachedResult``): the original tree's first run, keyed by the
  tree, the test command, the image, the environment and the project's test
  configuration, is kept when its outcome did not flip; later replays and
  attempts of the run reuse it (``TestOutcome.cached``, no sandbox time).
- Egress for the tests only when the project gives the tests phase an
  allowlist (``gateway.access.test_needs``); a failure after refused
  attempts is ``inconclusive / network_required``.
"""
