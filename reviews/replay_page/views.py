from __future__ import annotations

import hashlib
from collections import defaultdict

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import (
    require_GET,
    require_http_methods,
    require_POST,
)
from django_htmx.http import HTMX_STOP_POLLING, HttpResponseClientRedirect

from replayhub import roles
from replayhub.gateway import tape
from replayhub.models import (
    Comparison,
    Replay,
    ReplayStatus,
    Tape,
    TreeKind,
)
from replayhub.replay import tapes
from replayhub.verdicts import REASON_TEXT
from reviews.forms import DecisionForm, QueueFilterForm
from reviews.models import AuditEvent, Claim, Purpose, Review
from reviews.replay_page import together
from reviews.replay_page.continuations import rollout_view
from reviews.replay_page.diffs import hunk_view, pair_by_path, split_files
from reviews.replay_page.evidence import ReplayEvidence, read_evidence
from reviews.replay_page.meanwhile import (
    FIELD,
    UNREADABLE_LINE,
    Unreadable,
    read_shown,
)
from reviews.replay_page.outcomes import CaseTable, case_table
from reviews.replay_page.tape_view import turns
from reviews.replay_page.trail import (
    UNDO_NEXT_SESSION_KEY,
    UNDO_SESSION_KEY,
    decision_sentence,
    event_sentence,
    meanwhile_sentence,
)
from reviews.services import (
    ClaimHeld,
    DecidedMeanwhile,
    NotDecidable,
    NotUndoable,
    OverrulesEvidence,
    claim_next,
    claim_release,
    claim_take,
    replay_tape_request,
    review_decide,
    review_undo,
    undo_deadline,
)
from reviews.together import gold, notices
from reviews.together.blind import hidden_from
from reviews.views import (
    HtmxHttpRequest,
    partial,
    queue_filters,
    queue_query,
    replay_for,
    with_query,
)

# Diffs with more lines than this (per kind) show their file list and load each
# file's lines on demand, so one huge change cannot stall the page.
INLINE_DIFF_LINES = 1500
# The tail of the agent's output shown on the page; the rest stays stored.
AGENT_OUTPUT_SHOWN = 64 * 1024

# Egress attempts listed a page at a time (a replay keeps a few hundred).
EGRESS_PAGE = 50
# What the replay page shows besides the replay's own row.
PAGE_RELATED = (
    "run",
    "project",
    "comparison",
    "claim__reviewer",
    "requested_by",
    "seed",
)

DIFF_KINDS = {
    "dod": ("diff_of_diffs", "Diff of diffs"),
    "original": ("original_patch", "Original change"),
    "replay": ("replay_patch", "Replay change"),
}


def _claim_state(replay: Replay, user) -> tuple[Claim | None, bool]:
    """The active claim on the replay, and whether it is the user's own."""
    try:
        claim = replay.claim
    except Replay.claim.RelatedObjectDoesNotExist:
        return None, False
    if not claim.active:
        return None, False
    return claim, claim.reviewer_id == user.pk


def _diff_section(replay: Replay, kind: str) -> dict:
    field, title = DIFF_KINDS[kind]
    comparison = getattr(replay, "comparison", None)
    files = split_files(getattr(comparison, field, "") or "")
    return {
        "kind": kind,
        "title": title,
        "files": list(enumerate(files)),
        "by_index": files,
        "inline": sum(f.size for f in files) <= INLINE_DIFF_LINES,
    }


def _side_by_side(original: dict, replay: dict) -> list[dict]:
    left, right = original["by_index"], replay["by_index"]
    return [
        {
            "path": path,
            "left": (i, left[i]) if i is not None else None,
            "right": (j, right[j]) if j is not None else None,
        }
        for path, i, j in pair_by_path(left, right)
    ]


def _outcomes_by_tree(replay: Replay) -> list[tuple[str, list]]:
    grouped = defaultdict(list)
    for outcome in replay.test_outcomes.order_by("tree", "attempt"):
        grouped[outcome.tree].append(outcome)
    return [
        (label, grouped[value]) for value, label in TreeKind.choices if grouped[value]
    ]


