"""Keeping the provider's key out of what the agent reads, in every form an
echo of it can take.

An upstream can echo the key it got: in an error message, a debugging header,
or a model's answer. The agent must never read it, so every byte that goes
back is scrubbed of the key

- as it is, or with any of its characters JSON-escaped (``\\u0073``, ``\\/``)
  or percent-encoded (``%73``), in any mix, in either case of hex digit;
- base64-encoded, standard or URL-safe, at any of the three alignments;
- split over the text deltas of a stream's events (each delta holding a
  piece), which the byte scrub cannot see whole (:class:`DeltaGuard`).

A match becomes ``[redacted]``, whatever the key's length: the mask says
nothing of it. Bytes are held back only while they could still be the start
of a match, so a stream is not delayed otherwise. Compressed bodies are
decoded before this (``server``): the agent reads what the scrub read.
"""

from __future__ import annotations

import base64
import json
import mmap
import re
import sys
from functools import lru_cache
from typing import Any

MASK = b"[redacted]"
MASK_TEXT = MASK.decode()
# A delta text ending in this much of the key holds its event back.
HOLD_FROM_CHARS = 3


def _char_forms(byte: int) -> bytes:
    """A regex for one byte of the key: itself, JSON-escaped, percent-encoded."""
    # Each hex digit in either case: [0 0], [a A].
    hex_class = b"".join(b"[%c%c]" % (c, ord(chr(c).upper())) for c in b"%02x" % byte)
    forms = [re.escape(bytes([byte])), rb"\\u00" + hex_class, rb"%" + hex_class]
    if byte == ord("/"):
        forms.append(rb"\\/")
    return b"(?:" + b"|".join(forms) + b")"


