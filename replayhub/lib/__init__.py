"""Narrow helpers with no Django in them, each module named for its one job.

- globs: allowed-path and test-path globs, relative to the repository root,
  ``**`` crossing directories (``src/**`` allows everything under ``src/``).
- fstree: trees an agent wrote, handled from the host: removed, or handed to
  another owner, walked iteratively relative to directory descriptors and
  never through a link, so a tree thousands of levels deep (past the
  recursion limit and PATH_MAX) is handled, and locked directories are
  given back to their owner before removal.
- files: files someone else may have put in place, opened without trusting
  them.
- shellwords: a command run with no shell, and the ``$VAR`` typed in it that
  would reach the program as typed.
- boundedjson: the one reader for untrusted JSON, bounded in size and in
  depth, refusing in one line (its docstring says why the depth is 100).
- jsonvalues: a value of untrusted JSON taken where a string, a list or an
  object belongs, or an empty one (a gateway's stream, a tape, a transcript).
- consumer: the workers' Celery consumer, which goes on when the broker is
  lost while it holds messages (where Celery 5.7 stops the worker).

The rule ``files`` keeps for every record, index and upload file: nothing
outside what was named is read. A file is opened without following a link
in its last component, without blocking, and read only if the descriptor is
a regular file. A walk of a followed directory passes over links (listing
them as problems of the pass); a glob leaves out links and matches whose
real path lies outside its fixed directory; a named link or FIFO is refused
in one line.

A module belongs here when both apps or several packages need it and it
holds no rule of the domain; a helper used by one package lives in it.
"""
