"""The review queue: its pages of rows, what is running, and the next item to review."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.text import Truncator
from django.views.decorators.http import (
    require_GET,
    require_POST,
)
from django_htmx.http import HTMX_STOP_POLLING

from replayhub import roles
from replayhub.models import ReviewBand, RunSource
from replayhub.verdicts import REASON_TEXT, Verdict
from reviews import queue_reads
from reviews.forms import QueueFilterForm, choices_of
from reviews.queue_reads import QueueFilters
from reviews.render import jinja
from reviews.services import (
    claim_next,
)
from reviews.templatetags.review_tags import age, until
from reviews.together import comments
from reviews.together.blind import blind_projects
from reviews.views import (
    HtmxHttpRequest,
    partial,
    queue_filters,
    queue_query,
    with_query,
)

QUEUE_ROWS_TEMPLATE = "reviews/_queue_rows.html"


def _detail_url(name: str = "reviews:replay_detail") -> str:
    """A page's URL with ``{}`` for the id: ``reverse`` once a page rather
    than once a row (a tenth of the queue page's CPU)."""
    marker = 918273645
    return reverse(name, args=[marker]).replace(str(marker), "{}")


def _queue_row(
    row: dict,
    now,
    project_slugs: dict[int, str],
    urls: tuple[str, str],
    replays: dict[int, int],
    viewer: str = "",
) -> dict:
    """What one queue row shows, as plain values.

    The queue is the hot page: plain values keep the template's per-row work
    small, which is most of the page's time once the queries are cheap.
    """
    holder = queue_reads.holder(row, now)
    detail_url, run_url = urls
    band = row["review_band"]
    files = row["comparison__files_changed"]
    return {
        "id": row["id"],
        "url": detail_url.format(int(row["id"])),
        "verdict": row["verdict"],
        "verdict_label": Verdict(row["verdict"]).label,
        "reason": REASON_TEXT.get(row["reason_code"], row["reason_code"]),
        "band": band,
        "band_label": ReviewBand(band).label if band is not None else "",
        "project": project_slugs.get(row["project_id"], ""),
        "title": Truncator(row["run__title"] or row["run__external_id"]).chars(90),
        "model": row["run__model"],
        "rollout": row.get("run__source") == RunSource.ROLLOUT,
        # A tier other than the usual agentic one is named on the row.
        "tier": "" if row.get("tier") in (None, "agentic") else row["tier"],
        "age": age(row["finished_at"], now),
        "finished": row["finished_at"].isoformat(timespec="seconds"),
        "finished_text": _short_when(row["finished_at"], now),
        "finished_exact": _when(row["finished_at"]),
        "files": files,
        "insertions": row["comparison__insertions"],
        "deletions": row["comparison__deletions"],
        "substantive": row["comparison__substantive_files"],
        "holder": holder,
        "mine": bool(viewer) and holder == viewer,
        "holder_left": holder and until(row["claim__expires_at"], now),
        "holder_until": holder and _short_when(row["claim__expires_at"], now),
        "run_url": run_url.format(int(row["run_id"])),
        "replays": replays.get(row["run_id"], 0),
    }


def _when(moment: datetime) -> str:
    """An exact time, date and zone: the age's tooltip."""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M %Z")


def _short_when(moment: datetime, now: datetime) -> str:
    """An exact time as short as the row's narrow column allows: ``19:51``
    today, ``Dec 3 19:51`` this year, ``2025-12-03`` before."""
    local, today = timezone.localtime(moment), timezone.localtime(now)
    if local.date() == today.date():
        return local.strftime("%H:%M")
    if local.year == today.year:
        return f"{local:%b} {local.day} {local:%H:%M}"
    return local.strftime("%Y-%m-%d")


def _blind_project(data: dict, filters: QueueFilters, blind: frozenset[int]) -> str:
    """The chosen project's slug when it is under blind review and a filter
    that would tell a verdict finds none of its replays, else "": the empty
    list then says why, not that none exists."""
    chosen = data.get("project")
    tells_verdict = (
        filters.verdict or filters.reason_code or filters.label_id is not None
    )
    return chosen.slug if chosen and tells_verdict and chosen.pk in blind else ""


def queue_context(
    *,
    form: QueueFilterForm,
    rows: list[dict],
    next_cursor: str,
    paged: bool,
    can_decide: bool = False,
    filters: QueueFilters | None = None,
    blind_rows: list[dict] | None = None,
    blind: frozenset[int] | None = None,
    viewer: str = "",
    blind_total: int = 0,
) -> dict:
    """The queue template's context; the benchmark builds its Paginator page with it."""
    filters = filters or form.filters()
    model = filters.model
    counts = queue_reads.band_counts(filters) if filters.banded else {}
    now = timezone.now()
    data = getattr(form, "cleaned_data", {})
    project_field = cast(forms.ModelChoiceField, form.fields["project"])
    # ScopeFilterForm declares the field with its queryset.
    assert project_field.queryset is not None
    projects = dict(project_field.queryset.values_list("id", "slug"))
    open_threads = comments.unresolved([row["id"] for row in rows])
    if blind is None:
        blind = frozenset(blind_projects()) if can_decide else frozenset()
    empty = {"model": model, "blind_project": _blind_project(data, filters, blind)}
    # A row's page keeps the queue's filters: its next item comes from them.
    detail_url = with_query(_detail_url(), queue_query(form.data))
    # The queue folds a run's replays into its newest: the row says how many
    # await review and links to the run's page, where they are all listed.
    urls = (detail_url, _detail_url("reviews:run_detail"))
    replays = (
        queue_reads.queued_per_run(
            [row["run_id"] for row in [*rows, *(blind_rows or [])]]
        )
        if filters.banded
        else {}
    )
    rows = [
        {
            **_queue_row(row, now, projects, urls, replays, viewer),
            "open_threads": open_threads.get(row["id"], 0),
            "blind": row["project_id"] in blind,
        }
        for row in rows
    ]
    # One neutral band for blind review: neither its header nor a row's place
    # says a verdict.
    hidden = [
        {
            **_queue_row(row, now, projects, urls, replays, viewer),
            "open_threads": 0,
            "blind": True,
            "band": "blind",
            "band_label": "Blind review: the verdict shows once you have judged",
        }
        for row in blind_rows or []
    ]
    return {
        "page": "queue",
        "form": form,
        "filters": filters,
        "selected": {
            "project": data["project"].slug if data.get("project") else "",
            "model": data.get("model", ""),
            "verdict": data.get("verdict", ""),
            "reason": data.get("reason", ""),
            "label": data.get("label", ""),
            "assigned": data.get("assigned", ""),
        },
        "assignees": form.assignees(),
        "labels": list(choices_of(form.fields["label"])),
        "projects": sorted(projects.values()),
        "models": queue_reads.model_names(),
        "verdicts": choices_of(form.fields["verdict"]),
        "reasons": choices_of(form.fields["reason"]),
        "rows": rows,
        # The rows are most of the page: drawn by Jinja2 (reviews/render/jinja.py).
        "rows_html": jinja.render(
            QUEUE_ROWS_TEMPLATE,
            {"rows": rows, "banded": filters.banded, "paged": paged, **empty},
        )
        if rows or not hidden
        else "",
        "blind_rows_html": jinja.render(
            QUEUE_ROWS_TEMPLATE, {"rows": hidden, "banded": True, "paged": False}
        )
        if hidden
        else "",
        "next_cursor": next_cursor,
        "paged": paged,
        "bands": [
            (band, label, counts.get(band, 0)) for band, label in ReviewBand.choices
        ],
        "count_cap": queue_reads.COUNT_CAP,
        # Blind review's replays are in no band: counted apart, in the total.
        "blind_total": blind_total,
        "queued_total": sum(counts.values()) + blind_total,
    }


@require_GET
@permission_required(roles.VIEW_REPLAYS, raise_exception=True)
def queue(request: HtmxHttpRequest) -> HttpResponse:
    form = QueueFilterForm(request.GET, user=request.user)
    form.is_valid()
    can_decide = request.user.has_perm(roles.DECIDE)
    # A reviewer under blind review never sees those projects' replays in a
    # band (nor in a verdict's or a reason's listing): they come apart.
    blind = frozenset(blind_projects()) if can_decide else frozenset()
    filters = replace(form.filters(), exclude_project_ids=blind)
    result = queue_reads.page(filters, after=form.cursor(), size=queue_reads.PAGE_SIZE)
    apart = (
        blind
        and filters.banded
        and not filters.reason_code
        and filters.label_id is None
        and form.cursor() is None
    )
    context = queue_context(
        form=form,
        rows=result.rows,
        next_cursor=result.next_cursor.encode() if result.next_cursor else "",
        paged=form.cursor() is not None,
        can_decide=can_decide,
        filters=filters,
        blind_rows=queue_reads.blind_rows(blind, filters) if apart else [],
        blind=blind,
        viewer=request.user.get_username(),
        blind_total=queue_reads.blind_count(blind, filters) if apart else 0,
    )
    if can_decide:
        now = timezone.now()
        context["my_progress"] = queue_reads.my_progress(request.user, now)
        context["assigned_to_me"] = queue_reads.assigned_to(request.user, now)
    response = render(
        request, partial(request, "reviews/queue.html", "results"), context
    )
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_GET
@permission_required(roles.VIEW_REPLAYS, raise_exception=True)
def running(request: HtmxHttpRequest) -> HttpResponse:
    rows = queue_reads.running()
    response = render(
        request,
        partial(request, "reviews/running.html", "running"),
        {"page": "queue", "rows": rows, "now": timezone.now()},
    )
    if request.htmx and not rows:
        # 286 tells htmx to stop polling: nothing is waiting or running.
        response.status_code = HTMX_STOP_POLLING
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_POST
@permission_required(roles.DECIDE, raise_exception=True)
def next_item(request: HttpRequest) -> HttpResponse:
    """Claim the next item of the queue as filtered (the filters come in the
    query string, as the queue's own URL has them)."""
    filters, query = queue_filters(request)
    replay = claim_next(reviewer=request.user, filters=filters)
    if replay is None:
        if query:
            messages.info(
                request, "Nothing left to review in these filters: every item is held."
            )
        else:
            messages.info(request, "Nothing left to review: every queued item is held.")
        return redirect(with_query(reverse("reviews:queue"), query))
    detail = reverse("reviews:replay_detail", args=[replay.pk])
    return redirect(with_query(detail, query))
