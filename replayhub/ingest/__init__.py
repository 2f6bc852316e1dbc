"""Record formats into Runs: read, check, store, preflight.

docs/formats.md is the producer's reference (fields, errors, the summary,
exit and HTTP codes). Every value a producer sends is untrusted: nothing is
trimmed, truncated or coerced; a value is stored exactly as sent or the line
is refused with the reason, and an invalid line never stops the valid ones.

Modules:

- lines: a byte stream cut into numbered lines, holding at most one line
  (a chunk's lines at once for an import).
- native: the native record, pure. Lines are parsed one by one as strict
  JSON (no NaN, no repeated keys), checked field by field;
  ``record_sha256`` is over the canonical JSON without the ``project`` key.
- fastpath: the usual record read fast (orjson, straight-line checks with
  exact types) to the same ``Record``; anything unusual goes to the full
  checks, which word every error.
- rows: a batch of lines read into rows (line, project, external id, hash
  and, on PostgreSQL, the record's columns already in binary COPY form) and
  the reasons of the invalid lines. Pure.
- parsing: those batches read in a child process, the second core; a
  batch's lines and its COPY stream pass through memory they share.
- importer: batches stored, each in its own transaction (below).
- copying: a batch's runs written by binary COPY, each row its project, the
  columns its line was read into and the columns every row shares.
- arrays: a request body that is a JSON array, cut into its elements, each
  checked as a line is, by position.
- services: ``runs_import``, the one import workflow, called by the API,
  the upload page, the upload job and ``import_runs``: import, then
  preflight in process (all of it, none, or for a request up to
  ``REPLAYHUB_SYNC_PREFLIGHT_MAX`` runs, the rest queued for the
  ``preflight_pending`` task); the upload jobs; rollouts followed.
- jobs: an upload above ``REPLAYHUB_UPLOAD_INLINE_MAX_BYTES`` saved under
  ``var/uploads/`` and imported by a worker (``import_upload``). The
  ``ImportJob`` row carries the progress (updated at most twice a second)
  and then the summary, which the job's page polls (htmx, 286 when
  finished). A worker claims a job with a conditional UPDATE (queued, or
  started by a worker silent for ``REPLAYHUB_IMPORT_STALE_SECONDS``); the
  minute beat task queues silent and long-waiting jobs again; the file is
  removed once the job ends.
- preflight: the free tier, a step of its own, never in the import's hot
  path (its docstring). Runs are taken 2,000 at a time and each project's
  runs resolved together (``replay.provenance_batch``); identical inputs are
  resolved once; the outcomes are written with one ``UPDATE ... FROM
  jsonb_to_recordset`` per chunk on a thread of its own (``bulk_update``'s
  CASE expressions cost more than the resolving). Reasons and warnings come
  from ``resolve_provenance`` alone, so preflight and a replay cannot
  disagree; ``batched=False`` is the reference a test holds the batched way
  to, on every shape of history.
- tokens: per-project ingest tokens (``rhi_<prefix>_<secret>``; only the
  sha256 stored, compared in constant time).
- verifiers and follow: rollout records stored as runs with their seeds,
  and a training run's growing output followed (below).
- transcripts: the transcripts agents already write, read as native
  records (its own docstring).

The importer. Batches of 1,000. While the batches before were all new, a
batch is written whole without looking anything up: the unique (project,
external id) index refuses it if one of its records is stored already or
repeated in it, and it is then rolled back (a savepoint inside a caller's
transaction) and classified with one lookup of the stored hashes per
project (new, duplicate or conflict), as are the batches after it until one
is all new again, so a file imported twice is looked up rather than written
twice. PostgreSQL gets binary COPY (text as plain UTF-8; the canonical JSON
of the stored part, made beside the hash, goes as ``raw`` unchanged; each
row joined with no work per column) and an ``= ANY(array)`` lookup; other
databases ``bulk_create`` and ``IN``. A unique violation from a concurrent
import of the same ids rolls the batch back and classifies it again. Before
a lookup, when the run table has doubled since PostgreSQL last counted it,
its key columns are analyzed: otherwise the first big import into an empty
table gets a plan that scans the whole project for every batch and turns
quadratic (an import of new records makes no lookup and so no ANALYZE).

On PostgreSQL, outside a caller's transaction, an import of more than one
batch is stored by a writer thread with its own connection, in order, one
batch queued at most, while the importing thread parses the next; an error
in the writer surfaces in the importing thread, and whole batches stay
stored. The writer's batches commit without waiting for the disk and its
last step waits once for all of them, so an import that returns has every
run it counts on disk, without a flush of the WAL per batch that the server
would wait on instead of copying (the writer's docstring says what a crash
of the server during the import costs). Measured on the benchmark: 9,300 to
11,500 records/s. Under the same conditions the batches are read in a forked
child (``parsing``), two batches in it at most, in order, so an import uses
both cores; a failure in the child is raised in the importing process, and
the child never outlives the import. While the children run, what the
process had loaded is out of the garbage collector's sight (``gc.freeze``,
undone at the end; left alone where something else froze it, as the web
server does): its collections, set off by the batches' objects, would
otherwise walk all of Django (nearly a tenth of the import's CPU in a
profile). The process's switch interval is left alone: shortening it to 1 ms
while a writer ran measured within the noise of Python's 5 ms default
(interleaved runs, within 10%). Inside a transaction (the tests' ``db``
fixture, a caller's ``atomic``) and on SQLite, batches are stored in line.

Storage: a record's prompt and output are its largest values, and ``raw``
once held them a second time. It now holds the rest of the record
(``native.stored_part``; a prompt or output that is not non-empty text stays
in it, so reading back is never ambiguous), and the wide text columns use
lz4 compression on PostgreSQL (migration 0007, when the server has it).
Measured with ``psql``: COPY of 100,000 benchmark rows into the run table
took 9.3 s before and 5.2 s after, and the table is smaller. Rows stored
earlier keep the whole record in ``raw``; ``Run.record`` reads both shapes
the same.

Rollouts (``verifiers``, ``follow``; the records are ``replayhub.rollouts``):
accepted rollouts are stored as ``Run`` rows (source ``rollout``, preflight
``ready``) with their ``Seed`` rows, one transaction per batch of 200. They
do not go through the native importer's COPY path: each batch needs its
runs' ids for their seeds, and a follow pass moves the file's offset
(``FollowedFile``) in the same transaction, with a conditional UPDATE from
the offset it read, which makes a crash or a second worker harmless. A pass
over an unchanged source stats each file and reads one query of rows; it
opens nothing. The command, the API's ``?format=verifiers``, the upload page
and the ``follow_rollouts`` / ``follow_source`` beat tasks all go through
``services``. Every record, index and upload file is opened the untrusting
way of ``lib.files``.

Departure: rollouts with no seed under the project's settings are not
imported (counted ``skipped.no_seed``), since only their seeds can be
replayed; changing the settings and importing again picks them up.
"""
