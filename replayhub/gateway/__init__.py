"""A replay's ways out of the sandbox: the model gateway (``server``, speaking
the provider APIs of ``wire``) and the egress proxy (``egress``).

A sandbox has no network. For a project that names providers or egress
hosts, ``access`` gives one phase (the agent, the tests, or the
environment's setup) a way out: the servers below on unix sockets in a
ReplayHub-owned directory, bound read-only into the sandbox and relayed to
its loopback (``sandbox.network``; the relay listens on ``127.0.0.1:8790``
for the gateway and ``:8791`` for the proxy and execs the command, which
keeps its pid and exit status).

Modules:

- access: what one phase gets (the servers, the bind, the environment, the
  argv wrapped in the relay); keys are read from the worker's environment
  here and handed to the gateway only.
- server: the per-replay model gateway (what is admitted); forward: one
  admitted call sent upstream, its answer streamed back scrubbed and
  metered; wire: the two API wire formats as pure functions (endpoints, key
  headers, usage, prices, a call's worst case); providers: the upstreams and
  their kept-alive connections; calls: what each call records and the caps
  the totals are held to.
- redact: the provider's key kept out of everything the agent reads.
- egress and allow: the egress proxy and its allowlist patterns.
- tape (pure) and playback: a replay's exchanges recorded in order, and a
  tape replay's calls answered from a tape; streams and responses (pure): a
  stream's events as the message they add up to and back, for the chat wires
  and for the Responses API; tape_rules (pure): the declared normalisation
  rules a tape is matched under.

The gateway (agent phase only): one HTTP server per replay. It routes
``/<provider>/...`` to that provider's upstream, accepts only the API's own
endpoints, checks the replay's placeholder key and sends the real key (read
from the worker's environment variable the ``Provider`` row names, never
stored) the API's way, streams server-sent events through as they arrive,
and meters usage from the JSON body or the stream's events. Each call is a
``ModelCall``: models asked and answered, tokens, cost from the provider's
price table, latency, status, what was held back for it. The measured usage
is the replay's usage and what the night's budget settles; the agent's own
usage file is kept beside it as executor-supplied evidence.

- Caps are ceilings. Before a billed call goes up, the gateway holds back
  its worst case: its input at one token per three bytes of body (JSON takes
  more bytes a token than text, so this stays above a tokenizer's count),
  its ``max_tokens`` (or the API's later names for it; 4,096 when it names
  none), at the requested model's price. The call is refused (a 429 in the
  API's own shape, ``x-should-retry: false``) when what is spent, plus what
  running calls hold, plus this worst case would pass a cap; under a money
  cap a model with no price is refused outright. The hold is given back when
  the call's usage is known, so 30 calls at once cannot spend past a
  5,000-token cap. A call whose usage never arrives whole (a stream broken
  off) is charged its worst case and flagged ``usage_estimated``. A replay
  whose measured totals passed a cap for any reason still ends
  ``inconclusive / cap_fired``, the reason giving calls, tokens and cost
  against the caps. Once a cap has refused a call the agent is ended
  ``Project.cap_grace_seconds`` (10) later: agents retry with backoff,
  burning sandbox time.
- Metered to the end. An agent that hangs up does not end the call: the
  upstream bills what it generates, so the gateway reads the answer to its
  end (64 MiB and 120 s at most) and meters it after the agent has gone.
- Provider failures are named. When calls went up and not one was answered
  (HTTP 500, 429, the gateway's 502 or 504), the replay ends ``inconclusive
  / provider_error`` naming the statuses and counts, whatever the agent did
  after; the model check counts the calls attempted. A provider whose key
  variable is not set on the worker is ReplayHub's fault: ``inconclusive /
  harness_error``.
- The key stays out of everything the gateway answers, records and logs, in
  every form an echo takes (``redact``). A match becomes ``[redacted]``, so
  a body always goes to the agent chunked. The upstream is asked for
  identity encoding; an answer compressed all the same is decoded before it
  is scrubbed and metered, and one in an encoding the gateway cannot read is
  answered 502.
- The agent's environment: ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` (the
  run's recorded provider when the project names it, else the first of each
  kind), ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` set to the placeholder,
  ``REPLAYHUB_MODEL_BASE_URL``, ``REPLAYHUB_MODEL`` (the recorded model), and
  ``HTTP(S)_PROXY`` with ``NO_PROXY=127.0.0.1,localhost``.
- The verdict's model-called check compares the models that answered with
  the record's: another model is the first warning on the page, and
  ``inconclusive / model_mismatch`` when the project requires the recorded
  model.

The egress proxy: HTTP and ``CONNECT`` on a unix socket, no TLS
interception, allowing the phase's ``host:port`` patterns. Every attempt,
allowed or refused, is counted by phase, host, port and outcome; the first
``REPLAYHUB_EVIDENCE_KEPT`` (200) are kept whole as ``EgressAttempt`` rows
(refused model calls likewise, by provider and status), so an agent asking
for connections in a loop fills neither the worker's memory nor its replay's
page, which shows the counts and pages the list. An agent with model access
always has the proxy (with an empty allowlist it refuses and records
everything); the tests have it when the project gives them an allowlist.

Tapes. The gateway records every answered exchange of a replay in order
(``Tape``, one per replay: compressed JSON, a digest per exchange, capped per
exchange and per tape by ``REPLAYHUB_TAPE_EXCHANGE_BYTES`` (4 MiB) and
``REPLAYHUB_TAPE_BYTES`` (32 MiB): past the cap an answer is left out first,
then the request, and the tape is marked truncated). A request is kept
normalised (``tape``'s docstring says how), an answer as one message. A run
record's tape (what ``replayhub-record`` writes) is normalised the same way.

Tape replays (tier ``tape``; ``reproduce --tape``, the page's Replay from
tape): the gateway answers call k from exchange k of the run's tape (the
record's, else the latest replay's, ``replay.tapes``; when the record's
differs at call 1 and a live replay's tape of the run matches, that one,
and the evidence says so) when the agent's normalised request equals it
after the declared rules (``tape_rules``: the wire's ids and metadata, the
agent profile's date lines and the like, the original's paths read as the
replay's; both requests, every rule that changed something named in the
evidence and on the page), written back in the wire format asked for,
JSON or SSE (chat chunks, Anthropic events, or the Responses API's
``response.*`` events), with the recorded usage. Nothing goes up: a tape replay that
never goes live holds no key and opens no connection. Served calls meter
zero tokens and zero cost; every other cap holds (the requests cap counts
them). Calls the provider did not answer are not played. Where the agent
leaves the tape (a request that differs, more calls than the tape holds, or
fewer) the call is refused (409, ``x-should-retry: false``) and the replay
ends ``inconclusive / tape_diverged``; the evidence names the call, why, and
a unified diff of the recorded and actual normalised requests. With
``Project.tape_then_live`` the calls from there on go to the model and the
replay finishes live, its reason saying where it left the tape. What a tape
verdict says is ``verdicts.tape``'s; the night's tape tier is
``replayhub.nights``'.

Measured (docs/performance.md holds the current table):

- ``benchmarks/gateway.py``: about 0.3 ms added per call at the median and
  0.35-0.4 ms to the first streamed chunk, against a direct call to the same
  local upstream (goal: at most 2 ms).
- ``benchmarks/tape.py``: a ten-call run at 1 s a call took 10.07 s live and
  3.9 ms from its tape (2,554x; goal at least 5x); one served call 0.233 ms
  at the median against 0.202 ms for the same call made directly to the
  local upstream (adds 0.03 ms; goal at most 2 ms).
- The demo's provider is a stand-in (``demo.model_api``, served by
  ``manage.py demo_model``): no model, it repeats the prompt.
"""

from __future__ import annotations

from replayhub.gateway.calls import Caps, MeteredCall, Totals
from replayhub.gateway.providers import Upstream
from replayhub.gateway.server import ModelGateway

__all__ = ["Caps", "MeteredCall", "ModelGateway", "Totals", "Upstream"]