def _case_table(outcomes: list[tuple[str, list]]) -> CaseTable:
    firsts = {
        attempts[0].tree: attempts[0].cases for _, attempts in outcomes if attempts
    }
    return case_table(firsts)


def human_verdict(reviews: list[Review]) -> Review | None:
    """The standing decision that names a verdict (confirm or overturn), if any."""
    return next(
        (
            r
            for r in reviews
            if r.undone_at is None
            and r.decision != Review.Decision.RERUN
            and r.purpose != "gold"
        ),
        None,
    )


def _undoable(reviews: list[Review], user) -> Review | None:
    """The user's own latest decision here, while it can still be taken back."""
    standing = [r for r in reviews if r.undone_at is None and r.purpose != "gold"]
    if not standing:
        return None
    latest = standing[0]
    if (
        latest.reviewer_id != user.pk
        or latest.decision == Review.Decision.RERUN
        or timezone.now() > undo_deadline(latest)
    ):
        return None
    return latest


def _detail_context(
    request: HttpRequest, replay: Replay, form=None, overruled=()
) -> dict:
    claim, mine = _claim_state(replay, request.user)
    evidence = read_evidence(replay.evidence)
    decision_open = (
        request.user.has_perm(roles.DECIDE)
        and replay.status == ReplayStatus.FINISHED
        and (claim is None or mine)
    )
    if decision_open and form is None:
        form = DecisionForm(verdict=replay.verdict, checks=evidence.checks)
    output = replay.agent_output
    provenance = replay.provenance or replay.run.provenance or {}
    outcomes = _outcomes_by_tree(replay)
    earlier = _earlier(replay)
    return {
        "page": "queue",
        "replay": replay,
        "run": replay.run,
        "reason_text": REASON_TEXT.get(replay.reason_code, ""),
        **_evidence_context(evidence),
        "warnings": provenance.get("warnings") or evidence.warnings,
        "provenance": provenance,
        "base": provenance.get("base") or {},
        "config_drift": _config_drift(provenance),
        "prompt_sha256": hashlib.sha256(replay.run.prompt.encode()).hexdigest(),
        **_diff_context(request, replay),
        "outcomes": outcomes,
        "outcomes_cached": any(o.cached for _, runs in outcomes for o in runs),
        "cases": _case_table(outcomes),
        "model_calls": replay.model_calls.all(),
        "egress": Paginator(replay.egress_attempts.all(), EGRESS_PAGE).get_page(
            request.GET.get("egress")
        ),
        "rollout": rollout_view(replay),
        "agent_output": output[-AGENT_OUTPUT_SHOWN:],
        "agent_output_cut": len(output) > AGENT_OUTPUT_SHOWN,
        "earlier": earlier,
        "earlier_hidden": hidden_from(
            request.user, [(r.pk, replay.project_id) for r in earlier]
        ),
        **_decisions_context(request, replay),
        "claim": claim,
        "claim_mine": mine,
        "decision_open": decision_open,
        "form": form,
        "overruled": list(overruled),
        **_tape_context(request, replay, evidence),
        "now": timezone.now(),
        "queue_query": queue_query(request.GET),
    }


def _evidence_context(evidence: ReplayEvidence) -> dict:
    """What the page shows of the replay's evidence, by the names the
    template reads."""
    return {
        "checks": evidence.checks,
        "agent": evidence.agent,
        "unstorable": evidence.unstorable,
        "unstorable_count": evidence.unstorable_count,
        "nested_repositories": evidence.nested_repositories,
        "ignored_paths": evidence.ignored_paths,
        "environment": evidence.environment,
        "test_changes": evidence.test_changes,
        "egress_counts": evidence.egress_counts,
        "egress_total": evidence.egress_total,
        "refused_calls": evidence.refused_calls,
        "usage_reported": evidence.usage_reported,
        "model_warning": evidence.model_warning,
        "interference": evidence.interference,
    }


