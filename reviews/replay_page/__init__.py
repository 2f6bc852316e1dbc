"""The replay's page: everything a reviewer reads to decide, and the decision.

Modules:

- views: the page, its htmx parts (progress while it runs, the claim and
  its release, a file's diff loaded on demand), the decision and its undo,
  and Replay from tape.
- diffs: unified diffs from git split per file and numbered for display
  (pure; the templates escape every line). The page badges each file's hunk
  class (``replayhub.git.hunks``) and hides the noise on ``?noise=hide``.
- outcomes: the per-test table, the original against the run that judges
  the replay, failures first. Pure.
- overrule: which recorded evidence a corrected verdict would overrule; a
  cryptographically verified check asks for a second, explicit yes. Pure.
- continuations: a rollout replay's seed, both continuations and both
  rewards, and its output as a verifiers record to download.
- trail: the audit trail as sentences a reviewer reads.
- meanwhile: the decision form says which decision its page showed
  standing; one taken from a page older than the replay is refused (409).
- tape_view: a tape read as the conversation it was, tool calls folded.
- together: what the page adds for working together (threads, second
  opinions, gold, labels, blind review, hand-off); ``reviews.together``
  holds the rest.

Deciding from the keyboard: each corrected verdict has its own digit (1
identical, 2 equivalent, 3 divergent, 4 inconclusive), from anywhere on the
page or in the overturn select; letters choose nothing (two verdicts start
with "i"). The choice is shown before Enter records it, and Esc drops it. A
decision that would overrule verified evidence takes a second Enter, or the
409 page's second submit without script; a blind judgement is recorded as
given, since the question would name the evidence. The decision form posts to the
replay's own address; the older ``/decide/`` address answers a GET with the
page. Sent with htmx, a refused decision (400, 409) is the page again,
swapped in place, so no history entry holds a post that Back would have to
send again; one taken sends the browser on (``HX-Redirect``). Without
script the form is a plain post: refused, the page; taken, a redirect.

What the page shows of a replay is the stored evidence (provenance and its
warnings, the checks with their evidence classes, both changes and their
diff-of-diffs, test outcomes, model calls, egress attempts, the
environment, the runner and its limit backend), all of it untrusted and
escaped by the templates. A reviewer who has not judged a replay under
blind review does not see what would tell them the automated verdict
(``reviews.together``).
"""
