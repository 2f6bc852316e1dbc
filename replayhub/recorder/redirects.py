"""HTTP that follows no redirect, for every request that carries a credential.

urllib follows a 301, 302 or 303 as a GET that keeps every header of the
request -- ``Authorization: Bearer <ingest token>``, the agent's ``x-api-key``
-- to whatever host the ``Location`` names, and its 200 reads as success.
Through :data:`OPENER` a 3xx is an answer like an error: the recorder's post
spools the run saying where it was sent, the recording endpoint tells the agent
its call was not forwarded, and the credential goes to no other address.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any


class RedirectRefused(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: the 3xx ends as an ``HTTPError`` of its own code."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


OPENER = urllib.request.build_opener(RedirectRefused)


def redirected_to(error: urllib.error.HTTPError) -> str | None:
    """Where a 3xx answer pointed (its ``Location``, shown with ``!r`` and cut,
    as it is the answer's text); None for any other status."""
    if not 300 <= error.code < 400:
        return None
    location = error.headers.get("Location") if error.headers else None
    location = location or "(no Location)"
    return repr(location[:300])
