"""Template filters for the people's pages: formatting only, no queries and no
markup. Whatever they return is text, escaped by the template like any value.

- review_tags: compact formatting for dense review pages (ages, time left,
  durations, short shas, percents, kappa).
- trend_tags: formatting for the trends page (percents, a reason's name and
  colour).
- budget_tags: the budgets page's figures (counts, minutes, money), one
  format each for its bars and its table.
"""
