"""An admin's project workflows: register or edit a project (in the browser,
and ``manage.py project_edit``), start a replay of one run now or tonight's
night now, and manage its connections (ingest tokens, forge, webhooks). Each
leaves an audit event behind."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from replayhub.ingest.tokens import token_issue
from replayhub.models import (
    Budget,
    Forge,
    IngestToken,
    Night,
    NightStatus,
    Preflight,
    Project,
    Provider,
    Replay,
    ReplayStatus,
    Run,
    TextSuite,
    Tier,
    Trigger,
    Webhook,
)
from replayhub.nights import arithmetic, scheduler, shares, tiers
from replayhub.nights.admitted import night_figures
from replayhub.outbound.services import forge_set, webhook_add, where
from replayhub.project_setup import (
    ProjectInvalid,
    ProjectProblems,
    branch_check,
    project_fields,
    refused,
    remote_check,
    sandbox_fields,
)
from replayhub.replay import tapes
from replayhub.replicates.stopping import ReplicatePolicy
from replayhub.services import night_run, replay_request
from replayhub.texttier.replay import Target
from replayhub.texttier.services import suite_again, suite_start
from reviews.models import AuditEvent, Label, Review, ReviewLabel, ReviewPolicy


class ReplayRefused(Exception):
    """The run cannot be replayed now; the message says why, in one sentence."""


@dataclass
class Started:
    replay: Replay
    night: Night | None


def _night_running(project: Project, now: datetime) -> Night | None:
    return (
        Night.objects.filter(
            project=project,
            status=NightStatus.OPEN,
            window_start__lte=now,
            window_end__gt=now,
        )
        .order_by("-window_start")
        .first()
    )


def _limits(project: Project) -> arithmetic.Amounts:
    """One night's agentic share of the project's budget (its defaults when
    the project has no budget yet)."""
    budget = Budget.objects.filter(project=project).first() or Budget(project=project)
    return shares.limits_of(budget)[tiers.AGENTIC]


def replay_now(*, run: Run, actor, now: datetime | None = None) -> Started:
    """Queue a replay of ``run`` at once, within the project's budget.

    During the project's night the replay's estimate is reserved on that night
    like the scheduler's own (one conditional UPDATE), and refused when it does
    not fit. Outside the night it must fit in one night's limits, and it is
    charged to the night running when it finishes, as a reviewer's rerun is.
    Raises ReplayRefused.
    """
    now = now or timezone.now()
    project = Project.objects.get(pk=run.project_id)
    if run.preflight == Preflight.UNREPRODUCIBLE:
        raise ReplayRefused(
            "This run can never reach a verdict"
            + (f": {run.preflight_reason}" if run.preflight_reason else ".")
        )
    estimate = arithmetic.estimate(
        recent=scheduler.recent_actuals(project), caps=scheduler.caps_of(project)
    )
    with transaction.atomic():
        night = _night_running(project, now)
        extra: dict = {}
        if night is not None:
            if not shares.reserve(
                night=night, tier=tiers.AGENTIC, amount=estimate, now=now
            ):
                left = shares.remaining(night, tiers.AGENTIC)
                short = arithmetic.blocking_dimensions(estimate, left)
                raise ReplayRefused(
                    f"Tonight's budget has no room for this replay "
                    f"({_past(short, estimate, left, 'left')}); raise it on the "
                    "Budgets page or wait for the next night."
                )
            extra = {"night": night, "reservation": estimate.as_json()}
        elif short := arithmetic.blocking_dimensions(
            estimate, limits := _limits(project)
        ):
            raise ReplayRefused(
                f"One replay is estimated past a whole night's budget "
                f"({_past(short, estimate, limits, 'a night')}); raise it on the "
                "Budgets page."
            )
        replay = replay_request(run=run, trigger=Trigger.NOW, user=actor, **extra)
        AuditEvent.objects.create(
            actor=actor,
            action="replay.request",
            object_type="replay",
            object_id=str(replay.pk),
            after={
                "replay": replay.pk,
                "run": run.external_id,
                "night": night.date.isoformat() if night else None,
                "reservation": estimate.as_json() if night else None,
            },
        )
    return Started(replay=replay, night=night)


def replay_from_tape(*, run: Run, actor) -> Replay:
    """Queue a tape replay of ``run`` at once: its model answers served from
    the run's tape (``replay.tapes.to_play``), so it spends no model tokens,
    as the replay page's "Replay from tape" does. Raises ReplayRefused when
    the run has no tape or can never reach a verdict."""
    if run.preflight == Preflight.UNREPRODUCIBLE:
        raise ReplayRefused(
            "This run can never reach a verdict"
            + (f": {run.preflight_reason}" if run.preflight_reason else ".")
        )
    if not tapes.has_tape(run):
        raise ReplayRefused(
            "This run has no tape: its record carries none and no replay of it "
            "recorded one."
        )
    with transaction.atomic():
        replay = replay_request(
            run=run, trigger=Trigger.TAPE, user=actor, tier=Tier.TAPE
        )
        AuditEvent.objects.create(
            actor=actor,
            action="replay.request",
            object_type="replay",
            object_id=str(replay.pk),
            after={
                "replay": replay.pk,
                "run": run.external_id,
                "tier": Tier.TAPE.value,
            },
        )
    return replay


def _past(
    short: list[str], estimate: arithmetic.Amounts, room: arithmetic.Amounts, of: str
) -> str:
    """Each dimension a replay does not fit, with its figures (money by name
    alone: not everyone who starts a replay may read amounts)."""
    said = []
    for dimension in short:
        name = dimension.replace("_usd", "").replace("_", " ")
        if dimension == "cost_usd":
            said.append(f"{name} used up")
        else:
            need, have = getattr(estimate, dimension), getattr(room, dimension)
            said.append(f"{name}: {need:,} needed, {have:,} {of}")
    return "; ".join(said) or "budget used up"


def project_save(
    *,
    actor,
    data: dict,
    project: Project | None = None,
    sandbox: dict | None = None,
    rollouts: dict | None = None,
) -> Updated:
    """Register a project (``project`` None) or change one; audited field by
    field. The project saved, with each field changed (none for a new one).

    ``data`` holds the form's values as ``project_fields`` takes them, plus
    ``default_branch``; ``sandbox`` those ``sandbox_fields`` takes, and
    ``rollouts`` the rollout fields (how seeds are drawn and judged, checked
    by the model as by the commands: ``draw_problems``), each left as it is
    when None; raises ProjectInvalid on the same problems
    ``manage.py project_add`` refuses. A repository on a remote is asked
    whether it answers only once every other value has passed.
    """
    default_branch = data.pop("default_branch", "")
    # Every field's problem is said at once, not one after another.
    found: list[ProjectInvalid] = []
    fields: dict[str, Any] = {}
    more: dict[str, Any] = {}
    try:
        fields = project_fields(editing=project, **data)
    except ProjectInvalid as problem:
        found.append(problem)
    try:
        more = sandbox_fields(**sandbox) if sandbox is not None else {}
    except ProjectInvalid as problem:
        found.append(problem)
    try:
        branch_check(str(data.get("repo", "")), default_branch)
    except ProjectInvalid as problem:
        found.append(problem)
    if found:
        raise ProjectProblems(found)
    providers = fields.pop("providers")
    fields.update(more, **(rollouts or {}), default_branch=default_branch)
    remote_check(fields, slug=data["slug"], editing=project)
    if project is not None:
        fields["slug"] = data["slug"]
        return project_update(
            actor=actor, project=project, fields=fields, providers=providers
        )
    with transaction.atomic():
        project = Project(slug=data["slug"], name=data["slug"], **fields)
        _clean(project)
        project.save()
        project.providers.set(providers)
        AuditEvent.objects.create(
            actor=actor,
            action="project.create",
            object_type="project",
            object_id=str(project.pk),
            after={"slug": project.slug, "repo_path": project.repo_path},
        )
    return Updated(project, {})


@dataclass
class Updated:
    project: Project
    # Each field changed, before and after (providers by name).
    changes: dict[str, tuple[Any, Any]]


def project_update(
    *, actor, project: Project, fields: dict[str, Any], providers: list[Provider]
) -> Updated:
    """Give ``project`` the checked ``fields`` (``project_fields``) and
    ``providers``: the web form's edit and ``manage.py project_edit``.

    Checked whole by the model first (``full_clean``; ProjectInvalid when it
    refuses, and nothing is saved). One ``project.update`` audit event names
    the fields that changed, before and after; none when nothing did.
    """
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        before = {name: getattr(project, name) for name in fields}
        before["providers"] = sorted(project.providers.values_list("name", flat=True))
        for name, value in fields.items():
            setattr(project, name, value)
        _clean(project)
        project.save()
        project.providers.set(providers)
        project.refresh_from_db()
        after = {name: getattr(project, name) for name in fields}
        after["providers"] = sorted(p.name for p in providers)
        changes = {
            name: (before[name], value)
            for name, value in after.items()
            if before[name] != value
        }
        if changes:
            AuditEvent.objects.create(
                actor=actor,
                action="project.update",
                object_type="project",
                object_id=str(project.pk),
                before={name: _plain(old) for name, (old, _) in changes.items()},
                after={name: _plain(new) for name, (_, new) in changes.items()},
            )
    return Updated(project, changes)


def _clean(project: Project) -> None:
    try:
        project.full_clean()
    except ValidationError as error:
        raise refused(error) from None


def _plain(value: Any) -> Any:
    """A value as an audit event's JSON keeps it (an amount as its text)."""
    return str(value) if isinstance(value, Decimal) else value


