"""Whether a value typed where a variable's *name* belongs is a key itself.

A form that asks for the name of the environment variable holding a token
gets the token pasted now and then. Such a value is never repeated back (not
in a message, not in the field shown again): the messages say what it looks
like instead. The shapes are the common vendors' key prefixes; a plain
variable name never starts with one of them.
"""

from __future__ import annotations

import re

_KEY_PREFIXES = re.compile(
    r"\s*(?:sk-|gh[pousr]_|github_pat_|glpat-|xox[abprs]-|AKIA[0-9A-Z]{4}|AIza"
    r"|hf_[A-Za-z0-9]{8}|rhi_[0-9a-f]{12}_|Bearer\s)",
)

PASTED = (
    "That looks like a key itself: give the name of the environment variable "
    "that holds it, and keep the key out of forms."
)


def looks_like_key(value: str) -> bool:
    """Whether ``value`` starts like a vendor's key or a Bearer credential (pure)."""
    return bool(_KEY_PREFIXES.match(value or ""))
