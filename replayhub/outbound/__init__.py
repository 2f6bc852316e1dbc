"""What ReplayHub tells the places teams work: commit statuses on a project's
forge, and webhooks (CloudEvents or Slack-compatible) for its events.

- statuses: a verdict as a GitHub or GitLab commit status (state, words, URL).
- events: the webhook bodies, the event names and the HMAC signature.
- addresses: where a request may go (public addresses, or the operator's
  allowed ranges), resolved once and checked.
- post: one POST to the checked address, its answer read bounded.
- services: the forge and webhook settings' checks, queueing a delivery
  once, one attempt at sending it (the ``deliver`` task's body).
- receivers: ``replay_finished``, ``review_decided`` and ``night_closed`` as
  deliveries. ``trends.signal`` is queued by the trends
  (``reviews.trends.alarms``), which own the p-chart.

Rules:

- **Once per message.** A delivery's key names its target, its commit or
  event, and the state it says; the key is unique in the database, so a
  receiver run twice, or a signal sent twice, queues one row and one send.
- **Never in the way.** Receivers run after commit and only queue rows; a
  worker sends. A forge answering 5xx, 408 or 429, or not answering, is
  tried again with a doubling wait (``REPLAYHUB_OUTBOUND_BACKOFF_SECONDS``,
  up to ``REPLAYHUB_OUTBOUND_ATTEMPTS`` attempts); another 4xx, a refused
  address or a missing token ends the delivery ``failed`` at once. What no
  worker has held for ``services.SWEEP_AFTER`` is sent again by the beat
  (``delivery_sweep``). A host that does not resolve may be named in a
  setting; each request checks its address again.
- **No SSRF.** A webhook's URL and a forge's API URL must resolve to public
  addresses, when saved and again when sent; the socket connects to the
  address checked, so no second lookup can answer otherwise. The operator
  may allow private ranges (``REPLAYHUB_OUTBOUND_ALLOW_PRIVATE``).
- **Secrets stay where they are.** Tokens and signing keys are read from the
  worker's environment by the name the project gives, a name from the
  repository credentials' allow-list (``REPLAYHUB_REPO_CREDENTIAL_ENVS``);
  a delivery row keeps the body without them, and a webhook is shown by its
  host only (a Slack URL's path is its secret).
- **Answers are untrusted.** At most 4 KB of an answer is read and its first
  line kept, 200 characters, escaped where the project page shows it.
"""
