"""What one run of a night admitted, as figures and as the lines a person
reads: ``manage.py nightly`` prints them, the budgets page says them after
its "Start tonight now"."""

from __future__ import annotations

from replayhub.models import NightShare
from replayhub.nights import tiers
from replayhub.nights.shares import NightReport

# The tiers a night admits before the agentic one and after it, in order.
_AT = tiers.SHARE_TIERS.index(tiers.AGENTIC)
BEFORE_AGENTIC = tiers.SHARE_TIERS[:_AT]
AFTER_AGENTIC = tiers.SHARE_TIERS[_AT + 1 :]


def night_figures(slug: str, report: NightReport) -> dict:
    """The agentic tier's figures unprefixed, each other tier's that ran
    prefixed with its name (``tape_admitted``)."""
    result: dict = {
        "project": slug,
        "admitted": len(report.admitted),
        "deferred": report.deferred,
        "already_admitted": report.already,
        "skipped": report.skipped_reason,
    }
    if report.night is not None:
        share = NightShare.objects.filter(
            night=report.night, tier=tiers.AGENTIC
        ).first()
        result.update(
            night=str(report.night.date),
            reserved_replays=share.reserved_replays if share else 0,
            limit_replays=share.limit_replays if share else 0,
        )
    for tier in BEFORE_AGENTIC + AFTER_AGENTIC:
        other = report.of(tier)
        if other is not None and not other.skipped_reason:
            result[f"{tier}_admitted"] = len(other.admitted)
            result[f"{tier}_deferred"] = other.deferred
    return result


def _tiers(r: dict, shown: tuple[str, ...]) -> list[str]:
    return [
        f"{r['project']} {tier} tier: admitted "
        f"{r[f'{tier}_admitted']}, deferred {r[f'{tier}_deferred']}"
        for tier in shown
        if f"{tier}_admitted" in r
    ]


def night_lines(r: dict) -> list[str]:
    """``night_figures`` as lines, the tiers in admission order; pure."""
    lines = _tiers(r, BEFORE_AGENTIC)
    if r["skipped"]:
        lines.append(f"{r['project']}: skipped ({r['skipped']})")
    else:
        lines.append(
            f"{r['project']} night of {r['night']}: admitted {r['admitted']}, "
            f"deferred {r['deferred']} (replays reserved "
            f"{r['reserved_replays']}/{r['limit_replays']})"
        )
        if r["already_admitted"]:
            lines.append(
                f"{r['project']}: already admitted tonight: {r['already_admitted']}"
            )
    return lines + _tiers(r, AFTER_AGENTIC)