def _diff_context(request: HttpRequest, replay: Replay) -> dict:
    """The three diffs (the diff of diffs with its classified hunks, and the
    original and replayed changes side by side) and the comparison."""
    try:
        comparison = replay.comparison
    except Comparison.DoesNotExist:
        comparison = None
    dod = _diff_section(replay, "dod")
    original = _diff_section(replay, "original")
    replayed = _diff_section(replay, "replay")
    return {
        "comparison": comparison,
        "dod": dod,
        "hunks": hunk_view(
            dod["by_index"],
            getattr(comparison, "hunk_classes", None) or {},
            hide_noise=request.GET.get("noise") == "hide",
        ),
        "pairs": _side_by_side(original, replayed),
        "original": original,
        "replayed": replayed,
        "sides_inline": original["inline"] and replayed["inline"],
    }


def _earlier(replay: Replay) -> list[Replay]:
    """The run's other replays, newest first (the last 20)."""
    return list(
        Replay.objects.filter(run_id=replay.run_id)
        .exclude(pk=replay.pk)
        .only(
            "id", "attempt", "status", "verdict", "reason_code", "created_at", "trigger"
        )
        .order_by("-created_at", "-id")[:20]
    )


def _decisions_context(request: HttpRequest, replay: Replay) -> dict:
    """The reviewers' decisions on the replay, the standing one, the viewer's
    own that can still be taken back, and the audit trail."""
    reviews = list(
        Review.objects.filter(replay=replay)
        .select_related("reviewer")
        .order_by("-created_at", "-id")
    )
    # A decision taken back, or a gold check, leaves the replay undecided.
    standing = [r for r in reviews if r.undone_at is None and r.purpose != Purpose.GOLD]
    return {
        "reviews": reviews,
        "decided": bool(standing),
        # What the decision form says its page showed (``meanwhile``).
        "standing_id": standing[0].pk if standing else None,
        "human": human_verdict(reviews),
        "undoable": _undoable(reviews, request.user),
        "audit": _sentences(
            AuditEvent.objects.filter(
                object_type="replay", object_id=str(replay.pk)
            ).select_related("actor")[:50]
        ),
    }


def _tape_context(
    request: HttpRequest, replay: Replay, evidence: ReplayEvidence
) -> dict:
    """The replay's own model conversation, the tape it played (if any), and
    whether the viewer may replay the run's tape."""
    try:
        own_tape = tape_turns(replay.tape.read())
    except (Tape.DoesNotExist, ValueError):
        own_tape = []
    return {
        "tape_turns": own_tape,
        "tape_origin": evidence.tape_origin,
        "tape_divergence": evidence.tape_divergence,
        "tape_play": evidence.tape,
        "can_replay_tape": request.user.has_perm(roles.DECIDE)
        and replay.seed_id is None
        and tapes.has_tape(replay.run),
    }


def _sentences(events) -> list[AuditEvent]:
    events = list(events)
    for event in events:
        event.sentence = event_sentence(event)
    return events


def _config_drift(provenance: dict) -> bool | None:
    """Whether the sandbox config changed since the run was recorded; None: unknown."""
    recorded = provenance.get("sandbox_config_sha256")
    current = provenance.get("project_config_sha256")
    if not recorded or not current:
        return None
    return recorded != current


def _page_context(
    request: HttpRequest, replay: Replay, form=None, overruled=()
) -> dict:
    context = _detail_context(request, replay, form=form, overruled=overruled)
    context.update(together.extras(request, replay, context))
    return context


@require_http_methods(["GET", "POST"])
@permission_required(roles.VIEW_REPLAYS, raise_exception=True)
def replay_detail(request: HtmxHttpRequest, replay_id: int) -> HttpResponse:
    """The replay's page; its decision form posts here, so a refused decision
    is shown at the page's own address."""
    if request.method == "POST":
        if not request.user.has_perm(roles.DECIDE):
            raise PermissionDenied
        return _sent_on(request, _decide(request, replay_id))
    replay = replay_for(request.user, replay_id, related=PAGE_RELATED)
    # Before the page (and its inbox badge) is drawn: what was said here is read.
    notices.notices_read(user=request.user, replay_id=replay.pk)
    context = _page_context(request, replay)
    _keep_note_taken_back(request, replay.pk, context.get("form"))
    return render(request, "reviews/replay_detail.html", context)


