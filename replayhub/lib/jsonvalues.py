"""A JSON value taken where a list, an object or a string belongs.

What a server, a tape or a record sends is any JSON: where a field should
hold a list or an object it may hold a number, a string or null. These give
the value when it is of the kind, else an empty one, so that code walking an
answer reads past what it cannot use instead of raising.
"""

from __future__ import annotations

from typing import Any


def text(value: Any) -> str | None:
    """``value`` when it is a string, else None: a type, an id or a role
    that is a list cannot even be looked up in a set."""
    return value if isinstance(value, str) else None


def items(value: Any) -> list[Any]:
    """``value`` when it is a list, else []."""
    return value if isinstance(value, list) else []


def fields(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else {}."""
    return value if isinstance(value, dict) else {}
