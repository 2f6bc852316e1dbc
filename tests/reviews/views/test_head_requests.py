"""A HEAD request (a monitor's ``curl -I``) gets a GET's status and headers
and no body, as the WSGI server is handed them: gunicorn logs a warning for
every body sent on an answer to HEAD."""

from __future__ import annotations

from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import RequestFactory


def served(method: str, path: str) -> tuple[str, dict[str, str], bytes]:
    """The status, headers and body the app hands a WSGI server (the test
    client drops a HEAD answer's body itself, so it cannot tell)."""
    environ = RequestFactory().generic(method, path).environ
    started: dict = {}

    def start_response(status, headers, exc_info=None):
        started.update(status=status, headers=dict(headers))

    # As the test client: the test's transaction keeps its connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        answer = WSGIHandler()(environ, start_response)
        body = b"".join(answer)
        answer.close()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    return started["status"], started["headers"], body


def test_a_head_of_the_login_page_gets_its_headers_and_no_body(db):
    status, headers, body = served("GET", "/accounts/login/")
    assert status == "200 OK" and b"<form" in body

    head_status, head_headers, head_body = served("HEAD", "/accounts/login/")

    assert head_status == "200 OK"
    assert head_body == b""
    assert head_headers["Content-Type"] == headers["Content-Type"]
    assert int(head_headers["Content-Length"]) > 0


def test_a_head_of_healthz_is_answered_not_refused_and_has_no_body(db):
    status, headers, body = served("HEAD", "/healthz")

    assert status == "200 OK"
    assert body == b""
    assert headers["Content-Type"] == "application/json"
