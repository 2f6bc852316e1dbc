"""Views for working together: comments, second opinions, gold items, hand-off,
the Done tab, search, bulk confirm, the agreement page and the inbox."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import permission_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.text import capfirst
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from replayhub import roles
from replayhub.models import Replay
from reviews.models import Comment, Label, Notice, NoticeKind
from reviews.queue_reads import model_names
from reviews.replay_page.views import detail_url
from reviews.together import (
    comments,
    gold,
    handoff,
    notices,
    opinions,
    past,
    quality,
)
from reviews.together.blind import blind_projects, hidden_from
from reviews.together.forms import (
    SEARCH_LONGEST,
    AgreementForm,
    AssignForm,
    BulkForm,
    DoneForm,
    GoldForm,
    NoticeReadForm,
    ResolveForm,
    SearchForm,
    SecondOpinionForm,
)
from reviews.trends.exports import _cell
from reviews.views import HtmxHttpRequest, partial, replay_for


def _back(replay_id: int, anchor: str = "") -> HttpResponse:
    url = reverse("reviews:replay_detail", args=[replay_id])
    return redirect(f"{url}#{anchor}" if anchor else url)


def _replay(request: HttpRequest, replay_id: int) -> Replay:
    # Only the columns an action needs: the diffs can weigh megabytes.
    return replay_for(
        request.user, replay_id, only=("id", "status", "project_id", "verdict")
    )


def _threads_changed(response: HttpResponse, replay_id: int) -> HttpResponse:
    """Tell the page how many threads stay open (its counts follow)."""
    trigger = {"threadsChanged": {"open": comments.open_count(replay_id)}}
    response["HX-Trigger"] = json.dumps(trigger)
    return response


@require_GET
@permission_required([roles.VIEW_REPLAYS, roles.COMMENT], raise_exception=True)
def comment_new(request: HttpRequest, replay_id: int) -> HttpResponse:
    """The comment box for a line range, drawn under its last line."""
    replay = _replay(request, replay_id)
    place = comments.CommentPlaceForm(request.GET)
    if not place.is_valid():
        return HttpResponseBadRequest("There is no such place to comment on.")
    data = place.cleaned_data
    try:
        quoted = comments.excerpt(
            replay,
            target=data["target"],
            path=data["path"],
            side=data["side"],
            start=data["line_start"],
            end=data.get("line_end") or data["line_start"],
        )
    except comments.CommentRefused as exc:
        return HttpResponseBadRequest(f"Nothing to comment on: {exc}.")
    return render(
        request,
        "reviews/_together.html#line_form",
        {"replay": replay, "place": place.place(), "excerpt": quoted, "body": ""},
    )


@require_GET
@permission_required([roles.VIEW_REPLAYS, roles.COMMENT], raise_exception=True)
def comment_people(request: HttpRequest, replay_id: int) -> HttpResponse:
    """The names a comment on this replay may mention, for the @ list."""
    _replay(request, replay_id)
    return JsonResponse({"names": notices.mentionable()})


@require_POST
@permission_required([roles.VIEW_REPLAYS, roles.COMMENT], raise_exception=True)
def comment_create(request: HtmxHttpRequest, replay_id: int) -> HttpResponse:
    replay = _replay(request, replay_id)
    form = comments.CommentForm(request.POST)
    error = refusal = ""
    refused_on = "path"
    comment = None
    if form.is_valid():
        try:
            comment = comments.comment_add(
                replay=replay, author=request.user, data=form.cleaned_data
            )
        except comments.CommentRefused as exc:
            error = f"Comment not added: {exc}."
            refusal = f"{capfirst(str(exc))}."
            refused_on = exc.field
    if request.htmx:
        return _comment_answer(request, replay, form, comment, error)
    if comment is None:
        # Shown beside the form, with what was typed, on the page it goes back
        # to; no fragment, so the browser focuses the problems (autofocus).
        comments.keep_draft(
            request.session, replay.pk, form, refusal, refused_on=refused_on
        )
        return _back(replay.pk)
    return _back(replay.pk, f"thread-{comment.pk}")


def _comment_answer(request, replay, form, comment, error: str) -> HttpResponse:
    """The box at the line becomes its thread, or shows what was refused."""
    if comment is not None:
        response = render(
            request,
            "reviews/_together.html#thread_row",
            {"thread": comments.thread(comment.pk), "can_comment": True},
        )
        return _threads_changed(response, replay.pk)
    place = comments.CommentPlaceForm(request.POST)
    if not place.is_valid():
        return HttpResponseBadRequest("There is no such place to comment on.")
    context = {
        "replay": replay,
        "place": place.place(),
        "body": request.POST.get("body", ""),
        "errors": form.errors.get("body", []),
        "error": error,
    }
    return render(request, "reviews/_together.html#line_form", context, status=422)


def _blind_to(request: HttpRequest, replay_id: int) -> bool:
    """Whether others' comments on the replay wait for this viewer's judgement."""
    project_id = (
        Replay.objects.filter(pk=replay_id).values_list("project_id", flat=True).get()
    )
    return bool(hidden_from(request.user, [(replay_id, project_id)]))


def _thread(request: HttpRequest, comment_id: int) -> Comment:
    """A thread the viewer may read: under blind review, only their own."""
    thread = get_object_or_404(Comment, pk=comment_id, parent__isnull=True)
    if thread.author_id != request.user.pk and _blind_to(request, thread.replay_id):
        raise Http404
    return thread


def _thread_answer(
    request: HtmxHttpRequest, thread: Comment, refused: str = "", body: str = ""
) -> HttpResponse:
    if not request.htmx:
        if refused:
            messages.error(request, f"Reply not added: {refused}")
        return _back(thread.replay_id, f"thread-{thread.pk}")
    shown = comments.thread(thread.pk)
    if _blind_to(request, thread.replay_id):
        [shown], _others = comments.own_only([shown], request.user)
    context = {
        "thread": shown,
        "can_comment": True,
        "reply_error": refused,
        "reply_body": body,
    }
    response = render(
        request,
        "reviews/_together.html#thread",
        context,
        status=422 if refused else 200,
    )
    return _threads_changed(response, thread.replay_id)


@require_POST
@permission_required([roles.VIEW_REPLAYS, roles.COMMENT], raise_exception=True)
def comment_reply(request: HtmxHttpRequest, comment_id: int) -> HttpResponse:
    thread = _thread(request, comment_id)
    form = comments.ReplyForm(request.POST)
    if not form.is_valid():
        said = " ".join(str(e) for e in form.errors.get("body", []))
        refused = said or "write something first."
        return _thread_answer(request, thread, refused, request.POST.get("body", ""))
    comments.comment_reply(
        thread=thread, author=request.user, body=form.cleaned_data["body"]
    )
    return _thread_answer(request, thread)


@require_POST
@permission_required([roles.VIEW_REPLAYS, roles.COMMENT], raise_exception=True)
def comment_resolve(request: HtmxHttpRequest, comment_id: int) -> HttpResponse:
    thread = _thread(request, comment_id)
    form = ResolveForm(request.POST)
    form.is_valid()
    comments.comment_resolve(thread=thread, user=request.user, resolved=form.resolves())
    return _thread_answer(request, thread)


@require_POST
@permission_required(roles.DECIDE, raise_exception=True)
def second_opinion(request: HttpRequest, replay_id: int) -> HttpResponse:
    replay = _replay(request, replay_id)
    form = SecondOpinionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not asked: the note is longer than 150 characters.")
        return _back(replay.pk)
    try:
        opinions.second_opinion_ask(
            replay=replay, user=request.user, note=form.cleaned_data["note"]
        )
    except opinions.OpinionRefused as exc:
        messages.error(request, f"Not asked: {exc}.")
    else:
        messages.success(
            request, f"Replay {replay.pk} waits for a second reviewer's decision."
        )
    return _back(replay.pk)


@require_POST
@permission_required(roles.MANAGE_GOLD, raise_exception=True)
def gold_toggle(request: HttpRequest, replay_id: int) -> HttpResponse:
    replay = _replay(request, replay_id)
    form = GoldForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not marked: that is no verdict.")
        return _back(replay.pk)
    if form.unmarks():
        gold.gold_unmark(replay=replay, actor=request.user)
        messages.info(request, f"Replay {replay.pk} is no longer a gold item.")
        return _back(replay.pk)
    try:
        item = gold.gold_mark(
            replay=replay, actor=request.user, verdict=form.cleaned_data["verdict"]
        )
    except gold.NotGold as exc:
        messages.error(request, f"Not marked: {exc}.")
    else:
        messages.success(
            request, f"Replay {replay.pk} is a gold item: {item.get_verdict_display()}."
        )
    return _back(replay.pk)


@require_POST
@permission_required(roles.MANAGE_CLAIMS, raise_exception=True)
def claim_assign(request: HttpRequest, replay_id: int) -> HttpResponse:
    replay = _replay(request, replay_id)
    form = AssignForm(request.POST)
    name = form.cleaned_data["to"] if form.is_valid() else ""
    if not name:
        if handoff.claim_release_any(replay=replay, actor=request.user):
            messages.info(request, f"Released replay {replay.pk}.")
        return redirect(detail_url(replay.pk, request))
    to = get_user_model().objects.filter(username=name).first()
    if to is None:
        messages.error(request, f"Not assigned: there is no user {name!r}.")
        return redirect(detail_url(replay.pk, request))
    try:
        handoff.claim_reassign(replay=replay, actor=request.user, to=to)
    except handoff.HandoffRefused as exc:
        messages.error(request, f"Not assigned: {exc}.")
    else:
        messages.success(request, f"Replay {replay.pk} is assigned to {name}.")
    return redirect(detail_url(replay.pk, request))


@require_GET
@permission_required(roles.VIEW_REPLAYS, raise_exception=True)
def done(request: HtmxHttpRequest) -> HttpResponse:
    everyone = request.user.has_perm(roles.VIEW_AGREEMENT)
    form = DoneForm(request.GET, everyone=everyone)
    form.is_valid()
    can_decide = request.user.has_perm(roles.DECIDE)
    filters = form.filters(request.user)
    # A period refused (it ends before it starts, or its end is no date) is
    # left out whole, as the trends page does, and the page says so: the
    # start alone would list a period nobody asked for.
    period_refused = form.has_error("until")
    if period_refused:
        filters = replace(filters, since=None, until=None)
    shown = past.seen_by(
        past.done(filters),
        viewer_id=request.user.pk,
        blind=blind_projects() if can_decide else set(),
        gold=request.user.has_perm(roles.MANAGE_GOLD),
    )
    rows = list(shown[: past.DONE_PAGE + 1])
    more = len(rows) > past.DONE_PAGE
    rows = rows[: past.DONE_PAGE]
    response = render(
        request,
        partial(request, "reviews/done.html", "results"),
        {
            "page": "done",
            "form": form,
            "rows": rows,
            "everyone": everyone,
            "older": rows[-1].pk if more else None,
            "period_refused": period_refused,
            "model": filters.model,
            "models": model_names(),
        },
    )
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_GET
@permission_required(roles.VIEW_REPLAYS, raise_exception=True)
def search(request: HttpRequest) -> HttpResponse:
    query = request.GET.copy()
    # A search longer than the box takes is cut to it, and the page says so.
    asked = str(query.get("q", ""))
    cut = len(asked) > SEARCH_LONGEST
    if cut:
        query["q"] = asked[:SEARCH_LONGEST]
    form = SearchForm(query)
    text = form.cleaned_data["q"] if form.is_valid() else ""
    filters = form.filters()
    blind_to = (
        (request.user.pk, blind_projects())
        if request.user.has_perm(roles.DECIDE)
        else None
    )
    found = past.search(text, filters, blind_to=blind_to)
    hidden = hidden_from(request.user, [(r.pk, r.project_id) for r in found])
    # Under blind review only one's own threads count, as on the replay page.
    open_threads = comments.unresolved([r.pk for r in found if r.pk not in hidden])
    open_threads |= comments.unresolved(list(hidden), author=request.user)
    # Filters that leave nothing of what the text matches: say how many
    # the text alone matches, so "nothing matches" is never untrue.
    without_filters = (
        past.matching_count(text, blind_to=blind_to)
        if text and filters and not found
        else 0
    )
    return render(
        request,
        "reviews/search.html",
        {
            "page": "done",
            "form": form,
            "q": text,
            "asked": bool(text or filters),
            "rows": [(r, open_threads.get(r.pk, 0)) for r in found],
            "hidden": hidden,
            "limit": past.SEARCH_LIMIT,
            "without_filters": without_filters,
            "cut": SEARCH_LONGEST if cut else 0,
            "models": model_names(),
        },
    )


def _bulk_set(form: BulkForm):
    data = form.cleaned_data
    # Never a replay under blind review: listed by its verdict, it would tell
    # the verdict to a reviewer who has not judged it (every listed replay is
    # undecided), and it is never confirmed in bulk anyway.
    # Nor one whose project asks for labels: a bulk confirm gives none, so it
    # would be counted here and skipped at the confirm.
    labelled = Label.objects.filter(required=True).values("project_id")
    rows = (
        Replay.objects.finished()
        .filter(verdict=data["verdict"])
        .exclude(project_id__in=blind_projects())
        .exclude(project_id__in=labelled)
    )
    if data.get("project"):
        rows = rows.filter(project=data["project"])
    if data.get("reason"):
        rows = rows.filter(reason_code=data["reason"])
    if data.get("since"):
        rows = rows.filter(finished_at__gte=past.day_start(data["since"]))
    if data.get("until"):
        rows = rows.filter(
            finished_at__lt=past.day_start(data["until"] + timedelta(days=1))
        )
    return handoff.undecided(rows).order_by("-finished_at", "-id")


@require_http_methods(["GET", "POST"])
@permission_required([roles.DECIDE, roles.BULK_CONFIRM], raise_exception=True)
def bulk(request: HttpRequest) -> HttpResponse:
    form = BulkForm(request.POST if request.method == "POST" else request.GET or None)
    context: dict = {"page": "done", "form": form, "limit": handoff.BULK_MAX}
    if form.is_bound and form.is_valid():
        ids = list(_bulk_set(form).values_list("pk", flat=True)[: handoff.BULK_MAX + 1])
        context["count"] = len(ids)
        context["sample"] = (
            Replay.objects.filter(pk__in=ids[:20])
            .select_related("run", "project")
            .order_by("-finished_at", "-id")
        )
        if request.method == "POST":
            # The count the reviewer saw: confirm nothing if the set changed.
            if form.cleaned_data.get("expected") != len(ids):
                messages.error(
                    request,
                    f"Nothing confirmed: the set now holds {len(ids)} replays, "
                    f"not {form.cleaned_data.get('expected')}. Check it again.",
                )
            else:
                result = handoff.bulk_confirm(
                    replay_ids=ids,
                    reviewer=request.user,
                    note=form.cleaned_data.get("note", ""),
                )
                messages.success(request, f"Confirmed {result.confirmed} replays.")
                for line in result.skipped[:20]:
                    messages.warning(request, f"Skipped {line}")
                # Back to the same filters (never the token or the note).
                kept = {
                    name: form.data[name]
                    for name in ("project", "verdict", "reason", "since", "until")
                    if form.cleaned_data.get(name)
                }
                return redirect(f"{reverse('reviews:bulk')}?{urlencode(kept)}")
    return render(request, "reviews/bulk.html", context)


@require_GET
@permission_required(roles.VIEW_AGREEMENT, raise_exception=True)
def agreement(request: HttpRequest) -> HttpResponse:
    form = AgreementForm(request.GET)
    form.is_valid()
    period = form.period()
    report = quality.report(period)
    if request.GET.get("format") == "csv":
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = (
            f'attachment; filename="labels-{period.since}-{period.until}.csv"'
        )
        writer = csv.writer(response)
        writer.writerow(["project", "label", "value", "decisions"])
        for row in report["labels"]:
            names = [_cell(row[key]) for key in ("project", "label", "value")]
            writer.writerow([*names, row["count"]])
        return response
    return render(
        request,
        "reviews/agreement.html",
        {"page": "agreement", "form": form, "period": period, **report},
    )


@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    # LoginRequiredMiddleware lets no anonymous user this far.
    assert request.user.is_authenticated
    rows = list(Notice.objects.filter(user=request.user).select_related("actor")[:200])
    # A mention quotes its comment, which under blind review waits for the
    # reviewer's judgement of the replay as the replay page's threads do.
    projects = dict(
        Replay.objects.filter(pk__in={n.replay_id for n in rows}).values_list(
            "pk", "project_id"
        )
    )
    blind = hidden_from(request.user, projects.items())
    for notice in rows:
        notice.withheld = (  # type: ignore[attr-defined]
            notice.kind == NoticeKind.MENTION and notice.replay_id in blind
        )
    return render(request, "reviews/inbox.html", {"page": "inbox", "notices": rows})


@require_POST
def inbox_read(request: HttpRequest) -> HttpResponse:
    # LoginRequiredMiddleware lets no anonymous user this far.
    assert request.user.is_authenticated
    form = NoticeReadForm(request.POST)
    if form.is_valid():
        notices.notices_read(user=request.user, notice_id=form.cleaned_data["id"])
    return redirect("reviews:inbox")