def _base64_cores(secret: bytes) -> list[bytes]:
    """The part of the key's base64 encoding that any base64 text holding the
    key must contain, for each alignment and both alphabets."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + secret)
        if offset:
            encoded = encoded[4:]  # the group mixing the key with what precedes
        if (offset + len(secret)) % 3:
            encoded = encoded[:-4]  # the group mixing it with what follows
        if len(encoded) >= 8:
            cores.append(encoded)
            cores.append(encoded.replace(b"+", b"-").replace(b"/", b"_"))
    return sorted(set(cores), key=len, reverse=True)


@lru_cache(maxsize=64)
def _compiled(secret: bytes) -> tuple[re.Pattern[bytes], list[bytes]]:
    """The pattern of every form of ``secret``, and its base64 cores: made once
    per key, not once per call."""
    cores = _base64_cores(secret)
    flexible = b"".join(_char_forms(b) for b in secret)
    return re.compile(b"|".join([flexible, *map(re.escape, cores)])), cores


def scrub(data: bytes, secret: bytes) -> bytes:
    """``data`` whole (a header, an error) with every form of ``secret`` masked."""
    return _compiled(secret)[0].sub(MASK, data) if secret else data


class Redactor:
    """Scrubs ``secret`` from a byte stream, across chunk boundaries."""

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self._held = b""
        if not secret:
            return
        self._pattern, self._cores = _compiled(secret)
        # The longest a match of the flexible form can be: every byte escaped.
        self._window = 6 * len(secret)

    def feed(self, chunk: bytes) -> bytes:
        if not self.secret:
            return chunk
        data = self._pattern.sub(MASK, self._held + chunk)
        keep = self._partial(data)
        self._held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep]

    def flush(self) -> bytes:
        held, self._held = self._held, b""
        return held

    def _partial(self, data: bytes) -> int:
        """How many bytes at the end of ``data`` could begin a match."""
        for start in range(max(0, len(data) - self._window), len(data)):
            if data[start] in (self.secret[0], 0x5C, 0x25) and self._could_start(
                data, start
            ):
                return len(data) - start
        longest = 0
        for core in self._cores:
            for n in range(min(len(core) - 1, len(data)), longest, -1):
                if data.endswith(core[:n]):
                    longest = n
                    break
        return longest

    def _could_start(self, data: bytes, i: int) -> bool:
        """Whether ``data[i:]`` is a proper prefix of a flexible form of the key."""
        secret, end, k = self.secret, len(data), 0
        while i < end:
            if k == len(secret):
                return False
            byte = secret[k]
            if data[i] == byte:
                i, k = i + 1, k + 1
                continue
            if data[i] == 0x5C:  # a backslash: \u00hh, or \/ for a slash
                if byte == ord("/") and data[i : i + 2] == b"\\/":
                    i, k = i + 2, k + 1
                    continue
                form, size = b"\\u00%02x" % byte, 6
            elif data[i] == 0x25:  # %hh
                form, size = b"%%%02x" % byte, 3
            else:
                return False
            piece = data[i : i + size].lower()
            if len(piece) < size:
                return form.startswith(piece)
            if piece != form:
                return False
            i, k = i + size, k + 1
        return True


def _text_fields(event: Any) -> list[tuple[Any, Any]]:
    """Where a stream event carries generated text: (container, key) pairs, in
    order. Anthropic's deltas, OpenAI's chat chunks and Responses events."""
    found: list[tuple[Any, Any]] = []
    if not isinstance(event, dict):
        return found
    delta = event.get("delta")
    if isinstance(delta, dict):
        for key in ("text", "partial_json", "thinking"):
            if isinstance(delta.get(key), str):
                found.append((delta, key))
    elif isinstance(delta, str):
        found.append((event, "delta"))
    for choice in event.get("choices") or []:
        part = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("content"), str):
            found.append((part, "content"))
        for call in part.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(
                function.get("arguments"), str
            ):
                found.append((function, "arguments"))
    return found


class DeltaGuard:
    """Scrubs ``secret`` from the text a stream's events carry, when its pieces
    come in several events. Events go out whole, in order; an event is held
    only while the text so far ends in the start of the key."""

    def __init__(self, secret: bytes) -> None:
        self.secret = secret.decode("utf-8", "replace")
        self._partial = b""
        # Held events: as they came, their lines before the data, their data.
        self._held: list[tuple[bytes, bytes, Any]] = []

    def feed(self, data: bytes) -> bytes:
        if not self.secret:
            return data
        data = self._partial + data
        out = []
        while (end := _event_end(data)) is not None:
            out.append(self._event(data[:end]))
            data = data[end:]
        self._partial = data
        return b"".join(out)

    def flush(self) -> bytes:
        held = self._release(mask=False)
        partial, self._partial = self._partial, b""
        return held + partial

    def _event(self, raw: bytes) -> bytes:
        before, parsed = _parse(raw)
        self._held.append((raw, before, parsed))
        text = "".join(c[k] for c, k in self._fields())
        if self.secret in text:
            return self._release(mask=True)
        if any(
            text.endswith(self.secret[:n])
            for n in range(HOLD_FROM_CHARS, len(self.secret))
        ):
            return b""
        return self._release(mask=False)

    def _fields(self) -> list[tuple[Any, Any]]:
        return [f for _, _, parsed in self._held for f in _text_fields(parsed)]

    def _release(self, *, mask: bool) -> bytes:
        if mask:
            # The whole text, scrubbed, goes in the first field; the others
            # are emptied, so no event says where the key was cut.
            fields = self._fields()
            text = "".join(c[k] for c, k in fields).replace(self.secret, MASK_TEXT)
            for n, (container, key) in enumerate(fields):
                container[key] = text if n == 0 else ""
        held, self._held = self._held, []
        out = []
        for raw, before, parsed in held:
            if mask and parsed is not None:
                data = json.dumps(parsed, ensure_ascii=False).encode()
                out.append(before + b"data: " + data + b"\n\n")
            else:
                out.append(raw)
        return b"".join(out)


def _event_end(data: bytes) -> int | None:
    """Where the first whole event of ``data`` ends (after its blank line)."""
    ends = [
        (at + len(sep))
        for sep in (b"\n\n", b"\r\n\r\n", b"\r\r")
        if (at := data.find(sep)) >= 0
    ]
    return min(ends) if ends else None


def _parse(raw: bytes) -> tuple[bytes, Any]:
    """The event's lines before its data, and its data as JSON when it carries
    text (None otherwise: it passes as it came, the byte scrub has seen it)."""
    lines = raw.replace(b"\r\n", b"\n").split(b"\n")
    data_lines = [line for line in lines if line.startswith(b"data:")]
    if len(data_lines) != 1:
        return b"", None
    try:
        parsed = json.loads(data_lines[0][5:].strip())
    except ValueError:
        return b"", None
    if not _text_fields(parsed):
        return b"", None
    before = b"".join(
        line + b"\n" for line in lines if line and not line.startswith(b"data:")
    )
    return before, parsed


# The shapes of the keys an agent's run may carry by accident (its argv, an
# output, an upstream's echo in the tape), whoever's they are: Anthropic's,
# OpenAI's (a project, service-account or admin key; a legacy one, 48
# characters, or any holding the "T3BlbkFJ" marker), Google's, GitHub's,
# Hugging Face's, AWS access key ids, ReplayHub's ingest tokens, and a Bearer
# credential.
KEY_SHAPES = re.compile(
    rb"sk-ant-[A-Za-z0-9_-]{20,}"
    rb"|sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"
    rb"|sk-[A-Za-z0-9_-]*T3BlbkFJ[A-Za-z0-9_-]+"
    rb"|sk-[A-Za-z0-9]{48}(?![A-Za-z0-9_-])"
    rb"|AIza[0-9A-Za-z_-]{35}"
    rb"|gh[pousr]_[A-Za-z0-9]{36,}"
    rb"|github_pat_[A-Za-z0-9_]{22,}"
    rb"|hf_[A-Za-z0-9]{34,}"
    rb"|AKIA[0-9A-Z]{16}(?![0-9A-Z])"
    rb"|rhi_[0-9a-f]{12}_[A-Za-z0-9_-]{43}"
    rb"|[Bb]earer [A-Za-z0-9._~+/-]{16,}=*"
)
# Where one of them can start. The alternatives above start with different
# characters, and the regex engine tries each at every such character: about
# 25 us a 1 KiB line, more than reading the record. Each probe starts with one
# literal, which the engine finds by a plain scan (under 1 us a line); the
# whole pattern runs only on a line a probe found something in. The scan
# stops at each byte equal to the literal's first, so a probe starts at a
# rare one where it can ("k-" rather than "sk-"; "Bearer " and "bearer "
# rather than "earer ", whose "e" is the commonest letter of English text).
_PROBES = tuple(
    re.compile(probe)
    for probe in (
        rb"k-(?<=sk-)(?:ant-|proj-|svcacct-|admin-|[A-Za-z0-9_-]*T3BlbkFJ|[A-Za-z0-9]{48})",
        rb"_(?:(?<=gh[pousr]_)|(?<=github_pat_)|(?<=hf_)|(?<=rhi_))",
        rb"A(?:Iza|KIA)",
        rb"Bearer ",
        rb"bearer ",
    )
)
_BEARER = len(b"Bearer ")


def _shape_mask(match: re.Match[bytes]) -> bytes:
    found = match[0]
    # A Bearer credential keeps its scheme: the text still says what was there.
    return found[:_BEARER] + MASK if found[:1] in b"Bb" else MASK


def mask_key_shapes(line: bytes) -> bytes:
    """A record's line (JSON, as sent) with every known key shape masked.

    Run on the line before it is parsed, so that the record stored -- its
    argv, output, tape and every other string -- and its hash are of the
    masked text. A key is only ever inside a JSON string, and the mask is
    plain characters no longer than any shape, so the line stays valid JSON
    and within its size limit. A key written with JSON escapes inside it is
    not matched: these are keys sent by accident, not hidden on purpose (the
    recorder masks every form of the keys it handled)."""
    if may_hold_key_shape(line):
        return KEY_SHAPES.sub(_shape_mask, line)
    return line


def may_hold_key_shape(
    data: bytes | mmap.mmap, start: int = 0, end: int = sys.maxsize
) -> bool:
    """Whether a probe finds where a key shape could start in ``data[start:end]``
    (any bytes-like object); False proves that :func:`mask_key_shapes` leaves
    it as it is."""
    return any(probe.search(data, start, end) for probe in _PROBES)
