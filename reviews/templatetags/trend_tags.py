"""Formatting for the trends page: percents, reason names."""

from __future__ import annotations

from django import template

from reviews.trends import series

register = template.Library()


@register.filter
def pct(value: float | None) -> str:
    return series.pct(value)


@register.filter
def reason_label(code: str) -> str:
    return series.reason_label(code)


@register.filter
def reason_color(code: str) -> str:
    return series.reason_color(code)
