"""ReplayHub: does an agent-made change reproduce?

This package is the domain (app label ``replayhub``): recorded runs, their
replays in a sandbox, the verdicts, the nights that budget them. The
people's side (the review queue, the replay's page, trends) is ``reviews``,
which the domain never imports outside its wiring; where the domain has news
for it, it sends a signal. docs/architecture.md is the codemap; each
subpackage's docstring holds its depth (``help(replayhub.nights)``).

The modules at the top:

- settings, urls, wsgi, celery, apps, checks, logs: the wiring. ``celery``
  names every task (``Task``) and sends work by name after commit
  (``enqueue``), so nothing imports ``tasks``. ``checks`` warns at ``check
  --deploy``: a sandbox with rlimits only (W001), a rollout project whose
  rewards no separate verifier scores (W003). ``logs`` writes one JSON
  object a line, the replay id on each line of a replay, and logs 4xx
  answers at INFO without a traceback (``ClientErrorFilter``). ``wsgi``
  imports every view and then freezes the garbage collector's view of the
  start-up objects (docs/performance.md measured why).
- services: the workflows of a replay and a night, keyword-only
  ``<entity>_<action>`` functions (claim, execute, finish, reap, requeue,
  cancel after the window, ``night_run``, ``nights_tick``); ``tasks``: thin
  adapters that take ids and call them. One replay's path through them is
  in ``replayhub.replay``.
- signals: what the domain announces (a night closed; the rollups listen).
- roles: the groups and what each may do (below).
- api: the JSON API. The token-authenticated push is CSRF-exempt and
  ``login_not_required`` (no cookie is involved; the body is spooled while
  its size is counted); the session reads of runs and replays answer 401
  JSON rather than redirect. ``reviews.api`` adds the people's part.
- health: ``/healthz``, and what the worker check reports (below).
- project_setup: every check of a project's settings, in one place, for
  ``project_add``, ``project_edit`` and the project form; ``SETTINGS``
  (``models.project_settings``) is the one table of a replay's settings.
- admin: the Django admin of the domain's tables (rollups read-only).

Roles (``roles``). The groups ``reviewer``, ``lead`` and ``admin``; a data
migration creates them with a frozen copy of the lists, since a migration
must not change meaning when the live module does. Views check permissions,
never group names: ``reviews.decide_replay`` (reviewers, admins),
``reviews.view_trends`` and ``reviews.view_money`` (leads, admins),
``replayhub.change_*`` (admins); for working together ``reviews.add_comment``
(reviewers, leads), ``reviews.bulk_confirm`` (reviewers),
``reviews.view_agreement`` (leads: the agreement page and everyone's
decisions in the Done tab), ``reviews.manage_claims`` and
``reviews.manage_gold`` (admins). The app-wide permissions belong to no
model's rows: they are declared in ``roles.ABILITIES`` and carried by
``reviews.models.Ability``, a model without a table.

The worker check. ``/status/`` (admins) sends a task through the broker and
polls with htmx until a worker answers (the poll returns 286 to stop): it
proves the web, broker, worker, database path of a running installation.
The worker answers with how its sandbox caps memory and processes
(``health.describe_sandbox``: the cgroup backend, or rlimits and the
watchdog) and which runners pass their self-check there; each replay's
evidence names the backend its agent ran under.
"""

from __future__ import annotations

from replayhub.celery import app as celery_app

__all__ = ("celery_app",)
