"""The trends dashboard: nightly rollups as charts, tables, exports and an API.

It tells a lead "the harness is degrading" from "the agents got worse": the
nightly verdict mix, and the inconclusive rate by reason on a p-chart.

Modules:

- rollups: the nightly counts written once per night (its docstring holds
  the rules every row follows: which night, what counts, reasons, human
  decisions, sources, tiers, models).
- queries: the dashboard's reads, rollup rows only, never the replays.
- series (pure): nightly totals and what the dashboard derives from them;
  statistics (pure): the p-chart and its alarm; charts and tables (pure):
  chart geometry and the tables beside them, as plain data; the drawing is
  ``reviews.render.drawing``'s.
- dashboard: the page's context, built once and cached per rollup version.
- text_similarity: the text tier's mean similarity per night and model.
- exports, forms, views: the CSV and JSON exports and ``GET
  /api/v1/trends`` (session auth, 401 JSON when anonymous), the filters,
  the pages.

The rules:

- One ``Rollup`` row per night, project, model, source and tier (code runs
  and rollouts never share a row; tape and live agentic replays neither),
  and beside them one ``RollupTotal`` row per night, model, source and tier,
  the same night summed over every project. One project's page reads its
  rollups, the all-projects page the totals, and the filters are source
  (``?source=``) and tier (``?tier=agentic|tape``).
- By tier: a tape replay is served the model's recorded answers, so what it
  finds divergent or inconclusive is the environment's drift (or the
  harness's); a live agentic replay adds the model's. The page shows, above
  the charts, the divergent and inconclusive rates of each tier ("tape
  (environment drift)", "agentic (model drift)") from the same one query as
  the nightly sums (it groups by night and tier; a night's tiers are added
  in Python), so a cold page still makes three rollup queries and a cached
  one one. With a tier filter every chart counts that tier only and
  deferrals are not shown. The tier is in the unique keys and in both
  covering indexes (``rollup_project_date_sums``, ``rollup_date_version``),
  so the page still reads one project from the index alone. ``?tier=text``
  is the text tier's similarity, the charts then counting every tier. Rows
  rolled up before the tier existed count as agentic until their nights are
  counted again (``manage.py rollup --since``).
- The night's deferred runs are a project count on the row with no model,
  source code and tier agentic: with a model, source or tier filter the page
  says so rather than showing a number.
- Recomputation deletes and inserts a project's rows for the range in one
  transaction. Closing a night rolls it up, and the night before it, for
  replays that finished after their night closed. A reviewer's decision (or
  its undoing) owes the one night its replay counts in a recount, which a
  worker makes seconds later: on commit the request writes the night's one
  ``RollupRequest`` row, and the first decision of a burst sends
  ``reviews.tasks.rollup_night`` ``REPLAYHUB_ROLLUP_DELAY_SECONDS`` (5)
  later. The task deletes the row (committed) before it reads the replays,
  so it counts every decision made by then, and one made during its recount
  owes another; a beat sweep sends lost or failed requests again. Counting a
  10,000-replay night takes a tenth of a second and more, which a reviewer's
  request no longer pays (``benchmarks/decision.py``). The page says when
  its figures were computed.
- The totals are summed again, in the same transaction, for every night a
  recomputation rewrote, under one PostgreSQL advisory lock held to commit:
  two projects rolled up at once each see only their own rows until they
  commit, and the lock makes the second sum after the first committed.
  Deleting a project sums its nights again without it; rollups are
  read-only in the admin. Summing fifty projects' JSON reason counts for 56
  nights was most of the all-projects page (docs/performance.md); the
  totals are four rows a night.
- The p-chart judges each night against 3-sigma limits from the 28 nights
  before it, with the sigma of that night's own sample size; the banner
  names the reasons whose own rate rose above their limits on the latest
  out-of-control night.
- Past 180 nights (``WEEKLY_AFTER``) the dashboard sums nights into weeks
  counted from the first night shown, charts get a slot per week, the
  p-chart judges weeks against the weeks before them, and the page says so;
  exports keep every night. Two years of one project are 105 bars and rows
  instead of 731.
- Charts are inline SVG, each with its numbers as a table. Built and drawn
  pages are cached under a key that includes a cheap version query over the
  rollups read, so a recompute is never served stale. Every text a chart or
  table places (reason codes and model names come from records) is escaped
  where it is drawn (``reviews.render``, which holds the departure from
  templates and its figures).
- The labels given with the nights' decisions load after the page
  (``/trends/labels/``, htmx on load), following its project and night
  filters. Every exported row names its tier, and the filters theirs.
"""
