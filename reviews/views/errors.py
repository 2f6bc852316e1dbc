"""The 400, 403, 404, 405 and 500 pages: styled, with the navigation and a way
back.

A client error (403, 404) is the user's dead end, not the server's fault; the
page says what happened and where to go. The 500 page renders without the
database when it can (the failure may be the database). Django has no 405
handler: ``NotAllowedPage`` answers a browser's GET of an address that only
takes a form's submission (a refused form renders at that address, so reloading
it or coming back later GETs it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.shortcuts import render
from django.template import loader
from django.urls import Resolver404, resolve, reverse
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


def _page(
    request: HttpRequest, status: int, title: str, text: str, **context
) -> HttpResponse:
    context.update(status=status, title=title, text=text, back=_back(request))
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


# A POST-only address whose form lives on one obvious page: a GET goes there.
_FORM_PAGES = {
    "reviews:text_suite_new": "reviews:text_suites",
    "reviews:project_remove": "reviews:project_edit",
}


class NotAllowedPage:
    """A browser's GET of a POST-only address: its form's page, or a styled 405.

    Only an empty 405 for a plain page load (``Accept`` names HTML, no htmx) is
    changed; an API client or a script keeps the bare 405 and its ``Allow``.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not (
            isinstance(response, HttpResponseNotAllowed)
            and not response.content
            and request.method == "GET"
            and "text/html" in request.headers.get("Accept", "")
            and "HX-Request" not in request.headers
        ):
            return response
        match = request.resolver_match
        if match is not None and match.view_name in _FORM_PAGES:
            return HttpResponseRedirect(
                reverse(_FORM_PAGES[match.view_name], kwargs=match.kwargs)
            )
        page = _page(
            request,
            405,
            "Only a form's submission",
            "This address only takes a form's submission: opening it on its own "
            "shows nothing. Go to the page the form is on.",
            onward=_onward(request),
        )
        # The refusal keeps its Allow header and stays logged once.
        response.content = page.content
        response["Content-Type"] = page["Content-Type"]
        return response


def _onward(request: HttpRequest) -> str:
    """The nearest address above the request's that is a page the user can
    open, for a way onward: an address that resolves may still name a replay
    or project that does not exist, so the page is asked (a GET, as a click
    on the link would be)."""
    parts = request.path.rstrip("/").split("/")
    while len(parts) > 1:
        parts.pop()
        parent = "/".join(parts) + "/"
        try:
            match = resolve(parent)
        except Resolver404:
            continue
        if match.view_name in _FORM_PAGES:
            continue
        try:
            opened = match.func(request, *match.args, **match.kwargs)
        except (Http404, PermissionDenied):
            continue
        if opened.status_code == 200:
            return parent
    return ""
