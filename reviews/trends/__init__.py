"""The trends dashboard: nightly rollups as charts, tables, exports and an API.

The dashboard reads ``Rollup`` rows only, never the replays (``queries``).
Everything after the queries is pure: the nightly totals (``series``) become
chart geometry (``charts``) and tables (``tables``) as plain data, and the
p-chart and its alarm come from ``reviews.trends.statistics``. The templates under
``templates/reviews/trends/`` draw the charts and tables, so every text they
place (reason codes and model names are data from records) is escaped by the
template engine. ``dashboard`` draws them once per build and caches the result
while the rollups it was built from are unchanged; ``exports`` serves the rows
themselves as CSV and JSON; ``views`` holds the page, the exports and the API.
"""
