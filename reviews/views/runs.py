"""A recorded run's page, and the text tier on it: the run's replays with
the ways to start one side by side (Replay now, Replay from tape, Replay as
text, as the viewer may), its text replays (newest first), and one text
replay's side-by-side view. The text tier compares another model's answer with the
original; the pages never present it as a reproduction verdict."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.db.models import Count, F, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING, HttpResponseClientRedirect

from replayhub import roles
from replayhub.gateway import tape
from replayhub.ingest.transcripts.conversation import Turn, conversation
from replayhub.models import (
    Budget,
    Preflight,
    Project,
    Provider,
    Replay,
    Run,
    RunSource,
    TextReplay,
    TextStatus,
    TextSuite,
)
from replayhub.models.project_settings import bound_problem
from replayhub.replay import tapes
from replayhub.replicates import standing
from replayhub.texttier.replay import BadTarget, Target
from replayhub.texttier.services import (
    AlreadyAsked,
    SuiteFilters,
    text_replay_request,
)
from reviews.project_services import (
    ReplayRefused,
    replay_from_tape,
    text_suite_again,
    text_suite_request,
)
from reviews.replay_page.continuations import (
    arguments_view,
    messages_view,
    text_view,
)
from reviews.replay_page.tape_view import turns
from reviews.together.blind import hidden_from
from reviews.views import HtmxHttpRequest

VIEW_RUNS = "replayhub.view_run"
ADD_TEXT_REPLAY = "replayhub.add_textreplay"
RUN_SUITES = "replayhub.add_textsuite"
# Replay now's permission, as on the project's run list.
START_REPLAY = "replayhub.add_replay"
# A tape replay's, as the replay page's "Replay from tape" button.
REPLAY_TAPE = roles.DECIDE
# The most runs one suite asks about.
MOST_SUITE_RUNS = 100_000
# Text replays listed on a run's page.
LISTED = 50
# Transcript turns shown before "show all": a long session's page stays light.
TRANSCRIPT_TURNS = 150


class TextReplayForm(forms.Form):
    """Which provider and model answer the prompt, and which judge, if any."""

    provider = forms.ChoiceField(label="Provider")
    model = forms.CharField(label="Model", max_length=200)
    judge_provider = forms.ChoiceField(label="Judge provider", required=False)
    judge_model = forms.CharField(label="Judge model", max_length=200, required=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        names = list(Provider.objects.values_list("name", flat=True))
        provider = cast(forms.ChoiceField, self.fields["provider"])
        judge = cast(forms.ChoiceField, self.fields["judge_provider"])
        provider.choices = [(n, n) for n in names]
        judge.choices = [("", "No judge")] + [(n, n) for n in names]

    def clean(self) -> dict:
        data = super().clean()
        # BaseForm.clean returns cleaned_data; None is only an override's choice.
        assert data is not None
        try:
            if data.get("provider") and data.get("model"):
                data["target"] = Target.parse(f"{data['provider']}:{data['model']}")
            data["judge"] = None
            if data.get("judge_provider") or data.get("judge_model"):
                data["judge"] = Target.parse(
                    f"{data.get('judge_provider', '')}:{data.get('judge_model', '')}"
                )
        except BadTarget:
            # Said beside the judge field left empty, where it is mended.
            missing = "judge_model" if data.get("judge_provider") else "judge_provider"
            self.add_error(
                missing, "Give both a judge provider and a judge model, or neither."
            )
        return data


class TextSuiteForm(TextReplayForm):
    """A new suite: the project, which of its runs, and the models asked."""

    project = forms.ModelChoiceField(
        label="Project", queryset=Project.objects.order_by("slug"), to_field_name="slug"
    )
    only_model = forms.CharField(
        label="Only runs of model", max_length=200, required=False
    )
    since = forms.DateField(
        label="Only runs since",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    include_failed = forms.BooleanField(
        label="Include runs whose original failed its tests", required=False
    )
    most = forms.IntegerField(label="At most (runs)", required=False)
    field_order = ["project", "provider", "model", "judge_provider", "judge_model"]

    def clean_most(self) -> int | None:
        # Its bounds in the form's one message, not Django's nor the browser's.
        most = self.cleaned_data["most"]
        if problem := bound_problem(most, 1, MOST_SUITE_RUNS, " runs"):
            raise forms.ValidationError(problem)
        return most

    def filters(self) -> SuiteFilters:
        data = self.cleaned_data
        return SuiteFilters(
            model=data.get("only_model") or "",
            since=data.get("since"),
            include_failed=bool(data.get("include_failed")),
            max=data.get("most"),
        )


def own_provider(run: Run) -> str | None:
    """The provider "Replay as text" starts on: one of the run's project's
    own (the run's, if it is one of them), else the one its text tier asks,
    else the run's if it is registered; None leaves the list's first."""
    own = list(run.project.providers.order_by("name").values_list("name", flat=True))
    if own:
        return run.provider if run.provider in own else own[0]
    budget = Budget.objects.filter(project_id=run.project_id).first()
    target = budget.text_target.partition(":")[0] if budget else ""
    for name in (target, run.provider):
        if name and Provider.objects.filter(name=name).exists():
            return name
    return None


def _pending(rows) -> list[TextReplay]:
    """The listed text replays not done yet, newest first."""
    return [r for r in rows if r.status != TextStatus.FINISHED]


def _run_context(request: HttpRequest, run: Run, form=None) -> dict:
    rows = list(
        TextReplay.objects.filter(run=run)
        .defer("output", "judge_answer", "judge_rationale")
        .order_by("-created_at", "-id")[:LISTED]
    )
    pending = _pending(rows)
    replays = list(
        Replay.objects.filter(run=run)
        .only("id", "status", "verdict", "reason_code", "attempt", "finished_at")
        .order_by("-id")[:20]
    )
    return {
        "page": "projects",
        "run": run,
        "replays": replays,
        "hidden": hidden_from(request.user, [(r.pk, run.project_id) for r in replays]),
        "text_replays": rows,
        "pending": pending,
        **_replay_actions(request, run),
        "can_replay_text": request.user.has_perm(ADD_TEXT_REPLAY),
        "can_see_money": request.user.has_perm(roles.VIEW_MONEY),
        "has_providers": Provider.objects.exists(),
        "form": (
            form
            if form is not None
            else TextReplayForm(initial={"provider": own_provider(run)})
        ),
        "now": timezone.now(),
        "seeds": _seeds(run),
        "tape_turns": turns(
            tape.from_record_tape((run.raw or {}).get("tape"))
            if isinstance(run.raw, dict)
            else []
        ),
        "tape_origin": "as recorded",
        "replicates": _replicates(request, run),
        # Only the whole page shows the transcript (not htmx's partials).
        "transcript": (
            None if getattr(request, "htmx", False) else _transcript(request, run)
        ),
    }


def _replicates(request: HttpRequest, run: Run) -> dict[str, Any] | None:
    """The run's samples as the page shows them (``replicates.standing``):
    None for a run of a project without a replicate policy and with no
    replicate. Under blind review, a reviewer who has not judged one of them
    sees the strip without verdicts, and neither rate nor decision."""
    budget = Budget.objects.filter(project_id=run.project_id).first()
    policy = budget.replicate_policy() if budget else None
    found = standing.run_replicates(run, policy)
    if policy is None and not any(r.replicate for r in found.replays):
        return None
    hidden = hidden_from(request.user, [(r.pk, run.project_id) for r in found.replays])
    return {
        "found": found,
        "policy": policy,
        "hidden": hidden,
        "json": None if hidden else standing.as_json(found, policy),
    }


def _replay_actions(request: HttpRequest, run: Run) -> dict[str, bool]:
    """Which of Replay now and Replay from tape the viewer may press here."""
    # As on the project's run list: a run that can never reach a verdict
    # offers neither.
    replayable = run.preflight != Preflight.UNREPRODUCIBLE
    return {
        "can_replay_now": replayable and request.user.has_perm(START_REPLAY),
        "can_replay_tape": replayable
        and request.user.has_perm(REPLAY_TAPE)
        and tapes.has_tape(run),
    }


def _seeds(run: Run) -> list[dict]:
    """A rollout's seeds in trajectory order, each with its conversation."""
    if run.source != RunSource.ROLLOUT:
        return []
    return [
        {"seed": seed, "messages": messages_view(seed.messages)}
        for seed in run.seeds.order_by("number")
    ]


def _transcript(request: HttpRequest, run: Run) -> dict[str, Any] | None:
    """The run's imported transcript as turns for the page, capped at
    :data:`TRANSCRIPT_TURNS` unless ``?transcript=all``; None without one."""
    if run.source != RunSource.CODE:
        return None
    found = run.record.get("transcript")
    turns = conversation(found)
    if not turns or not isinstance(found, dict):
        return None
    everything = request.GET.get("transcript") == "all"
    shown = turns if everything else turns[:TRANSCRIPT_TURNS]
    return {
        "format": found.get("format", ""),
        "file": found.get("file", ""),
        "turns": [_turn_view(turn) for turn in shown],
        "total": len(turns),
        "capped": len(shown) < len(turns),
    }


def _turn_view(turn: Turn) -> dict[str, Any]:
    return {
        "role": turn.role,
        "note": turn.note,
        **text_view(turn.text),
        "calls": [
            {
                "name": call.name,
                "id": call.id,
                "error": call.error,
                "input": arguments_view(call.input),
                "result": None if call.result is None else text_view(call.result),
            }
            for call in turn.calls
        ],
    }


@require_GET
@permission_required(VIEW_RUNS, raise_exception=True)
def run_detail(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("project"), pk=run_id)
    context = _run_context(request, run)
    if request.htmx and not request.htmx.history_restore_request:
        # The text replays' list polling itself while one is not done.
        response = render(request, "reviews/run_detail.html#text-replays", context)
        if not context["pending"]:
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "reviews/run_detail.html", context)


