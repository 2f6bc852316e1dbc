"""The pages, one module each; what every view shares is here: the one fetch
of a replay for a request (``replay_for``: the permission check and the 404
inside), the template name an htmx request is answered with (``partial``),
and a removal's confirmation (``confirmed``).

- queue: the review queue (its keyset pages of rows, the bands' counts,
  what is running, the next item to review).
- projects: a project's page (its runs, filterable), registering and
  editing a project in the browser, and Replay now. Its form is
  project_form, which also says what saving an edit changed.
- runs: a recorded run's page and the text tier on it.
- budgets: each project's nightly budget, per-replay caps, tonight's use
  per tier and the night history. Admins edit, leads read everything,
  reviewers see the page without money. Every number has a floor and a
  ceiling (``BUDGET_BOUNDS``, ``CAP_BOUNDS``) and the window lasts at least
  an hour; a refused value is shown beside its field in the card swapped in
  place. The audit event keeps only the changed fields, nested under their
  owner (the budget and the caps both have a ``max_tokens``); older, flat
  events still read. A page view never writes (a project without a budget
  row shows an unsaved one). Its forms are budget_forms.
- upload: an admin imports a file of native or verifiers records. It is
  CSRF-exempt only so that its size check refuses a big upload before the
  CSRF check reads the body, and it checks CSRF itself afterwards; a file
  above the inline limit becomes a job a worker imports
  (``replayhub.ingest``).
- status: the worker check (``replayhub``'s docstring).
- errors: the 400, 403, 404 and 500 pages, with the navigation and a way
  back.
- head_requests: the answer to a HEAD request, a GET's headers without
  its body (the middleware that drops it).
- page_caching: no page a signed-in person sees is kept by the browser's
  cache, so Back shows what a save in place changed (a middleware).

The replay's own page is ``reviews.replay_page``; working together,
``reviews.together``; trends, ``reviews.trends``.

Views are small typed functions: a method decorator, a fetch through a
user-scoped helper, a form to validate, a service to act, a render. Every
mutation is a POST with CSRF; htmx requests get the page's inline partial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django_htmx.middleware import HtmxDetails

from replayhub import roles
from replayhub.models import Replay
from reviews.forms import QueueFilterForm
from reviews.queue_reads import QueueFilters
from reviews.together.blind import blind_projects


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


def confirmed(request: HttpRequest, what: str) -> bool:
    """Whether a removal's POST carries its ticked "Yes, <what>" box
    (``sure``, as a bulk confirm's): the browser asks for the tick first, and
    a post without it removes nothing and says so."""
    if request.POST.get("sure") == "yes":
        return True
    messages.error(request, f"Nothing removed: tick “Yes, {what}” first.")
    return False


def partial(request: HtmxHttpRequest, template: str, name: str) -> str:
    """``template`` for a page load, its partial ``name`` for an htmx request."""
    # A history restore asks for the whole page even though it comes from htmx.
    if request.htmx and not request.htmx.history_restore_request:
        return f"{template}#{name}"
    return template


def queue_query(params) -> str:
    """The queue's filters in a query string's ``params`` (the queue's own, or
    a replay page's opened from a filtered queue), to pass on: "" for none.
    The next item and the way back stay in the filter the reviewer works in."""
    kept = {
        name: params[name]
        for name in QueueFilterForm.base_fields
        if name != "after" and params.get(name)
    }
    return urlencode(kept)


def queue_filters(request: HttpRequest) -> tuple[QueueFilters, str]:
    """``queue_query``'s filters as ``claim_next`` takes them, and the query."""
    form = QueueFilterForm(request.GET, user=request.user)
    form.is_valid()
    filters = form.filters()
    if filters.verdict or filters.reason_code or filters.label_id is not None:
        # As the queue lists them: under blind review no replay is found by
        # what would tell its verdict.
        filters = replace(filters, exclude_project_ids=frozenset(blind_projects()))
    return filters, queue_query(request.GET)


def with_query(url: str, query: str) -> str:
    return f"{url}?{query}" if query else url
