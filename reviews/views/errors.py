"""The 403, 404 and 500 pages: styled, with the navigation and a way back.

A client error (403, 404) is the user's dead end, not the server's fault; the
page says what happened and where to go. The 500 page renders without the
database when it can (the failure may be the database).
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template import loader
from django.utils.http import url_has_allowed_host_and_scheme

log = logging.getLogger(__name__)


def _back(request: HttpRequest) -> str:
    """The page the user came from, if it is on this site; else ""."""
    referer = request.headers.get("Referer", "")
    if referer and url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return referer
    return ""


def _page(request: HttpRequest, status: int, title: str, text: str) -> HttpResponse:
    context = {"status": status, "title": title, "text": text, "back": _back(request)}
    return render(request, "error.html", context, status=status)


def forbidden(request: HttpRequest, exception=None) -> HttpResponse:
    return _page(
        request,
        403,
        "Not for your role",
        "Your role cannot open this page or do this. An admin can grant it.",
    )


def not_found(request: HttpRequest, exception=None) -> HttpResponse:
    return _page(
        request,
        404,
        "Not found",
        "Nothing is at this address: it may have been removed, or the link is "
        "mistyped.",
    )


def bad_request(request: HttpRequest, exception=None) -> HttpResponse:
    return _page(
        request,
        400,
        "Bad request",
        "The request could not be understood. Go back and try again.",
    )


def server_error(request: HttpRequest) -> HttpResponse:
    text = "Something went wrong on the server; it is logged. Try again shortly."
    try:
        return _page(request, 500, "Server error", text)
    except Exception:
        # The page itself failed (the database may be down): the bare version.
        log.exception("the styled 500 page failed; serving the plain one")
        html = loader.get_template("500.html").render({"text": text})
        return HttpResponse(html, status=500)
