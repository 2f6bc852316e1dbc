"""The demo: what ``manage.py demo`` builds so that a newcomer sees every part of
ReplayHub work on one machine, and what the tests reuse.

- calculator: the demo project, a small calculator repository and a
  deterministic agent whose prompt's first word picks a row of the verdict
  table, so each recorded run lands on a chosen verdict when replayed.
- packaged: the second project, whose tests need a package that is not on
  the host, installed by its setup phase (``replayhub.environments``).
- pkgindex: a tiny package index on the worker's loopback, reached through
  the egress proxy.
- model_api: a local stand-in for the paid model APIs (both wire formats),
  served by ``manage.py demo_model``: no model, it repeats the prompt, with
  knobs the tests use to play a careless or failing upstream.

Nothing here is imported by the domain's code paths; the package is tested
whole (``tests/browser/test_demo.py``) and through the tests that use it.
"""
