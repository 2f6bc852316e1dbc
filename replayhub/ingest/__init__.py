"""Record formats into Runs: parse and check (``native``), store (``importer``),
preflight (``preflight``), and the ingest tokens of the HTTP API (``tokens``)."""
