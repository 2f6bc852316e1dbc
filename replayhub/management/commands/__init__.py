"""``manage.py`` commands, one module each, thin adapters around the services.

- Setting up: ``bootstrap_admin`` (the first admin login), ``project_add``
  and ``project_edit`` (a project's settings, with the same checks as the
  form), ``provider_add`` (a model provider the gateway forwards to; the key
  stays in the worker's environment), ``ingest_token`` (a project's push
  token, printed once).
- Runs in: ``import_runs`` (native records, verifiers rollouts or agents'
  transcripts, then preflight).
- Replaying: ``reproduce`` (one run, queued or ``--sync``; ``--tape``;
  ``--json``), ``nightly`` (a night now), ``replay_text`` and
  ``replay_suite`` (the text tier).
- Environments on this worker: ``env_build``, ``env_list``, ``env_prune``,
  ``image_import``.
- Trends: ``rollup`` (recompute the nightly rollups from a date).
- The demo: ``demo`` (projects, runs and replays to look at) and
  ``demo_model`` (the stand-in model API and the package index).
"""
