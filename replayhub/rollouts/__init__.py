"""verifiers rollout records: reading them, their branches, the seeds a replay
starts from, index-selected loading and following a growing output directory.

Pure where it can be: :mod:`records`, :mod:`graph`, :mod:`seeds` and
:mod:`index` know nothing of the database; :mod:`ingest` and :mod:`follow`
store what they find.
"""
