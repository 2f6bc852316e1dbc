"""Formatting for the trends page: coordinates, percents, reason names."""

from __future__ import annotations

from django import template

from ..trends import series

register = template.Library()


@register.filter
def coord(value: float) -> str:
    """A coordinate with one decimal, never localized (a comma would break SVG)."""
    return f"{value:.1f}"


@register.filter
def pct(value: float | None) -> str:
    return series.pct(value)


@register.filter
def reason_label(code: str) -> str:
    return series.reason_label(code)


@register.filter
def reason_color(code: str) -> str:
    return series.reason_color(code)
