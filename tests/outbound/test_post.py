"""One POST: to the address checked, whatever the name resolves to later; its
answer read bounded; a silent server a network error."""

from __future__ import annotations

import ipaddress
import socket
import threading

import pytest

from replayhub.outbound.post import ANSWER_LINE, Unreachable, first_line, post

LOOPBACK = ipaddress.ip_address("127.0.0.1")


def test_the_socket_goes_to_the_checked_address_and_the_name_stays_the_host(stand):
    port = stand.url.rsplit(":", 1)[1]
    # The name resolves nowhere: only the checked address is ever connected to.
    reply = post(
        f"http://rebind.invalid:{port}/hook?x=1",
        b"{}",
        {"Content-Type": "application/json"},
        address=LOOPBACK,
        timeout=5,
    )
    assert reply.status == 201 and reply.delivered
    (request,) = stand.received
    assert request.path == "/hook?x=1"
    assert request.headers["Host"] == f"rebind.invalid:{port}"


def serve_once(answer: bytes | None) -> int:
    """A server on 127.0.0.1 that reads a request and answers ``answer`` raw
    (or nothing, holding the connection); its port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = listener.accept()
        try:
            conn.recv(65536)
            if answer is not None:
                conn.sendall(answer)
            else:
                while conn.recv(65536):  # until the client gives up
                    pass
        except OSError:
            pass  # the client stopped reading: what the tests want
        finally:
            conn.close()
            listener.close()

    threading.Thread(target=run, daemon=True).start()
    return listener.getsockname()[1]


def test_a_huge_answer_is_read_only_in_part_and_its_first_line_kept_printable():
    body = b"\x1b[31mred\x07" + b"A" * 300 + b"\n" + b"B" * 10_000_000
    head = b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n" % len(body)
    port = serve_once(head + body)
    reply = post(f"http://127.0.0.1:{port}/", b"{}", {}, address=LOOPBACK, timeout=5)
    assert reply.status == 500 and reply.transient
    assert len(reply.first_line) == ANSWER_LINE
    assert reply.first_line.startswith("?[31mred?AAA")


def test_a_silent_server_is_a_network_error():
    port = serve_once(None)
    with pytest.raises(Unreachable, match="timed out"):
        post(f"http://127.0.0.1:{port}/", b"{}", {}, address=LOOPBACK, timeout=0.5)


def test_a_closed_port_is_a_network_error():
    with pytest.raises(Unreachable):
        post("http://127.0.0.1:9/", b"{}", {}, address=LOOPBACK, timeout=2)


@pytest.mark.parametrize(
    ("status", "transient"), [(502, True), (429, True), (408, True), (404, False)]
)
def test_which_answers_are_worth_another_attempt(status, transient):
    port = serve_once(b"HTTP/1.1 %d X\r\nContent-Length: 0\r\n\r\n" % status)
    reply = post(f"http://127.0.0.1:{port}/", b"", {}, address=LOOPBACK, timeout=5)
    assert (reply.status, reply.transient) == (status, transient)
    assert not reply.delivered


def test_the_first_line_is_the_first_non_empty_one():
    assert first_line(b"\n\n  Validation Failed  \nmore") == "Validation Failed"
    assert first_line(b"") == ""
