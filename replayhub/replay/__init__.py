"""One replay: from a claimed row to a verdict ready to store.

Modules:

- execute: a code run end to end. ``execute`` returns a ``Report`` of plain
  data and touches the database only through its ``on_phase`` callback;
  storing the report is ``services.replay_finish``'s job.
- workspace: what every kind of replay shares: the report, the sandbox
  checked, a scratch directory of its own in the project's environment
  (``prepared``), and the agent phase with its way out, its spending read
  back and its caps (``run_agent``). A rollout replay
  (``replayhub.rollouts``) goes through the same steps.
- stops: why an agent phase stopped short (``NotRun``): a gateway cap, the
  tape left, a provider that answered no call, the sandbox's time limit or
  another of its caps, each in one sentence.
- surroundings: where the agent phase runs, made to look like where the
  original ran (the record's ``surroundings``: the workspace at its working
  directory, HOME, the branch, TZ and the system zone, LANG, the shell),
  each value used only when it passes its rule; what could not be made the
  same goes in the evidence.
- capture: what the agent left, taken as a tree whatever it left.
- leftovers: the decisions on what the agent left (file and disk caps,
  unstorable paths, the agents' own files), each ending in a verdict that
  names the agent's doing, never in an exception.
- provenance: the base commit, the image and what drifted, for one run.
- provenance_batch: the same for a preflight chunk, with a handful of git
  processes (docs/performance.md, "Preflight in batches").
- tapes: the tape a tape replay plays (the record's own, else the latest a
  live replay recorded).
- sweep: what dead workers left on a host (workspaces of replays no longer
  running, old build scratch), removed when a worker starts there.
- retries: when a night's replay goes back to the queue instead of being
  ruled (a remote out of reach, a host that could not provision it: the
  host's own errors told from the run's), with back-off inside the night's
  window; services: the replay sent back, and a worker's host that declines
  replays when short of disk and stops claiming after host failures in a row.

The steps. ``services.replay_execute`` claims the replay first (one
conditional UPDATE from queued to running, with a lease), a ``LeaseKeeper``
thread renews the lease while it runs, and each phase is written to
``Replay.phase`` as it starts, so the pages show progress.

1. Provenance (``provenance``), read from ``Project.repository()``; a project
   on a remote is fetched first when its mirror lacks a commit the record
   names (``replayhub.git``). The base in trust order: recorded, fork-point,
   first-parent (never trusted). A run with no original commit, or whose
   original is missing from the repository, ends ``inconclusive /
   fixture_failed`` with that reason; a remote that cannot be read,
   ``repo_unreachable`` in git's own words (a night's replay is tried again
   while its window is open, ``retries``).
2. Workspace (``git.scratch.Scratch``) under ``REPLAYHUB_WORK_DIR/replay-<id>/``,
   removed after every outcome (the lease reaper removes what a dead worker
   left). A ReplayHub-owned bare git dir borrows the project's objects
   through alternates; the project repository is only read. The project's
   environment is built or reused here (``replayhub.environments``).
3. Agent (``workspace.run_agent``, in ``replayhub.sandbox``): the project's
   agent argv in a fresh sandbox with ``REPLAYHUB_PROMPT_FILE``,
   ``REPLAYHUB_USAGE_FILE``, ``REPLAYHUB_TASK_ID`` and ``REPLAYHUB_SAMPLE``
   (the replay's number among its run's replays, a seed for replicates).
   The prompt and usage files live in a second writable bind
   (``/replayhub``), so they never appear in the change; the usage file is
   read without following links, without blocking, and only if small. The
   model gateway and the egress proxy are its only way out
   (``replayhub.gateway``).
4. Capture (``capture``; the decisions in ``leftovers``): see the departures
   below and ``capture``'s docstring. The agents' own files
   (``git.agentfiles``, ``Project.ignored_paths``) are not the change.
5. Compare (``git.scratch.compare``), with the original of an imported run
   whose original is a patch (``RunPatch``) made now, after the agent, by
   applying the patch at the base in the scratch git dir (``git.patches``):
   it is in no repository, so it is the same on every worker; a patch that no
   longer makes the tree it made at import is ``fixture_failed``. Identity
   on tree hashes; otherwise the
   diff-of-diffs, its stat, the differing paths, both patches against the
   base and the paths outside the allowed globs, each capped at 1 MiB with a
   truncation flag, and a hunk class per differing file (``git.hunks``).
6. Tests (``replayhub.testgate``), skipped when the verdict is decided
   without them: identical trees, an untrusted base, no test command,
   disallowed or unstorable paths.
7. Verdict (``replayhub.verdicts``): ``decide`` over the facts gathered.
8. Finish (``services.replay_finish``): the replay, its comparison, test
   outcomes, model calls, egress attempts and tape, the run's provenance and
   the night's settlement in one transaction, only while the replay is still
   running under this worker's lease (``Replay.objects.finish``, one
   conditional UPDATE). The review band is set here. Everything the replay
   produced is made storable first: a text PostgreSQL would refuse (a NUL, a
   lone surrogate) is escaped and named in the evidence, numbers that are
   not finite or out of range are not stored as numbers. If storing still
   fails, a minimal finish ends the replay ``inconclusive / harness_error``
   with the error, so nothing the agent wrote leaves a row running.

Caps on what the agent left:

- File cap (``Project.max_files``, default 200,000): counted while the
  workspace is listed for capture (git reads nothing of a workspace over
  it) and on the captured tree before anything is checked out. Over it, or
  when git runs out of time or room comparing or checking out what the agent
  wrote: ``inconclusive / cap_fired``.
- Disk cap (``Project.max_disk_mb``, default 2 GiB): the sandbox's watchdog
  stops the agent over it (``sandbox.watchdog``); it is checked again before
  capture copies the workspace and before a tree the agent shaped is checked
  out for its tests (the sum of its blob sizes). Over it: ``inconclusive /
  cap_fired (disk)``. Each test run has the same cap on its checkout; a run
  it stops did not run (``tests_not_run``).

Departures from the design map, and why:

- The agent's checkout is a ``--no-local`` clone of the scratch git dir, not
  ``git clone --shared`` of the project. A shared clone lets the agent read
  every object of the project, the original solution included, by hash
  (``git cat-file --batch-all-objects``), and a copy of it would look like a
  perfect reproduction. The agent's git holds only what the base reaches.
- Capture is not ``git add --all`` in the workspace. Everything there was
  chosen by the agent: ``git add`` walking it fails on a ``.GIT/config`` or
  an empty nested repository, applies the conversions the agent's
  ``.gitattributes`` asks for (and fails on one it cannot apply), and,
  running as root, resolves a nested repository's ``HEAD``: a link to a
  root-only file put its content into the stored diff as a submodule commit.
  So ReplayHub lists the files itself (iteratively, links never followed),
  filters the untracked ones through ``git check-ignore`` and hands the list
  to ``git update-index`` on a private index started from the base, run as
  the sandbox's uid with its new objects in a directory of its own. ``.git``
  is never stored at any depth; a directory holding a repository is stored
  as the plain directory it is (``nested_repositories`` evidence). Paths git
  refuses, paths past PATH_MAX and special files are skipped and listed
  (``unstorable_paths``): the stored tree is then not what the agent left,
  so it is never ``identical``; outside the allowed globs they are
  ``disallowed_paths``, otherwise the replay ends ``inconclusive /
  unstorable_paths`` without a test run.
- Content moves as bytes. ``info/attributes`` of every git dir ReplayHub
  runs git in unsets ``text``, ``eol``, ``ident``, ``filter`` and
  ``working-tree-encoding`` for every path (``git.scratch.NO_CONVERSION``),
  outranking the trees' own ``.gitattributes``: the workspace is checked out,
  captured and tested unconverted, and a project whose base asks for CRLF or
  UTF-16 working copies sees the repository's bytes.
- A lost worker's replay is not put back in the queue as the same row. The
  reaper (``services.replay_reap_expired``, beat, every minute) ends it
  ``inconclusive / worker_lost`` and, while the run has attempts left
  (``Project.max_attempts``), queues a new replay with the next attempt
  number. Each attempt keeps its own evidence, and worker loss shows in the
  inconclusive rate by reason, where a degrading harness should be visible.
  A lost worker's attempt settles nothing but its reservation.
"""
