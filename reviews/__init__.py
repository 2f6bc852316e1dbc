"""The people's side: the review queue, the replay's page, working together,
trends, budgets and projects in the browser.

Built on the domain (``replayhub``), never the other way round: the domain
announces what the apps above it need (``replayhub.signals``), and the
endpoints the domain answers first get the people's part added here
(``api``). docs/architecture.md is the codemap; each subpackage's docstring
holds its depth.

The modules at the top:

- models: ``Claim`` (who holds which replay, a lease that expires),
  ``Review`` (a decision: confirm, overturn with the corrected verdict, or
  rerun, with a note; ``Review.Decision``), ``AuditEvent`` (actor, before,
  after, time: every decision and every budget or project change), and for
  working together ``ReviewPolicy``, ``Label``/``ReviewLabel``,
  ``Comment``, ``SecondOpinion``, ``GoldItem``/``GoldServing``, ``Notice``;
  ``Ability`` carries the app-wide permissions (``replayhub.roles``). The
  database refuses an overturn that names the same verdict.
- services: claims, decisions, undo and the budget's edits, each
  keyword-only, in one transaction, leaving an ``AuditEvent`` for each
  change. project_services: an admin's project workflows (the project form,
  Replay now).
- queue_reads: the review queue as reads (filters, keyset pages, band
  counts), in the order of the partial index ``replay_review_queue``.
- tasks: its Celery tasks (a decision's night recount, ``rollup_night``).
- api, forms, urls, admin, apps, context_processors: the usual layers.
- views (a page a module), replay_page, together, trends, render,
  templatetags: the packages.

The queue and a decision:

- Bands, lower first, newest first inside a band: 1 equivalent (the agent
  solved it another way: where a human learns the most), 2 divergent, 3
  inconclusive with its retries exhausted, 4 needs a second review (see
  ``together``). Identical replays need no review; inconclusive ones still
  retryable wait for their retry.
- A reviewer claims an item: a lease (``REPLAYHUB_REVIEW_LEASE_SECONDS``)
  taken with ``select_for_update(skip_locked=True)``, one candidate at a
  time, so two reviewers never get the same item.
- A decision is a POST to the replay's own address, so a refused one is
  shown where the reviewer was. An overturn that contradicts
  cryptographically verified evidence (identical against a failed tree
  identity check, anything else against a passed one) is refused by
  ``review_decide`` unless the reviewer says yes a second time
  (``replay_page.overrule``).
- Undo: a reviewer can take back their own latest confirm or overturn for
  ``REPLAYHUB_REVIEW_UNDO_SECONDS`` (300). The review stays, marked undone;
  the replay returns to its band, claimed by them; a ``review.undo`` event
  records it. A rerun is not taken back (its replay is already queued). A
  decision taken back no longer counts anywhere.
- A decision owes its night a recount and nothing more in the request: on
  commit it writes the night's one ``RollupRequest`` and a worker recounts
  seconds later (``trends``).
- Replay now (``project_services.replay_now``): an admin starts a replay of
  one run from its project's page. During the project's night its estimate
  is reserved on the night like the scheduler's (one conditional UPDATE) or
  the start is refused; outside the night one replay's estimate must fit a
  whole night's limits, and its cost is settled on the night running when
  it finishes, as a rerun's is.

No dead ends: 400, 403, 404 and 500 are pages with the navigation and a way
back (the referrer when it is this site); the navigation lists only the
pages the user's permissions open; htmx forms swap a 400, 409 or 422 answer
in place (``static/replayhub/forms.js``), and any other failed htmx request
says so at the top of the page. 4xx answers are logged at INFO without a
traceback.

Escaping: templates render, and everything from agents and records is
escaped by them; the one place that escapes by hand is ``render``. The
Content-Security-Policy (``replayhub.settings``) is the second line: scripts
and styles are files under ``/static/`` only, no inline script, event
handler or style attribute, so a slip in escaping still runs nothing.

Departure from the import rule the domain keeps: the people's side keeps
only its module-level half. Its feature packages show each other's parts
(the queue shows a row's threads, the trends export reads labels, the
replay page holds the working-together part), so between packages the
arrows run both ways; a module never reaches back to one that reaches it
(``tests/core/test_architecture.py``).
"""
