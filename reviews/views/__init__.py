"""The pages, one module each; what every view shares is here: the one fetch
of a replay for a request, and the template name an htmx request is answered
with."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django_htmx.middleware import HtmxDetails

from replayhub import roles
from replayhub.models import Replay


class HtmxHttpRequest(HttpRequest):
    """A request once ``HtmxMiddleware`` has run: every view's request is one."""

    htmx: HtmxDetails


def replay_for(
    user,
    replay_id: int,
    *,
    related: Sequence[str] = (),
    only: Sequence[str] = (),
    defer: Sequence[str] = (),
) -> Replay:
    """The replay ``user`` may see: 404 when there is none, 403 for a user who
    may not see replays at all. ``only`` names the columns an action needs (the
    diffs can weigh megabytes) or ``defer`` those it leaves unread; ``related``
    the rows to join."""
    if not user.has_perm(roles.VIEW_REPLAYS):
        raise PermissionDenied
    replays = Replay.objects.select_related(*related)
    if only:
        replays = replays.only(*only)
    if defer:
        replays = replays.defer(*defer)
    return get_object_or_404(replays, pk=replay_id)


def partial(request: HtmxHttpRequest, template: str, name: str) -> str:
    """``template`` for a page load, its partial ``name`` for an htmx request."""
    # A history restore asks for the whole page even though it comes from htmx.
    if request.htmx and not request.htmx.history_restore_request:
        return f"{template}#{name}"
    return template