# A budget's replicate policy, field by field (``Budget.replicate_policy``).
REPLICATE_FIELDS = (
    "replicate_threshold",
    "replicate_confidence",
    "replicate_most",
    "replicate_margin",
)


def replicates_update(
    *, actor, project: Project, policy: ReplicatePolicy | None
) -> dict[str, tuple[Any, Any]]:
    """Set the project's replicate policy (None: replicates off, the rest of
    the policy kept for when they are on again): ``project_edit
    --replicates`` and the budgets page. Audited as a budget edit, each field
    before and after; returns the changes (none: no event)."""
    with transaction.atomic():
        scheduler.budget_of(project)
        budget = Budget.objects.select_for_update().get(project=project)
        before = {name: getattr(budget, name) for name in REPLICATE_FIELDS}
        budget.replicate_threshold = policy.threshold if policy else None
        if policy is not None:
            budget.replicate_confidence = policy.confidence
            budget.replicate_most = policy.most
            budget.replicate_margin = policy.margin
        after = {name: getattr(budget, name) for name in REPLICATE_FIELDS}
        changes = {n: (before[n], after[n]) for n in after if before[n] != after[n]}
        if changes:
            budget.save(update_fields=list(changes))
            AuditEvent.objects.create(
                actor=actor,
                action="budget.update",
                object_type="project",
                object_id=str(project.pk),
                before={"budget": {n: old for n, (old, _) in changes.items()}},
                after={"budget": {n: new for n, (_, new) in changes.items()}},
            )
    return changes


