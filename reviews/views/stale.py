"""Two admins editing the same settings: a form carries a fingerprint of the
stored values it was rendered from (``FIELD``, hidden), and a save is taken
only while the stored values still have it. Otherwise it is refused, the
values typed kept in the form, each field whose stored value is not what the
form holds listed with the stored one: a save never undoes another admin's
change made since the page was opened.

The rule is pure: ``fingerprint`` of what unbound forms show
(``stored_values``), ``verdict`` of a posted fingerprint, ``differences``
between a post and the stored values."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from django import forms
from django.db import models

# The hidden field's name, and the fingerprint's length in hex digits.
FIELD = "stored"
DIGITS = 16

# What a posted fingerprint says of the form it came with.
CURRENT = "current"  # rendered from the values stored now: save it
CHANGED = "changed"  # someone saved since: refuse (409)
# Blank, not a fingerprint, or no such field: refuse (400). A post without
# it (a script, a page from before the field) would save unchecked over
# whatever was stored since; a script reads the field from the page first.
UNREADABLE = "unreadable"

# The refusals, one line each, above the form.
CHANGED_LINE = (
    "{name} was changed by someone else since you opened this page: nothing "
    "was saved. Your values are kept in the form; the stored ones are listed "
    "below. Check them, then save again to put yours in their place."
)
UNREADABLE_LINE = (
    "Nothing was saved: this form did not say which stored values it was "
    "opened with (an old or altered page). Your values are kept in the form; "
    "check them against the stored ones listed below, then save again."
)


def _plain(value: Any) -> Any:
    """A value as JSON holds it, the same whichever way a form got it."""
    if isinstance(value, Decimal):
        return f"{value.normalize():f}" if value.is_finite() else str(value)
    if isinstance(value, models.Model):
        return value.pk
    if isinstance(value, list | tuple | set | frozenset):
        items = [_plain(item) for item in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def fingerprint(values: Mapping[str, Any]) -> str:
    """A short hash of ``values``: equal values, equal fingerprints."""
    text = json.dumps(
        {name: _plain(value) for name, value in values.items()}, sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()[:DIGITS]


def stored_values(forms_: Iterable[forms.BaseForm]) -> dict[str, Any]:
    """Each field of unbound ``forms_``, by its name in a post: the value it
    shows, the stored one (only the fields a form edits count)."""
    return {
        form.add_prefix(name): form.get_initial_for_field(field, name)
        for form in forms_
        for name, field in form.fields.items()
    }


def verdict(posted: str | None, stored: str) -> str:
    """What a posted fingerprint says, against the stored values' one."""
    if (
        posted is None
        or len(posted) != DIGITS
        or any(c not in "0123456789abcdef" for c in posted)
    ):
        return UNREADABLE
    return CURRENT if hmac.compare_digest(posted, stored) else CHANGED


@dataclass(frozen=True)
class Difference:
    """A field whose stored value is not the one the form posted."""

    field: forms.BoundField
    now: str
    posted: str


def said(value: Any) -> str:
    """A field's value as the list of differences says it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None or value == "" or value == []:
        return "empty"
    if isinstance(value, list | tuple):
        return ", ".join(str(_plain(item)) for item in value)
    return str(_plain(value))


def differences(
    posted: Iterable[forms.BaseForm], stored: Iterable[forms.BaseForm]
) -> list[Difference]:
    """Each field of the ``posted`` forms whose value is not that of its
    twin in the ``stored`` (unbound) forms, in the forms' order."""
    out = []
    for bound, unbound in zip(posted, stored, strict=True):
        for name, field in bound.fields.items():
            if name not in unbound.fields:
                continue
            now = unbound.get_initial_for_field(unbound.fields[name], name)
            data = bound[name].data
            if _changed(field, now, data):
                out.append(
                    Difference(bound[name], said(unbound[name].value()), said(data))
                )
    return out


def refusal(
    posted: forms.BaseForm, stored: forms.BaseForm, name: str
) -> tuple[dict, int] | None:
    """A save of the ``posted`` form (its fingerprint in its data) whose
    ``stored`` twin (unbound, as the stored values fill it) no longer has
    that fingerprint, or that sends none: what ``_stale.html`` shows above
    the form and the status; None for a form that is current. ``name`` is
    what was changed, as the refusal's line says it."""
    found = verdict(posted.data.get(FIELD), fingerprint(stored_values([stored])))
    if found == CURRENT:
        return None
    line = CHANGED_LINE if found == CHANGED else UNREADABLE_LINE
    rows = [
        (str(d.field.label), d.field.id_for_label, d.now, d.posted)
        for d in differences([posted], [stored])
    ]
    return {"line": line.format(name=name), "now": rows}, (
        409 if found == CHANGED else 400
    )


def _changed(field: forms.Field, now: Any, data: Any) -> bool:
    """Whether ``data`` posted is another value than ``now``, stored; a
    stored value shown as text (an amount as typed, "20") read as the field
    reads what is typed."""
    try:
        if isinstance(now, str):
            now = field.to_python(now)
        return field.has_changed(now, data)
    except forms.ValidationError:
        return True
