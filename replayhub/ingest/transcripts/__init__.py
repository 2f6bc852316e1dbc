"""Transcripts agents already write, read as native run records.

Each format module is pure: it reads numbered lines (or one document) and
yields :class:`replayhub.ingest.transcripts.shapes.RecordDraft` records or
:class:`replayhub.ingest.transcripts.shapes.LineError` problems. What needs the
project repository (a base found from a branch and a time, a patch applied at
a base) is :mod:`replayhub.ingest.transcripts.repository`; the database side
is :mod:`replayhub.ingest.transcripts.loader`. The base of a session that
names no branch is worked out by
:mod:`replayhub.ingest.transcripts.base_at_start`. A large import reads its
files in a process of its own (:mod:`replayhub.ingest.transcripts.reading`),
leaving the importing process to the native import. A mini-swe-agent batch
folder's predictions are left to the trajectories of the same runs
(:mod:`replayhub.ingest.transcripts.batches`).
"""
