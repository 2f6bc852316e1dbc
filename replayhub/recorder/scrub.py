"""Keeping the keys the recorder handles out of everything it writes or sends.

The recorder forwards the agent's model API key (so it knows it), reads the
provider keys of its own environment, and holds the project's ingest token.
Each is masked in the record, its tape and the spool before any of them is
written or posted, in every form an echo can take:

- as it is, or with any of its characters JSON-escaped (``\\u0073``, ``\\/``)
  or percent-encoded (``%73``), in any mix, in either case of hex digit;
- base64-encoded, standard or URL-safe, at any of the three alignments.

These are the forms ``replayhub.gateway.redact`` masks in what the replay
gateway passes back. That module is not imported: the recorder is also one
standard-library file (``bundle``) with no server code beside it, so it
carries this equivalent, and its tests hold the two to the same forms.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

MASK = "[redacted]"
# A shorter value is no key (``EMPTY``, ``none``: what local servers take),
# and masking it would cut words out of the prompt a replay is given.
MIN_SECRET_CHARS = 8
# The variables the official SDKs read a key from: their values are masked
# even when the agent made no call (its argv may still name the key).
KEY_VARIABLES: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
)
KEY_VARIABLES += ("GEMINI_API_KEY", "GOOGLE_API_KEY")
# The request headers a model API takes a key in; Authorization's value is a
# scheme and the credential.
KEY_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key")


def _either_case(digits: str) -> str:
    return "".join(f"[{c}{c.upper()}]" if c.isalpha() else c for c in digits)


def _char_forms(char: str) -> str:
    """A regex for one character of a key: itself, JSON-escaped, or its UTF-8
    bytes percent-encoded."""
    percent = "".join("%" + _either_case(f"{b:02x}") for b in char.encode())
    forms = [re.escape(char), percent]
    if ord(char) < 0x10000:  # one UTF-16 unit: a single \uXXXX escape
        forms.append(r"\\u" + _either_case(f"{ord(char):04x}"))
    if char == "/":
        forms.append(r"\\/")
    return "(?:" + "|".join(forms) + ")"


def _base64_cores(secret: bytes) -> list[str]:
    """The part of the key's base64 encoding that any base64 text holding the
    key contains, for each alignment and both alphabets."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + secret).decode()
        if offset:
            encoded = encoded[4:]  # the group mixing the key with what precedes
        if (offset + len(secret)) % 3:
            encoded = encoded[:-4]  # the group mixing it with what follows
        if len(encoded) >= 8:
            cores.append(encoded)
            cores.append(encoded.replace("+", "-").replace("/", "_"))
    return cores


def credential(header: str, value: str) -> str:
    """The key a request header carries: Authorization's after its scheme."""
    if header.lower() == "authorization":
        return value.strip().split(None, 1)[-1] if value.strip() else ""
    return value.strip()


class KeyScrub:
    """Masks every form of the keys it was given in text and JSON values."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self.secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= MIN_SECRET_CHARS:
            self.secrets.add(secret)
            self._pattern = None

    def pattern(self) -> re.Pattern[str] | None:
        if self._pattern is None and self.secrets:
            forms = []
            for secret in sorted(self.secrets, key=len, reverse=True):
                forms.append("".join(map(_char_forms, secret)))
                forms += map(re.escape, _base64_cores(secret.encode()))
            self._pattern = re.compile("|".join(forms))
        return self._pattern

    def text(self, value: str) -> str:
        pattern = self.pattern()
        return pattern.sub(MASK, value) if pattern else value

    def value(self, value: Any) -> Any:
        """``value`` (JSON-like) with every string in it masked, keys included."""
        return map_strings(value, self.text)


def local_keys(env: Mapping[str, str], token_env: str) -> KeyScrub:
    """What this process knows to mask before the agent's calls tell more:
    the ingest token (``token_env``'s value) and the SDKs' key variables."""
    return KeyScrub(env.get(name) for name in (token_env, *KEY_VARIABLES))


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` (JSON-like) with ``change`` applied to every string in it,
    object keys included: a new value, built without recursion (a body an
    agent sent can nest deeper than Python's stack)."""
    top: list[Any] = [None]
    work: list[tuple[Any, Any, Any]] = [(top, 0, value)]
    while work:
        parent, slot, item = work.pop()
        if isinstance(item, str):
            parent[slot] = change(item)
        elif isinstance(item, list):
            parent[slot] = copy = [None] * len(item)
            work.extend((copy, n, element) for n, element in enumerate(item))
        elif isinstance(item, dict):
            mapping: dict[Any, Any] = {}
            parent[slot] = mapping
            for key, element in item.items():
                key = change(key) if isinstance(key, str) else key
                mapping[key] = None  # the order of the keys, kept
                work.append((mapping, key, element))
        else:
            parent[slot] = item
    return top[0]