# --- A project's review policy and labels (the project's Review page) -----------

POLICY_FIELDS = (
    "blind",
    "second_on_overturn",
    "second_on_verdicts",
    "gold_rate_percent",
)
LABEL_FIELDS = ("name", "kind", "categories", "required", "position")


class LabelInUse(Exception):
    """The label carries decisions' values; the message says so, in one line."""


def policy_of(project: Project) -> ReviewPolicy:
    """The project's review policy; its defaults (unsaved) when it has none."""
    return ReviewPolicy.objects.filter(project=project).first() or ReviewPolicy(
        project=project
    )


def policy_save(
    *, actor, project: Project, values: dict[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """Give ``project``'s review policy the checked ``values`` (the policy
    form's): created with them when the project has none. One
    ``policy.update`` audit event names the fields that changed, before and
    after; returns the changes (none: no event, nothing written)."""
    with transaction.atomic():
        policy = ReviewPolicy.objects.select_for_update().filter(
            project=project
        ).first() or ReviewPolicy(project=project)
        before = {name: getattr(policy, name) for name in POLICY_FIELDS}
        changes = {
            name: (before[name], values[name])
            for name in POLICY_FIELDS
            if name in values and before[name] != values[name]
        }
        if changes:
            for name, (_, new) in changes.items():
                setattr(policy, name, new)
            policy.full_clean(exclude=["project"])
            policy.save()
            AuditEvent.objects.create(
                actor=actor,
                action="policy.update",
                object_type="project",
                object_id=str(project.pk),
                before={name: old for name, (old, _) in changes.items()},
                after={name: new for name, (_, new) in changes.items()},
            )
    return changes


def _label_shown(label: Label) -> dict[str, Any]:
    return {name: getattr(label, name) for name in LABEL_FIELDS}


def label_save(
    *, actor, project: Project, values: dict[str, Any], label: Label | None = None
) -> Label:
    """Add a label to ``project`` (``label`` None) or change one, with the
    checked ``values`` (the label form's); audited as ``label.create`` or
    ``label.update`` with the fields that changed. Raises ValidationError
    (beside its field) when the model refuses them."""
    with transaction.atomic():
        if label is None:
            label = Label(project=project)
            before: dict[str, Any] = {}
        else:
            label = Label.objects.select_for_update().get(pk=label.pk, project=project)
            before = _label_shown(label)
        for name in LABEL_FIELDS:
            setattr(label, name, values[name])
        label.full_clean()
        after = _label_shown(label)
        changed = [name for name in LABEL_FIELDS if before.get(name) != after[name]]
        if not changed:
            return label
        label.save()
        AuditEvent.objects.create(
            actor=actor,
            action="label.update" if before else "label.create",
            object_type="project",
            object_id=str(project.pk),
            before={"label": label.pk, **{n: before[n] for n in changed if before}},
            after={"label": label.pk, **{n: after[n] for n in changed}},
        )
    return label


def label_uses(label: Label) -> int:
    """How many decisions recorded a value of ``label``."""
    return ReviewLabel.objects.filter(label=label).count()


def label_remove(*, actor, label: Label) -> None:
    """Remove a label no decision used, audited as ``label.delete``. A label
    with recorded values is kept (removing it would delete them): raises
    LabelInUse."""
    with transaction.atomic():
        label = Label.objects.select_for_update().get(pk=label.pk)
        if uses := label_uses(label):
            raise LabelInUse(
                f"“{label.name}” is kept: {uses} decision{'s' if uses != 1 else ''} "
                "recorded a value for it, which removing it would delete; make it "
                "optional instead."
            )
        before = {"label": label.pk, **_label_shown(label)}
        project_id = label.project_id
        label.delete()
        AuditEvent.objects.create(
            actor=actor,
            action="label.delete",
            object_type="project",
            object_id=str(project_id),
            before=before,
        )


class ProjectInUse(Exception):
    """A project with runs is kept unless its runs were confirmed; one with a
    replay running is kept until it ends."""


@dataclass(frozen=True)
class Holdings:
    """What removing a project deletes with it, counted."""

    runs: int
    replays: int
    decisions: int
    running: int


def project_holdings(project: Project) -> Holdings:
    replays = Replay.objects.filter(project=project)
    return Holdings(
        runs=project.runs.count(),
        replays=replays.count(),
        decisions=Review.objects.filter(replay__project=project).standing().count(),
        running=replays.filter(status=ReplayStatus.RUNNING).count(),
    )


def project_remove(*, actor, project: Project, runs_confirmed: int = 0) -> Holdings:
    """Remove a project with all that hangs from it (runs, replays, decisions,
    budget, labels, tokens, webhooks: every one cascades), audited as
    ``project.delete`` with what went. One holding more runs than
    ``runs_confirmed`` (the count its admin was shown and confirmed), or with
    a replay running, is kept: raises ProjectInUse."""
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        held = project_holdings(project)
        if held.running:
            raise ProjectInUse(
                f"{project.slug} is kept: {_plural(held.running, 'replay')} of it "
                f"{'is' if held.running == 1 else 'are'} running; remove it once "
                "they have ended."
            )
        if held.runs > runs_confirmed:
            raise ProjectInUse(
                f"{project.slug} is kept: it holds {_plural(held.runs, 'run')}, "
                "which removing it would delete. "
                + (
                    f"You confirmed {runs_confirmed:,}: look again first."
                    if runs_confirmed
                    else "Type its name to remove it with them."
                )
            )
        before: dict[str, Any] = {"slug": project.slug, "repo": project.repo_path}
        if held.runs:
            before |= {
                "runs": held.runs,
                "replays": held.replays,
                "decisions": held.decisions,
            }
        pk = project.pk
        project.delete()
        AuditEvent.objects.create(
            actor=actor,
            action="project.delete",
            object_type="project",
            object_id=str(pk),
            before=before,
        )
    return held


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


# --- connections: ingest tokens, the forge, webhooks ----------------------------
# The domain's workflows, each with its audit event. No event holds a secret: a
# token is named by its public prefix, a webhook by its address without path or
# query (``where``), a variable by its name.

FORGE_FIELDS = ("kind", "api_url", "repo", "token_env")


def _audit(actor, action: str, project: Project, before=None, after=None) -> None:
    AuditEvent.objects.create(
        actor=actor,
        action=action,
        object_type="project",
        object_id=str(project.pk),
        before=before or {},
        after=after or {},
    )


def connection_token_issue(
    *, actor, project: Project, rotate: bool = False
) -> tuple[IngestToken, str]:
    """``token_issue``, audited as ``ingest_token.issue`` with the prefixes
    ``rotate`` revoked. The token text is returned, never recorded."""
    with transaction.atomic():
        revoked = (
            list(
                IngestToken.objects.active()
                .filter(project=project)
                .values_list("prefix", flat=True)
            )
            if rotate
            else []
        )
        row, token = token_issue(project=project, rotate=rotate)
        _audit(
            actor,
            "ingest_token.issue",
            project,
            after={"prefix": row.prefix, "revoked": revoked},
        )
    return row, token


def connection_token_revoke(*, actor, token: IngestToken) -> None:
    """Revoke ``token`` (audited as ``ingest_token.revoke``); a revoked one
    stays as it is."""
    with transaction.atomic():
        if token.revoked_at is not None:
            return
        token.revoke()
        _audit(actor, "ingest_token.revoke", token.project, {"prefix": token.prefix})


def _forge_shown(forge: Forge | None) -> dict[str, Any]:
    return {name: getattr(forge, name) for name in FORGE_FIELDS} if forge else {}


def connection_forge_set(*, actor, project: Project, **values: str) -> Forge:
    """``forge_set`` with ``values``, audited as ``forge.update`` (before and
    after); raises OutboundInvalid and then saves nothing."""
    with transaction.atomic():
        before = _forge_shown(Forge.objects.filter(project=project).first())
        forge = forge_set(project=project, **values)
        after = _forge_shown(forge)
        if before != after:
            _audit(actor, "forge.update", project, before, after)
    return forge


def connection_forge_forget(*, actor, project: Project) -> bool:
    """Forget the project's forge (audited as ``forge.delete``); False when
    it named none."""
    with transaction.atomic():
        forge = Forge.objects.filter(project=project).first()
        if forge is None:
            return False
        forge.delete()
        _audit(actor, "forge.delete", project, before=_forge_shown(forge))
    return True


def _hook_shown(hook: Webhook) -> dict[str, Any]:
    return {
        "webhook": hook.pk,
        "to": where(hook.url),
        "events": hook.events,
        "format": hook.format,
        "secret_env": hook.secret_env,
    }


def connection_webhook_add(*, actor, project: Project, **values: Any) -> Webhook:
    """``webhook_add`` with ``values``, audited as ``webhook.create``;
    raises OutboundInvalid and then saves nothing."""
    with transaction.atomic():
        hook = webhook_add(project=project, **values)
        _audit(actor, "webhook.create", project, after=_hook_shown(hook))
    return hook


def connection_webhook_remove(*, actor, hook: Webhook) -> None:
    """Remove ``hook`` (audited as ``webhook.delete``); its deliveries go
    with it."""
    with transaction.atomic():
        shown = _hook_shown(hook)
        project = hook.project
        hook.delete()
        _audit(actor, "webhook.delete", project, before=shown)


def night_start(*, actor, project: Project) -> dict[str, Any]:
    """Open tonight's window for ``project`` now and admit its replays, as
    ``manage.py nightly --project SLUG --now`` does (and as idempotent: a
    second start admits only what the first left, saying how many were
    admitted already); audited as ``night.start`` with the figures."""
    figures = night_figures(project.slug, night_run(project=project, immediate=True))
    _audit(actor, "night.start", project, after=figures)
    return figures


def text_suite_again(*, actor, suite: TextSuite) -> TextSuite:
    """Run ``suite`` again now on a worker, as a new suite of the same
    project, models and filters; audited as ``text_suite.request``. Raises
    ``BadTarget`` when a provider it names is gone."""
    with transaction.atomic():
        again = suite_again(suite=suite, user=actor)
        return _suite_audited(actor, again, again_of=suite.pk)


def text_suite_request(
    *, actor, project: Project, target: Target, judge: Target | None, filters
) -> TextSuite:
    """A suite of ``project`` chosen on the suites page, started now on a
    worker; audited as ``text_suite.request``. Raises ``BadTarget`` for a
    provider not registered."""
    with transaction.atomic():
        suite = suite_start(
            project=project, target=target, judge=judge, filters=filters, user=actor
        )
        return _suite_audited(actor, suite, again_of=None)


def _suite_audited(actor, suite: TextSuite, *, again_of: int | None) -> TextSuite:
    after = {"suite": suite.pk, "again_of": again_of, "target": suite.target}
    after |= {"judge": suite.judge or None, "filters": suite.filters}
    _audit(actor, "text_suite.request", suite.project, after=after)
    return suite