# The note of a decision just taken back, and its replay: the page the undo
# leads to shows it in the form again, once.
NOTE_TAKEN_BACK_SESSION_KEY = "undone_note"


def _keep_note_taken_back(request: HttpRequest, replay_id: int, form) -> None:
    """The note written with a decision just taken back, in ``form`` (the
    page's unbound decision form) again: undo leads back to decide again,
    and what the reviewer wrote is not lost with the decision."""
    kept = request.session.get(NOTE_TAKEN_BACK_SESSION_KEY)
    if not (isinstance(kept, list) and kept[:1] == [replay_id]):
        return
    del request.session[NOTE_TAKEN_BACK_SESSION_KEY]
    if form is not None and not form.is_bound and len(kept) == 2:
        form.initial["note"] = kept[1]


@require_GET
@permission_required(roles.VIEW_REPLAYS, raise_exception=True)
def replay_progress(request: HttpRequest, replay_id: int) -> HttpResponse:
    """The phase line of a replay still running, polled by its detail page."""
    replay = replay_for(
        request.user, replay_id, only=("id", "status", "phase", "started_at")
    )
    response = render(
        request,
        "reviews/replay_detail.html#progress",
        {"replay": replay, "now": timezone.now()},
    )
    if replay.status in (ReplayStatus.FINISHED, ReplayStatus.CANCELLED):
        # Done: stop polling and reload, so the verdict and evidence appear.
        response.status_code = HTMX_STOP_POLLING
        response["HX-Refresh"] = "true"
    return response


@require_GET
@permission_required(roles.VIEW_REPLAYS, raise_exception=True)
def replay_diff_file(
    request: HtmxHttpRequest, replay_id: int, kind: str, index: int
) -> HttpResponse:
    """One file of one of a replay's diffs, for diffs too large to show whole."""
    if kind not in DIFF_KINDS:
        raise Http404("no such diff")
    field, title = DIFF_KINDS[kind]
    replay = replay_for(request.user, replay_id, only=("id",))
    # Only the one text column: the other two may be a megabyte each.
    text = (
        Comparison.objects.filter(replay=replay).values_list(field, flat=True).first()
    )
    files = split_files(text or "")
    if index >= len(files):
        raise Http404("no such file in this diff")
    return render(
        request,
        partial(request, "reviews/diff_file.html", "body"),
        {
            "page": "queue",
            "replay": replay,
            "kind": kind,
            "title": title,
            "index": index,
            "file": files[index],
        },
    )


@require_POST
@permission_required(roles.DECIDE, raise_exception=True)
def replay_claim(request: HttpRequest, replay_id: int) -> HttpResponse:
    # Only the id: a claim needs no diffs, and they can weigh megabytes.
    replay = replay_for(request.user, replay_id, only=("id",))
    try:
        claim_take(replay=replay, reviewer=request.user)
    except ClaimHeld as exc:
        messages.error(request, _held_message(exc.claim))
    return redirect(detail_url(replay.pk, request))


@require_POST
@permission_required(roles.DECIDE, raise_exception=True)
def replay_release(request: HttpRequest, replay_id: int) -> HttpResponse:
    replay = replay_for(request.user, replay_id, only=("id",))
    # A gold item served to the reviewer is released like any held item.
    released = gold.gold_release(replay_id=replay.pk, user=request.user)
    if claim_release(replay=replay, reviewer=request.user) or released:
        messages.info(request, f"Released replay {replay.pk}.")
    return redirect(detail_url(replay.pk, request))


