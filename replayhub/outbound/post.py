"""One HTTP POST to a checked address, its answer read bounded.

The standard library's ``http.client``: no proxy from the environment, no
redirect followed (a 3xx is an answer like any other), a timeout on connect
and on each read, and at most ``ANSWER_BYTES`` of the body read. The socket
connects to the address ``addresses.resolve`` checked, while TLS still
verifies the certificate for the URL's host name (SNI and hostname check).
"""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from replayhub.outbound.addresses import IPAddress, split

# Enough for a forge's error message; the rest of an answer is never read.
ANSWER_BYTES = 4096
ANSWER_LINE = 200


@dataclass(frozen=True)
class Reply:
    status: int
    first_line: str

    @property
    def delivered(self) -> bool:
        return 200 <= self.status < 300

    @property
    def transient(self) -> bool:
        """Worth another attempt: the server's trouble or a rate limit."""
        return self.status >= 500 or self.status in (408, 429)


class Unreachable(Exception):
    """The connection failed, timed out or broke: worth another attempt."""


def first_line(data: bytes) -> str:
    """The first non-empty line of an untrusted answer, printable, bounded."""
    text = data.decode("utf-8", "replace")
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return "".join(ch if ch.isprintable() else "?" for ch in line)[:ANSWER_LINE]


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    address: IPAddress,
    timeout: float,
) -> Reply:
    """POST ``body`` to ``url``, connecting to ``address``. Raises Unreachable."""
    scheme, host, port = split(url)
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn: http.client.HTTPConnection
    if scheme == "https":
        conn = http.client.HTTPSConnection(
            host, port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)

    def connect_checked(_address, timeout=timeout, source_address=None):
        # The host name stays for the Host header and TLS; the socket goes
        # to the checked address only.
        return socket.create_connection((str(address), port), timeout, source_address)

    conn._create_connection = connect_checked  # type: ignore[attr-defined]
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read(ANSWER_BYTES)
        return Reply(response.status, first_line(data))
    except (OSError, http.client.HTTPException) as exc:
        raise Unreachable(f"{type(exc).__name__}: {exc}"[:ANSWER_LINE]) from None
    finally:
        conn.close()
