"""The Django templates themselves: a comment the engine would print."""

from __future__ import annotations

import re

from tests.conftest import ROOT

# Django's {# #} comment ends on its own line; one left open there is page text.
OPEN_COMMENT = re.compile(r"\{#(?![^\n]*#\})")


def test_no_django_template_opens_a_one_line_comment_it_does_not_close():
    # Jinja2's templates (templates/jinja2/) take comments over many lines.
    django_templates = [
        path
        for path in (ROOT / "templates").rglob("*.html")
        if "jinja2" not in path.relative_to(ROOT / "templates").parts
    ]
    assert len(django_templates) > 40
    open_comments = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, found.start()) + 1}"
        for path in django_templates
        for text in [path.read_text()]
        for found in OPEN_COMMENT.finditer(text)
    ]
    assert open_comments == [], "use {% comment %} over several lines"
