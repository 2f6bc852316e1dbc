"""The only HTML escaped by hand, each module on a measured hot path.

The renderer rule: templates render, and everything from agents and records
is escaped by the template engine. Where a measured hot path draws markup
another way, it lives here and names its benchmark; nothing outside this
package calls ``mark_safe`` (``tests/core/test_architecture.py`` holds it).

- jinja: partials drawn by Jinja2, the second engine in ``TEMPLATES``
  (templates under ``templates/jinja2/``, autoescape on, an undefined name
  an error): the review queue's rows, included by the Django page
  (``benchmarks/review_queue.py``).
- drawing: the trends charts and tables as markup in plain Python, one
  f-string per element, every text, class and colour through
  ``html.escape`` (quotes included), coordinates formatted numbers, never
  localized (``benchmarks/trends.py``).

Everything else stays Django templates, and the pages themselves are Django
templates that include what these draw. The Content-Security-Policy is the
second line behind the escaping (``reviews``).

Departure: the charts are not templates. A two-year trends page has some ten
thousand SVG attributes and table cells, and even Jinja2 spent about a
microsecond on each through its autoescaping, a third of the uncached page
(docs/performance.md, "The trends and queue pages: where the time went":
drawing two years went from 8.1 to 3.1 ms).
"""
