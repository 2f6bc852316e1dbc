"""Formatting for the budgets page: one way to write each kind of figure, so
tonight's bars and the past nights' table say the same number the same way."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def count(value: float | None) -> str:
    """Replays or tokens: whole, with thousands separators (2,000,000)."""
    return f"{round(value or 0):,}"


@register.filter
def minutes(value: float | None) -> str:
    """Sandbox minutes: a tenth under ten minutes (0.2), whole above (240,
    1,500), so a short night still shows what it used."""
    value = value or 0
    if 0 < value < 10:
        return f"{value:.1f}"
    return f"{round(value):,}"


@register.filter
def money(value: float | None) -> str:
    """US dollars to the cent with separators (1,250.00); a spend too small
    for a cent is "<0.01", never a misleading 0.00."""
    value = float(value or 0)
    if 0 < value < 0.005:
        return "<0.01"
    return f"{value:,.2f}"


@register.filter
def figure(value: float | None, unit: str) -> str:
    """A budget figure in its unit's own format ("min", "USD", or a count)."""
    if unit == "min":
        return minutes(value)
    if unit == "USD":
        return money(value)
    return count(value)
