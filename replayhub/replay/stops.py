"""Why an agent phase stopped short: :class:`NotRun` (the replay has nothing
to judge), and the reasons read from how the phase ended: a gateway cap, the
tape left with nothing to go on with, a provider that answered no call
(``stop_if_gateway_ended``), or the sandbox's time limit or another of its
caps (``stop_if_sandbox_ended``), each in one sentence naming what fired.

``replay.workspace.run_agent`` asks these once the phase has run and its
spending is on the report.
"""

from __future__ import annotations

from replayhub.gateway import access
from replayhub.gateway.egress import AttemptCounts
from replayhub.gateway.playback import TapePlayer
from replayhub.gateway.server import MeteredCall
from replayhub.gateway.tape import Divergence
from replayhub.models import Project
from replayhub.sandbox import Limits, SandboxOutcome
from replayhub.verdicts import Reason


class NotRun(Exception):
    """The replay stopped before it had anything to judge: the reason code,
    one sentence, and the cap that fired (if one did)."""

    def __init__(self, reason: Reason, detail: str, cap: str = "") -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.cap = cap


def stop_if_gateway_ended(
    who: str,
    project: Project,
    outcome: SandboxOutcome,
    network: access.PhaseNetwork | None,
    *,
    player: TapePlayer | None,
    divergence: Divergence | None,
) -> None:
    """:class:`NotRun` when the model's side ended the phase: a gateway cap,
    the tape left with nothing to go on with, or a provider that answered
    no call."""
    if network is not None and (network.cap_fired or network.cap_passed):
        cap = network.cap_fired or network.cap_passed
        ended = ""
        if outcome.limit_fired == "stopped":
            ended = f"; {who} was ended {project.cap_grace_seconds} s after"
        raise NotRun(
            Reason.CAP_FIRED,
            f"the model gateway's {cap} cap was reached ({network.spent()}){ended}",
            f"model {cap}",
        )
    # An agent that ended early left nothing to go on with live.
    if (
        player is not None
        and divergence is not None
        and (not player.then_live or divergence.why == "fewer")
    ):
        ended = ""
        if outcome.limit_fired == "stopped":
            ended = f"; {who} was ended {project.cap_grace_seconds} s after"
        raise NotRun(
            Reason.TAPE_DIVERGED,
            f"{divergence.detail} (of the {len(player.tape)} calls on the tape; "
            f"the requests' diff is in the evidence){ended}",
        )
    if network is not None and (failed := provider_failures(network.calls)):
        raise NotRun(
            Reason.PROVIDER_ERROR,
            f"{who} made {len(network.calls)} model calls and the provider "
            f"answered none of them ({failed})",
        )


def stop_if_sandbox_ended(
    who: str, outcome: SandboxOutcome, limits: Limits, egress: AttemptCounts
) -> None:
    """:class:`NotRun` when the sandbox ended the phase: its time limit or
    another of its caps."""
    if outcome.timed_out or outcome.limit_fired == "wall_time":
        raise NotRun(
            Reason.TIMEOUT,
            timeout_detail(who, limits.wall_seconds, egress.rows()),
            "wall_time",
        )
    if outcome.limit_fired:
        measured = f" ({outcome.limit_detail})" if outcome.limit_detail else ""
        raise NotRun(
            Reason.CAP_FIRED,
            f"{who} hit the {outcome.limit_fired.replace('_', ' ')} cap{measured}",
            outcome.limit_fired,
        )


def timeout_detail(who: str, seconds: float, egress_rows: list[dict]) -> str:
    """Why an agent phase timed out, as far as its way out tells: an agent
    that kept asking for a host outside the allowlist (a CLI that ignores
    the base URL it was given) was most likely waiting on it. ``egress_rows``
    are ``AttemptCounts.rows()``, most attempts first."""
    said = f"{who} timed out after {seconds:g} s"
    refused: dict[str, int] = {}
    for row in egress_rows:
        if row.get("phase") == "agent" and not row.get("allowed"):
            host = str(row.get("host"))[:120]  # the agent's, cut to a line
            where = (
                host
                if host == AttemptCounts.OTHER_HOSTS
                else f"{host}:{row.get('port')}"
            )
            refused[where] = refused.get(where, 0) + int(row.get("count") or 0)
    if not refused:
        return said
    ordered = sorted(refused.items(), key=lambda kv: (-kv[1], kv[0]))
    (host, count), rest = ordered[0], ordered[1:]
    said += f"; it tried to reach {host} {count} time{'s' if count != 1 else ''}"
    if rest:
        others = sum(n for _, n in rest)
        said += f" and {len(rest)} other host{'s' if len(rest) != 1 else ''}"
        said += f" {others} time{'s' if others != 1 else ''}"
    return said + " (not allowed)"


def provider_failures(calls: list[MeteredCall]) -> str:
    """The failures, counted by status ("HTTP 500 to 27 calls, HTTP 429 to 3"), when
    calls went up to the provider and not one was answered; "" otherwise."""
    forwarded = [c for c in calls if c.status != "refused"]
    if not forwarded or any(str(c.status).startswith("2") for c in forwarded):
        return ""
    counts: dict[str, int] = {}
    for c in forwarded:
        counts[f"HTTP {c.status}"] = counts.get(f"HTTP {c.status}", 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    first, *rest = ordered
    words = [f"{first[0]} to {first[1]} call{'s' if first[1] > 1 else ''}"]
    return ", ".join(words + [f"{status} to {n}" for status, n in rest])
