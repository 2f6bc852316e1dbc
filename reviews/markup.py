"""Partials drawn by Jinja2: the few templates that repeat an element thousands
of times a page (the trends charts and tables, the review queue's rows).

The Django template engine spends several microseconds on every variable it
prints; a 56-night trends page has some six thousand, a queue page a thousand.
Jinja2 compiles a template to Python and prints the same variables about five
times faster. It is the second engine in ``TEMPLATES`` (``replayhub/settings.py``,
templates under ``templates/jinja2/``), always autoescaped as Django's is, so
every text from records and agents is escaped; a name a template misspells is an
error rather than an empty string. Pages themselves stay Django templates and
include what these draw.
"""

from __future__ import annotations

from typing import Any

from django.template import engines
from django.utils.safestring import SafeString, mark_safe
from jinja2 import Environment, StrictUndefined


def coord(value: float) -> str:
    """An SVG coordinate with one decimal, never localized (a comma would break it)."""
    return f"{value:.1f}"


def environment(**options: Any) -> Environment:
    """The Jinja2 engine's environment (``TEMPLATES`` names it)."""
    options = {**options, "undefined": StrictUndefined}
    options.pop("autoescape", None)
    env = Environment(autoescape=True, **options)
    env.filters["coord"] = coord
    return env


def render(name: str, context: dict[str, Any]) -> SafeString:
    """The Jinja2 template ``name`` drawn with ``context``, ready to include."""
    html = engines["jinja2"].get_template(name).render(context)
    # Escaped by the template: autoescaping is always on (above).
    return mark_safe(html)  # noqa: S308