@require_POST
@permission_required(ADD_TEXT_REPLAY, raise_exception=True)
def run_text_replay(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """Queue a text replay of the run for a worker."""
    run = get_object_or_404(Run.objects.select_related("project"), pk=run_id)
    form = TextReplayForm(request.POST)
    status = 400
    if form.is_valid():
        try:
            text_replay_request(
                run=run,
                target=form.cleaned_data["target"],
                judge=form.cleaned_data["judge"],
                user=request.user,
            )
        except BadTarget as error:
            form.add_error(None, str(error))
        except AlreadyAsked as error:
            form.add_error(None, str(error))
            status = 409
    if form.is_valid() and not request.htmx:
        return redirect("reviews:run_detail", run_id=run.pk)
    if not form.errors:
        # Asked: the form keeps what was chosen, for the next model to try.
        form = TextReplayForm(
            initial={k: form.cleaned_data.get(k) for k in form.fields}
        )
    context = _run_context(request, run, form)
    template = "reviews/run_detail.html"
    if request.htmx:
        template += "#text-tier"
    return render(request, template, context, status=status if form.errors else 200)


@require_POST
@permission_required(REPLAY_TAPE, raise_exception=True)
def run_tape_replay(request: HttpRequest, run_id: int) -> HttpResponse:
    """Queue a tape replay of the run and go to it."""
    run = get_object_or_404(Run, pk=run_id)
    try:
        queued = replay_from_tape(run=run, actor=request.user)
    except ReplayRefused as exc:
        messages.error(request, f"Not started: {exc}")
        return redirect("reviews:run_detail", run_id=run.pk)
    messages.success(request, f"Tape replay {queued.pk} of {run.external_id} queued.")
    return redirect("reviews:replay_detail", replay_id=queued.pk)


@require_GET
@permission_required(VIEW_RUNS, raise_exception=True)
def text_replay_detail(request: HtmxHttpRequest, text_replay_id: int) -> HttpResponse:
    """Original and replayed output side by side, with the similarity and the
    judge's score and rationale."""
    row = get_object_or_404(
        TextReplay.objects.select_related("run", "project", "requested_by"),
        pk=text_replay_id,
    )
    context = {
        "page": "projects",
        "row": row,
        "run": row.run,
        "can_see_money": request.user.has_perm(roles.VIEW_MONEY),
        "now": timezone.now(),
    }
    if request.htmx and not request.htmx.history_restore_request:
        response = render(request, "reviews/text_replay.html#state", context)
        if row.status == TextStatus.FINISHED:
            response.status_code = HTMX_STOP_POLLING
            response["HX-Refresh"] = "true"
        return response
    return render(request, "reviews/text_replay.html", context)


@require_GET
@permission_required(VIEW_RUNS, raise_exception=True)
def text_suites(request: HttpRequest) -> HttpResponse:
    """Every text-tier suite with its summary (how far an unfinished one
    got), newest first."""
    return _suites_page(request, TextSuiteForm())


def _suites_page(
    request: HttpRequest, form: TextSuiteForm, status: int = 200
) -> HttpResponse:
    suites = TextSuite.objects.select_related("project", "requested_by").annotate(
        done=Count("text_replays", filter=Q(text_replays__status=TextStatus.FINISHED))
    )[:200]
    return render(
        request,
        "reviews/text_suites.html",
        {
            "page": "projects",
            "suites": suites,
            "now": timezone.now(),
            "can_run_suites": request.user.has_perm(RUN_SUITES),
            "form": form,
            "has_providers": Provider.objects.exists(),
        },
        status=status,
    )


@require_POST
@permission_required(RUN_SUITES, raise_exception=True)
def text_suite_new(request: HtmxHttpRequest) -> HttpResponse:
    """Start a new suite on a worker: the form at the foot of the suites
    page, as ``manage.py replay_suite`` does from the command line. Sent
    with htmx, a refused form is swapped in place (no history entry that
    Back would have to post again) and a suite started sends the browser to
    the suites; a plain post is redirected."""
    form = TextSuiteForm(request.POST)
    if form.is_valid():
        try:
            suite = text_suite_request(
                actor=request.user,
                project=form.cleaned_data["project"],
                target=form.cleaned_data["target"],
                judge=form.cleaned_data["judge"],
                filters=form.filters(),
            )
        except BadTarget as error:
            form.add_error(None, str(error))
        else:
            messages.success(
                request,
                f"Suite #{suite.pk} queued: {suite.project.slug}'s runs on "
                f"{suite.target}. A worker starts it; this page shows how far it got.",
            )
            url = reverse("reviews:text_suites")
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    return _suites_page(request, form, status=400)


@require_POST
@permission_required(RUN_SUITES, raise_exception=True)
def text_suite_run(request: HttpRequest, suite_id: int) -> HttpResponse:
    """Run a suite again now, on a worker: a new suite of the same project,
    models and filters."""
    suite = get_object_or_404(TextSuite.objects.select_related("project"), pk=suite_id)
    try:
        again = text_suite_again(actor=request.user, suite=suite)
    except BadTarget as error:
        messages.error(request, f"Suite #{suite.pk} not started: {error}")
    else:
        messages.success(
            request,
            f"Suite #{again.pk} queued: {suite.project.slug}'s runs on "
            f"{again.target} again, as suite #{suite.pk} chose them. A worker "
            "starts it; this page shows how far it got.",
        )
    return redirect("reviews:text_suites")


@require_GET
@permission_required(VIEW_RUNS, raise_exception=True)
def text_suite_detail(request: HttpRequest, suite_id: int) -> HttpResponse:
    """One suite: its summary and each run's result, lowest similarity first
    (where another model disagreed most)."""
    suite = get_object_or_404(
        TextSuite.objects.select_related("project", "requested_by"), pk=suite_id
    )
    rows = (
        TextReplay.objects.filter(suite=suite)
        .select_related("run")
        .defer(
            "output", "judge_answer", "judge_rationale", "run__prompt", "run__output"
        )
        .order_by(F("similarity").asc(nulls_first=True), "id")
    )
    return render(
        request,
        "reviews/text_suite.html",
        {"page": "projects", "suite": suite, "rows": rows, "now": timezone.now()},
    )
