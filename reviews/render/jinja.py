"""Partials drawn by Jinja2: the review queue's rows, repeated on every page.

The Django template engine spends several microseconds on every variable it
prints; a queue page has a thousand (the trends charts, with ten thousand, are
drawn in plain Python: ``reviews/render/drawing.py``).
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


def environment(**options: Any) -> Environment:
    """The Jinja2 engine's environment (``TEMPLATES`` names it)."""
    options = {**options, "undefined": StrictUndefined}
    options.pop("autoescape", None)
    env = Environment(autoescape=True, **options)
    return env


def render(name: str, context: dict[str, Any]) -> SafeString:
    """The Jinja2 template ``name`` drawn with ``context``, ready to include."""
    html = engines["jinja2"].get_template(name).render(context)
    # Escaped by the template: autoescaping is always on (above).
    return mark_safe(html)  # noqa: S308