@require_POST
@permission_required(roles.DECIDE, raise_exception=True)
def review_undo_view(request: HttpRequest, review_id: int) -> HttpResponse:
    review = get_object_or_404(Review, pk=review_id)
    request.session.pop(UNDO_SESSION_KEY, None)
    moved_on = request.session.pop(UNDO_NEXT_SESSION_KEY, None)
    try:
        review_undo(review=review, reviewer=request.user)
    except NotUndoable as exc:
        messages.error(request, f"Not taken back: {exc}.")
    else:
        if review.note:
            request.session[NOTE_TAKEN_BACK_SESSION_KEY] = [
                review.replay_id,
                review.note,
            ]
        # Back to the replay decided: the item claimed when the decision moved
        # on is let go, not held by the reviewer until its claim lapses.
        if isinstance(moved_on, list) and moved_on[:1] == [review.pk]:
            following = Replay.objects.filter(pk=moved_on[1]).first()
            if following is not None:
                claim_release(replay=following, reviewer=request.user)
        stands = Review.objects.standing().filter(replay_id=review.replay_id)
        messages.info(
            request,
            f"Your {review.get_decision_display().lower()} of replay "
            f"{review.replay_id} is taken back; "
            + (
                "an earlier decision still stands."
                if stands.exists()
                else "the replay is yours to decide again."
            ),
        )
    return redirect(detail_url(review.replay_id, request))


def _gold_message(said: str, serving) -> str:
    settled = serving.gold.verdict
    if said == settled:
        return f"That was a gold item: you agree with its settled verdict, {settled}."
    return (
        f"That was a gold item: its settled verdict is {settled}; "
        f"you said {said or 'rerun'}."
    )


def _held_message(claim: Claim) -> str:
    return (
        f"{claim.reviewer.get_username()} holds this replay until "
        f"{timezone.localtime(claim.expires_at):%H:%M:%S %Z}."
    )


@require_http_methods(["GET", "POST"])
@permission_required(roles.DECIDE, raise_exception=True)
def replay_decide(request: HtmxHttpRequest, replay_id: int) -> HttpResponse:
    """The older address of the decision form; a GET leads back to the page."""
    if request.method != "POST":
        return redirect("reviews:replay_detail", replay_id=replay_id)
    return _sent_on(request, _decide(request, replay_id))


def _sent_on(request: HtmxHttpRequest, response: HttpResponse) -> HttpResponse:
    """A decision's answer. The form is sent with htmx: a refused decision
    is the page again (400, 409), swapped in place so that no history entry
    holds a post that Back would have to send again; a decision taken (a
    redirect) sends the browser on. A plain post is answered as it is."""
    if request.htmx and isinstance(response, HttpResponseRedirect):
        return HttpResponseClientRedirect(response.url)
    return response


def _page_again(
    request: HttpRequest, replay_id: int, status: int, meanwhile: str = "", **kw
) -> HttpResponse:
    """The replay's page with a refused decision's form, at its own address;
    ``meanwhile`` says why a decision from an older page was not saved."""
    replay = replay_for(request.user, replay_id, related=PAGE_RELATED)
    form = kw.pop("form")
    context = _page_context(request, replay, form=form, **kw)
    context["meanwhile"] = meanwhile
    return render(request, "reviews/replay_detail.html", context, status=status)


