"""A HEAD request is answered with the headers a GET would get and no body.

Django answers HEAD as it answers GET, body included, and leaves dropping
the body to the server: ``runserver`` does, gunicorn sends nothing either
but logs a warning for every such response ("WSGI app sent body bytes on a
no-body response"), so a monitor's ``curl -I`` fills the log. Dropped here,
outermost, the body never leaves the app; the headers stay a GET's,
``Content-Length`` included, as HTTP asks of a HEAD answer.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase


class HeadWithoutBody:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if request.method != "HEAD":
            return response
        if response.streaming:
            # A file being streamed is closed with the response, unread.
            response.streaming_content = []  # type: ignore[attr-defined]
        else:
            response.content = b""  # type: ignore[attr-defined]
        return response
