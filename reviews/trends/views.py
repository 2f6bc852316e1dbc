"""The trends page, its CSV and JSON exports, and ``GET /api/v1/trends``.

The API's view lives here rather than in ``replayhub/api.py`` (the ingest
API's): it serves the same payload as the JSON export.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_not_required, permission_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from replayhub import roles
from replayhub.replicates.passk import TRIES
from reviews.render.drawing import draw_table
from reviews.together.blind import blind_projects
from reviews.trends.dashboard import dashboard_context
from reviews.trends.exports import (
    export_csv,
    export_payload,
    export_rows,
    labels_given,
    reproducibility_csv,
)
from reviews.trends.forms import TrendFilters, TrendsFilterForm
from reviews.trends.reproducibility import reproducibility
from reviews.trends.text_similarity import similarity_by_night, similarity_table
from reviews.views import HtmxHttpRequest, partial


def _seen_by(request: HttpRequest, filters: TrendFilters) -> TrendFilters:
    """The filters as ``request.user`` may read them: a reviewer who decides
    sees no project they review blind, whose nights' counts would tell its
    replays' verdicts (the counts are per night, not per replay, so the whole
    project goes)."""
    if not request.user.has_perm(roles.DECIDE):
        return filters
    return replace(filters, hidden_project_ids=frozenset(blind_projects()))


@require_GET
@permission_required(roles.VIEW_TRENDS, raise_exception=True)
def trends(request: HtmxHttpRequest) -> HttpResponse:
    form = TrendsFilterForm(request.GET)
    form.is_valid()
    filters = _seen_by(request, form.filters())
    context = {
        "page": "trends",
        "form": form,
        "query": urlencode(filters.query()),
        **dashboard_context(filters),
    }
    if form.text_tier:
        # The text tier's similarity, on request: it is read from its rows.
        context["text_tier"] = True
        table = similarity_table(similarity_by_night(filters))
        context["text_similarity"] = draw_table(table) if table.rows else ""
    response = render(
        request, partial(request, "reviews/trends.html", "results"), context
    )
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_GET
@permission_required(roles.VIEW_TRENDS, raise_exception=True)
def trends_labels(request: HtmxHttpRequest) -> HttpResponse:
    """The label counts of the page's nights, loaded after the page itself so
    that the charts never wait for them."""
    form = TrendsFilterForm(request.GET)
    form.is_valid()
    filters = _seen_by(request, form.filters())
    note = "Decisions in these nights"
    if filters.model or filters.source:
        note += "; a label belongs to a decision, so model and source do not apply"
    context = {"labels": labels_given(filters), "note": note + "."}
    return _part(request, "reviews/_label_counts.html", "Labels given", context)


@require_GET
@permission_required(roles.VIEW_TRENDS, raise_exception=True)
def trends_reproducibility(request: HtmxHttpRequest) -> HttpResponse:
    """Reproducibility of the replicated runs, loaded after the page: it is
    read from the replays, which the page itself never reads."""
    form = TrendsFilterForm(request.GET)
    form.is_valid()
    filters = _seen_by(request, form.filters())
    context = {"groups": reproducibility(filters), "pass_tries": list(TRIES)}
    return _part(request, "reviews/_reproducibility.html", "Reproducibility", context)


def _part(
    request: HtmxHttpRequest, template: str, title: str, context: dict
) -> HttpResponse:
    """A part the trends page loads after itself: alone for htmx, a page of
    its own when opened by its address (a browser without script follows the
    placeholder's link)."""
    context = {**context, "query": request.GET.urlencode()}
    if not request.htmx:
        context.update(part_template=template, part_title=title)
        template = "reviews/trends_part.html"
    response = render(request, template, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _export_filters(request: HttpRequest) -> TrendFilters | HttpResponse:
    form = TrendsFilterForm(request.GET)
    if not form.is_valid():
        errors = "; ".join(form.refusals())
        return HttpResponseBadRequest(
            f"Invalid filters: {errors}", content_type="text/plain; charset=utf-8"
        )
    return _seen_by(request, form.filters())


def _export_name(filters: TrendFilters, extension: str, table: str = "") -> str:
    scope = filters.project or "all-projects"
    table = f"-{table}" if table else ""
    return (
        f"replayhub-trends{table}-{scope}-{filters.since}-{filters.until}.{extension}"
    )


@require_GET
@permission_required(roles.VIEW_TRENDS, raise_exception=True)
def trends_export_csv(request: HttpRequest) -> HttpResponse:
    filters = _export_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    # ?table=reproducibility: the replicated runs' table instead of the rollups.
    table = "reproducibility" if request.GET.get("table") == "reproducibility" else ""
    if table:
        content = reproducibility_csv(reproducibility(filters))
    else:
        content = export_csv(export_rows(filters))
    response = HttpResponse(content, content_type="text/csv; charset=utf-8")
    name = _export_name(filters, "csv", table)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@require_GET
@permission_required(roles.VIEW_TRENDS, raise_exception=True)
def trends_export_json(request: HttpRequest) -> HttpResponse:
    filters = _export_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    response = JsonResponse(export_payload(filters))
    name = _export_name(filters, "json")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


# Session-authenticated like the pages, but an API answers 401 itself rather
# than redirecting to the login page.
@login_not_required
@require_GET
def api_trends(request: HttpRequest) -> JsonResponse:
    if not request.user.is_authenticated:
        return JsonResponse(
            {"error": "log in first: this endpoint uses the browser session"},
            status=401,
        )
    if not request.user.has_perm(roles.VIEW_TRENDS):
        return JsonResponse(
            {"error": "you do not have permission to read trends"}, status=403
        )
    form = TrendsFilterForm(request.GET)
    if not form.is_valid():
        return JsonResponse(
            {"error": "invalid filters", "fields": form.errors.get_json_data()},
            status=400,
        )
    return JsonResponse(export_payload(_seen_by(request, form.filters())))
