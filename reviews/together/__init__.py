"""Working together: comments, second opinions, gold items, labels, hand-off,
blind review, the Done tab and search, agreement, and the inbox.

Modules:

- comments: line comments; notices: the inbox (mentions, hand-offs), with
  e-mail after commit when ``REPLAYHUB_NOTICE_EMAIL=1``.
- opinions: second opinions; gold: gold items; labels: the structured part
  of a decision; handoff: releasing or reassigning a claim, and bulk
  confirm.
- agreement (pure): Cohen's kappa and agreement with gold; quality: the
  agreement page's reads; past: the Done tab and search.
- sentences: the audit trail's words for these actions; forms, views and
  urls: the pages.

The rules:

- Line comments anchor to a target (the diff-of-diffs, the original change,
  the replay's change, or a test output's tail), a path (the file, or "<tree>
  run <n>"), a side and a line range. The server cuts the quoted excerpt
  from the stored text and refuses lines that do not exist, so a comment
  never quotes what the browser claims. Bodies are plain text, rendered
  escaped with their line breaks (no Markdown: nothing to sanitize).
  ``@name`` notifies that user. Comments are audit events and part of the
  replay's JSON (``reviews.api``: comments, open threads, reviews with their
  labels).
- A project's ``ReviewPolicy`` (its Review settings page) sets blind
  review, whether overturns and decisions ending on chosen verdicts need a
  second reviewer, and the gold rate. Labels are defined per project; the
  decision form grows a field per label, and a required one blocks a confirm
  or an overturn (not a rerun). Bulk confirm skips the replays of projects
  with required labels.
- Second opinions: the replay leaves the queue on the first decision and
  comes back in band 4; ``claim_next`` never hands it to the excluded
  reviewer (the first reviewer, or whoever asked before any decision), and
  ``review_decide`` refuses them. The second decision records agreement or
  disagreement, shown on the page and counted on the agreement page. Taking
  a decision back removes the request it opened or reopens the one it
  answered.
- Gold items: an admin marks a decided replay gold (its settled verdict). A
  ``GoldServing`` hands it to a reviewer at most once, from ``claim_next``,
  at the project's rate, never to someone who decided it; until judged the
  page shows it as an ordinary queued item held by the viewer. The
  judgement is a ``Review`` with purpose gold: it changes nothing on the
  replay, counts in no rollup, undo or header, and is measured against the
  settled verdict.
- Agreement: exact Cohen's kappa (a ``Fraction``; undefined when chance
  agreement is 1) over the replays two reviewers both judged (their first
  confirm or overturn each, gold checks included), and each reviewer's
  agreement with gold. The lead's page (``/agreement/``,
  ``reviews.view_agreement``) filters by project and period and lists label
  counts (also as CSV, and in the trends JSON export).
- Blind review hides the automated verdict, its reason, the checks,
  earlier decisions and others' comments (threads, replies, the comment a
  mention quotes in the inbox; the page counts them) from a reviewer who has
  not judged the replay, and their
  decision names a verdict (the same as the automated one is a confirm,
  another an overturn). It holds on every page and answer that could tell
  (the queue, the run, project and search pages, the replay's other
  attempts, the JSON API; ``replay_page.together`` decides who is blind):
  neither a band nor a row's place says a verdict. Leads, who do not
  decide, read verdicts as ever.
- Search uses PostgreSQL full-text search (the ``simple`` configuration:
  ids and names are not English words) over run titles, external ids and
  comment bodies, plus an exact replay id, which comes first; on SQLite a
  case-insensitive substring filter.

Departure: "needs second review" is band 4, after the design's three bands,
not before them. A fresh equivalent-but-different replay is still where a
reviewer learns the most, and the second look closes a loop that is not
urgent.
"""
