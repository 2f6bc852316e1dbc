"""A page a signed-in person sees is never kept by the browser's cache.

Without a ``Cache-Control`` header Chromium keeps the HTML it was sent and,
on Back or Forward, shows that copy without asking the server. A page that
has since changed in place (a budget card saved with htmx) then comes back
with the values it was first sent with, and the next save from it silently
undoes the earlier one. Every HTML answer to a signed-in person gets the
headers of Django's ``never_cache`` (``no-store, private``, ``max-age=0``),
so Back asks the server again. A view that sets its own ``Cache-Control``
keeps it; static files (answered by WhiteNoise, outside this) and the JSON
API are not HTML and are left alone.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase
from django.utils.cache import add_never_cache_headers


class SignedInPagesNotStored:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if (
            user is not None
            and user.is_authenticated
            and not response.has_header("Cache-Control")
            and response.get("Content-Type", "").startswith("text/html")
        ):
            add_never_cache_headers(response)
        return response
