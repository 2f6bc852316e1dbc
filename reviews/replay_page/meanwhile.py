"""Two pages deciding one replay (two reviewers, or two tabs of one): the
decision form carries the latest standing decision its page showed (``FIELD``,
hidden), and ``services.review_decide`` records a decision only while that
one still stands. Otherwise nothing is saved and the page comes back with
409, saying who decided what meanwhile.

It is the idea of ``reviews.views.stale`` (a form carries what it was
rendered from) with what a page showed being one row's id, checked under the
replay's row lock inside the decision itself, not a fingerprint of a form's
values compared before a save.

A blind page shows no decision and its field tells of none (``BLIND``): a
judgement from it is taken as given while the reviewer is still blind (the
point of blind review is the independent call); once they have judged in
another page, it is checked against a page that showed nothing. A gold item
served shows no history either (``NONE``). A post without the field (a
script) is not checked."""

from __future__ import annotations

from typing import Literal

from reviews.services import UNCHECKED

FIELD = "standing"
NONE = "none"
BLIND = "blind"
# A decision's id as posted: digits, far below this length.
_DIGITS = 18

UNREADABLE_LINE = (
    "Nothing was saved: this form did not say which decision its page showed "
    "(an old or altered page). The page now shows the decision standing; "
    "decide again."
)


class Unreadable(ValueError):
    """The field is there but holds no decision's id, nor none."""


def shown_value(*, standing_id: int | None, blind: bool, gold: bool) -> str:
    """The field's value on a page showing ``standing_id`` (None: no
    decision stands), blind or serving a gold item."""
    if blind:
        return BLIND
    if gold or standing_id is None:
        return NONE
    return str(standing_id)


def read_shown(
    posted: str | None, *, blind_now: bool
) -> int | Literal["unchecked"] | None:
    """What ``review_decide`` checks a posted field against; Unreadable for
    a value no page sends."""
    if posted is None:
        return UNCHECKED
    if posted == BLIND:
        return UNCHECKED if blind_now else None
    if posted == NONE:
        return None
    if posted.isascii() and posted.isdigit() and len(posted) <= _DIGITS:
        return int(posted)
    raise Unreadable(posted[:40])
