"""Egress allowlist patterns: parsing and matching, pure.

An entry is ``HOST:PORT``. HOST is a DNS name whose labels may each be ``*``
(one or more whole labels: ``*.pythonhosted.org`` matches
``files.pythonhosted.org`` and ``a.b.pythonhosted.org``, never
``pythonhosted.org`` itself), or an IP address (``127.0.0.1``,
``[::1]``), which matches only itself. PORT is a number, or ``*`` for any.
Matching is case-insensitive and ignores one trailing dot (``PyPI.org.`` is
``pypi.org``).

Matching is on the name the client asked for, before any resolution: the
proxy resolves it on the worker afterwards, so an allowed name that resolves
to a private or loopback address is still reached (an admin who lists
``db.internal:5432`` means it). What cannot be trusted is a host that only
becomes an address through the resolver's leniency: ``127.1``, ``0x7f.0.0.1``,
``2130706433`` or ``017700000001`` are all 127.0.0.1 to ``inet_aton``, match
no name pattern and no address pattern, and are refused outright as hosts.
Address patterns compare addresses, not spellings, but only canonical
spellings are accepted (``::ffff:127.0.0.1`` is its own address, not
``127.0.0.1``).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

Address: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\Z")
_WILD = "*"
_MAX_NAME = 253
# A wildcard stands for one or more labels of a host already validated.
_WILD_RE = r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*"


@dataclass(frozen=True)
class Host:
    """A host a client asked for: a DNS name, lowercased, or an address."""

    name: str
    address: Address | None = None

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class AllowRule:
    """One parsed allowlist entry; `port` None means any port."""

    entry: str
    port: int | None
    address: Address | None = None
    pattern: re.Pattern[str] | None = None

    def matches(self, host: Host, port: int) -> bool:
        if self.port is not None and port != self.port:
            return False
        if self.address is not None or host.address is not None:
            return self.address == host.address
        assert self.pattern is not None
        return self.pattern.fullmatch(host.name) is not None


def _shown(text: object) -> str:
    """`text` quoted for a one-line message, long values cut."""
    shown = repr(text)
    return shown if len(shown) <= 80 else f"{shown[:60]}…{shown[-15:]}"


def parse_host(text: str) -> Host:
    """The host a client named, validated; ValueError says why not, in one line.

    IPv6 addresses come bracketed (``[::1]``) or bare. A name must be a
    well-formed DNS name; a numeric form other than a canonical dotted quad is
    refused, since only the resolver's leniency makes it an address.
    """
    if text.startswith("[") and text.endswith("]"):
        try:
            return Host(text, ipaddress.IPv6Address(text[1:-1]))
        except ValueError:
            raise ValueError(f"{_shown(text)} is not an IPv6 address") from None
    if ":" in text:
        try:
            address = ipaddress.IPv6Address(text)
        except ValueError:
            raise ValueError(f"{_shown(text)} is not a host name") from None
        return Host(f"[{text}]", address)
    try:
        return Host(text, ipaddress.IPv4Address(text))
    except ValueError:
        pass
    name = text.lower().removesuffix(".")
    if not name or len(name) > _MAX_NAME:
        raise ValueError(f"{_shown(text)} is not a host name")
    if not all(_LABEL.match(label) for label in name.split(".")):
        raise ValueError(f"{_shown(text)} is not a host name")
    if _numeric_alias(name):
        raise ValueError(
            f"{_shown(text)} is an address in disguise; write it as a dotted quad"
        )
    return Host(name)


def _numeric_alias(name: str) -> bool:
    # A top-level label is never all digits, and inet_aton accepts the octal,
    # hex and short forms: such a name could only ever resolve to an address.
    if name.rpartition(".")[2].isdigit():
        return True
    try:
        socket.inet_aton(name)
    except OSError:
        return False
    return True


def parse_port(text: str) -> int:
    if not text.isdigit() or len(text) > 5 or not 0 < int(text) < 65536:
        raise ValueError(f"{_shown(text)} is not a port (1-65535)")
    return int(text)


def split_authority(authority: str, default_port: int | None = None) -> tuple[str, str]:
    """``host:port`` -> (host, port) as text; brackets kept on IPv6 hosts.

    Userinfo (``user@host``) is refused: a proxy that matched one part of such
    an authority and connected to another would be the classic bypass.
    """
    if "@" in authority:
        raise ValueError(f"{_shown(authority)} carries user information")
    if authority.startswith("["):
        host, bracket, rest = authority.partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"{_shown(authority)} is not host:port")
        host, port = host + "]", rest[1:]
    else:
        host, colon, port = authority.rpartition(":")
        if not colon:
            host, port = authority, ""
        elif ":" in host:
            raise ValueError(f"{_shown(authority)} is not host:port (bracket IPv6)")
    if not port:
        if default_port is None:
            raise ValueError(f"{_shown(authority)} has no port")
        port = str(default_port)
    if not host:
        raise ValueError(f"{_shown(authority)} has no host")
    return host, port


def parse_target(authority: str, default_port: int | None = None) -> tuple[Host, int]:
    """The (host, port) a ``CONNECT`` or an absolute URL asks for."""
    host, port = split_authority(authority, default_port)
    return parse_host(host), parse_port(port)


def parse_allow_entry(entry: str) -> AllowRule:
    """Parse one ``HOST:PORT`` entry; ValueError with a one-line reason if bad."""
    if not isinstance(entry, str):
        raise _bad(entry, "not text")
    try:
        host, port_text = split_authority(entry)
    except ValueError:
        raise _bad(
            entry,
            "write host:port, e.g. pypi.org:443, *.pythonhosted.org:443, "
            "127.0.0.1:8000 or host:*",
        ) from None
    try:
        port = None if port_text == _WILD else parse_port(port_text)
    except ValueError as error:
        raise _bad(entry, str(error)) from None
    labels = host.lower().removesuffix(".").split(".")
    if any(_WILD in label and label != _WILD for label in labels):
        raise _bad(entry, "'*' must stand for whole labels")
    if _WILD in labels:
        concrete = [label for label in labels if label != _WILD]
        if not all(_LABEL.match(label) for label in concrete):
            raise _bad(entry, f"{_shown(host)} is not a host name pattern")
        regex = r"\.".join(
            _WILD_RE if label == _WILD else re.escape(label) for label in labels
        )
        return AllowRule(entry, port, pattern=re.compile(regex))
    try:
        parsed = parse_host(host)
    except ValueError as error:
        raise _bad(entry, str(error)) from None
    if parsed.address is not None:
        return AllowRule(entry, port, address=parsed.address)
    return AllowRule(entry, port, pattern=re.compile(re.escape(parsed.name)))


def _bad(entry: object, reason: str) -> ValueError:
    return ValueError(f"{_shown(entry)} is not a host:port pattern: {reason}")


def parse_allowlist(entries: Iterable[str]) -> tuple[AllowRule, ...]:
    """Every entry parsed; the first bad one raises ValueError."""
    return tuple(parse_allow_entry(entry) for entry in entries)


def first_match(rules: Sequence[AllowRule], host: Host, port: int) -> AllowRule | None:
    """The first rule allowing `host`:`port`, or None: denied."""
    for rule in rules:
        if rule.matches(host, port):
            return rule
    return None
