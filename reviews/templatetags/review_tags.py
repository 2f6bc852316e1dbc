"""Compact formatting for dense review pages."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html, format_html_join

register = template.Library()


def _compact(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


@register.filter
def age(value: datetime | None, now: datetime | None = None) -> str:
    """How long ago, in one unit: 45s, 12m, 3h, 9d."""
    if value is None:
        return ""
    return _compact(((now or timezone.now()) - value).total_seconds())


@register.filter
def until(value: datetime | None, now: datetime | None = None) -> str:
    """How long from now until ``value``, in one unit."""
    if value is None:
        return ""
    return _compact((value - (now or timezone.now())).total_seconds())


@register.filter
def seconds(value: float | None) -> str:
    """A duration: 0.4 s, 12.3 s, 4m 05s."""
    if value is None:
        return ""
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(int(value), 60)
    return f"{minutes}m {rest:02d}s"


@register.filter
def short_sha(value: str | None) -> str:
    return (value or "")[:12]


@register.filter
def shell(value: Iterable[object] | str | None) -> str:
    """A command's words as a shell would take them back, quotes and all, as
    the project form shows them: ``["sh", "-c", "exec ./a.sh"]`` → ``sh -c
    'exec ./a.sh'``. A string is already a command line."""
    if isinstance(value, str):
        return value
    return shlex.join(str(word) for word in value or ())


@register.filter
def words(value: str | None) -> str:
    """A machine code as words: ``independently_executed`` → independently executed."""
    return (value or "").replace("_", " ").replace("-", " ")


@register.filter
def percent(value) -> str:
    """A share (a Fraction or float) as a whole percentage; a dash when undefined."""
    if value is None:
        return "—"
    return f"{float(value) * 100:.0f}%"


@register.filter
def kappa(value) -> str:
    """Cohen's kappa to two decimals; "n/a" when undefined (chance explains all)."""
    if value is None:
        return "n/a"
    return f"{float(value):.2f}"


@register.filter
def path_breaks(value: object) -> str:
    """A path, escaped, that may wrap after each ``/`` and nowhere else (not
    at a hyphen): ``/srv/calc-env-8652`` → ``/<wbr>srv/<wbr>calc-env-8652``,
    each part in a ``nowrap`` span."""
    *heads, last = str(value or "").split("/")
    broken = format_html_join(
        "", '<span class="nowrap">{}/</span><wbr>', ((head,) for head in heads)
    )
    return format_html('{}<span class="nowrap">{}</span>', broken, last)
