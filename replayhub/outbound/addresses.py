"""Where an outbound request may go: public addresses only, unless the operator
allows a private range (``REPLAYHUB_OUTBOUND_ALLOW_PRIVATE``).

Whoever configures a webhook or a forge chooses the host the workers post to;
without this check that is a way into the workers' own network (SSRF: the
metadata service, the database, an admin port on loopback). The host is
resolved once, every address it resolves to is checked, and the request then
connects to the checked address itself (``post.post``), so a second lookup
cannot answer differently (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressRefused(Exception):
    """The URL is malformed, does not resolve, or reaches a private address."""


class Unresolved(AddressRefused):
    """The host does not resolve (now): a setting may name it all the same,
    since every request checks its address again."""


def networks(cidrs: Sequence[str]) -> tuple[Network, ...]:
    """The allowed private ranges; raises ValueError on a malformed one."""
    return tuple(ipaddress.ip_network(cidr.strip(), strict=False) for cidr in cidrs)


def address_problem(address: IPAddress, allowed: Sequence[Network]) -> str:
    """Why ``address`` may not be reached ("" when it may)."""
    mapped = getattr(address, "ipv4_mapped", None)
    checked = mapped or address
    if any(checked in network for network in allowed):
        return ""
    # is_global is False for loopback, private, link-local, shared (CGN),
    # reserved, documentation and unspecified ranges alike.
    if not checked.is_global or checked.is_multicast:
        return f"{address}, not a public address"
    return ""


def split(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL; AddressRefused otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise AddressRefused(f"{url!r} is not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise AddressRefused("the URL must be http:// or https:// with a host")
    if parts.username is not None or parts.password is not None:
        raise AddressRefused("the URL must not hold a user or password")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


def resolve(url: str, allowed: Sequence[Network]) -> IPAddress:
    """The address to connect to for ``url``: its host resolved once and every
    answer checked. Raises AddressRefused."""
    _, host, port = split(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Unresolved(f"{host} does not resolve ({exc})") from None
    addresses = [
        ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos
    ]
    if not addresses:
        raise Unresolved(f"{host} does not resolve")
    for address in addresses:
        if problem := address_problem(address, allowed):
            # Any private answer refuses the host: a name that resolves to a
            # public and a private address would otherwise be a coin toss.
            raise AddressRefused(
                f"{host} resolves to {problem}; the operator may allow its "
                "range (REPLAYHUB_OUTBOUND_ALLOW_PRIVATE)"
            )
    return addresses[0]