def _decide(request: HttpRequest, replay_id: int) -> HttpResponse:
    # What a decision reads: not the diffs nor the agent's output, which can
    # weigh megabytes; a refused one loads the whole page again.
    replay = replay_for(
        request.user,
        replay_id,
        related=("project",),
        defer=("agent_output", "provenance"),
    )
    form = together.decision_form(replay, request.POST)
    if not form.is_valid():
        return _page_again(request, replay_id, 400, form=form)
    serving = gold.pending(replay_id=replay.pk, user=request.user)
    # A blind judgement is recorded as given: asking whether it means to
    # overrule the verified evidence would say what the evidence is.
    blind = together.is_blind(replay, request.user)
    try:
        shown = read_shown(request.POST.get(FIELD), blind_now=blind)
    except Unreadable:
        return _page_again(
            request, replay_id, 400, form=form, meanwhile=UNREADABLE_LINE
        )
    try:
        if serving is not None:
            review = gold.gold_judge(
                serving=serving,
                decision=form.cleaned_data["decision"],
                verdict_after=form.cleaned_data["verdict_after"] or None,
                note=form.cleaned_data["note"],
                labels=form.label_values(),
            )
        else:
            review = review_decide(
                replay=replay,
                reviewer=request.user,
                decision=form.cleaned_data["decision"],
                verdict_after=form.cleaned_data["verdict_after"] or None,
                note=form.cleaned_data["note"],
                overrule=form.cleaned_data["overrule"] or blind,
                labels=form.label_values(),
                standing_shown=shown,
            )
    except DecidedMeanwhile as exc:
        # Nothing saved; the page as it stands now, what was typed kept.
        line = meanwhile_sentence(exc.standing, request.user)
        return _page_again(request, replay_id, 409, form=form, meanwhile=line)
    except OverrulesEvidence as exc:
        # Asked again, with the same choice and note: the second "yes" records it.
        data = request.POST.copy()
        data["overrule"] = "on"
        form = together.decision_form(replay, data)
        form.is_valid()
        return _page_again(request, replay_id, 409, form=form, overruled=exc.reasons)
    except (gold.NotGold, NotDecidable) as exc:
        messages.error(request, f"Not recorded: {exc}.")
        return redirect(detail_url(replay.pk, request))
    except ClaimHeld as exc:
        messages.error(request, _held_message(exc.claim))
        return redirect(detail_url(replay.pk, request))
    if serving is not None:
        # A gold check is measured, not taken back: no undo.
        messages.info(request, _gold_message(review.verdict_after, serving))
    elif review.decision == Review.Decision.RERUN:
        messages.success(request, decision_sentence(review))
    else:
        # The undo bar says what was recorded; a flash would say it again.
        request.session[UNDO_SESSION_KEY] = review.pk
    # The next item comes from the queue as the reviewer filtered it.
    filters, query = queue_filters(request)
    following = claim_next(reviewer=request.user, filters=filters)
    if following is None:
        messages.info(
            request,
            "Nothing left to review in these filters."
            if query
            else "The queue is empty.",
        )
        return redirect(with_query(reverse("reviews:queue"), query))
    if request.session.get(UNDO_SESSION_KEY) == review.pk:
        # Taking the decision back lets go of the item this claim took.
        request.session[UNDO_NEXT_SESSION_KEY] = [review.pk, following.pk]
    return redirect(detail_url(following.pk, request))


def detail_url(replay_id: int, request: HttpRequest) -> str:
    """A replay page's address, keeping the queue's filters it was reached
    with (its request's query string) after an action on it: only the
    queue's own parameters, each as the queue accepts it, and always this
    page's own path, never an address from the request."""
    form = QueueFilterForm(request.GET, user=request.user)
    form.is_valid()
    valid = {name: request.GET[name] for name in request.GET if name not in form.errors}
    detail = reverse("reviews:replay_detail", args=[replay_id])
    return with_query(detail, queue_query(valid))


def tape_turns(exchanges: list[tape.Exchange]) -> list[dict]:
    """A replay's own tape as its conversation."""
    return turns(exchanges)


@require_POST
@permission_required(roles.DECIDE, raise_exception=True)
def replay_tape(request: HttpRequest, replay_id: int) -> HttpResponse:
    """Queue a tape replay of this replay's run and go to it."""
    replay = replay_for(
        request.user, replay_id, related=["run"], only=["id", "run", "seed_id"]
    )
    if replay.seed_id is not None or not tapes.has_tape(replay.run):
        messages.error(request, "This run has no tape to replay.")
        return redirect("reviews:replay_detail", replay_id=replay.pk)
    queued = replay_tape_request(replay=replay, actor=request.user)
    messages.success(request, f"Tape replay #{queued.pk} queued.")
    return redirect("reviews:replay_detail", replay_id=queued.pk)
