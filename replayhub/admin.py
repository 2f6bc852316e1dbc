from __future__ import annotations

import json

from django.contrib import admin, messages
from django.db import models
from django.utils import timezone
from django.utils.html import format_html

from replayhub.models import (
    Budget,
    BudgetShare,
    Comparison,
    EgressAttempt,
    FollowedFile,
    FollowSource,
    ImportJob,
    IngestToken,
    ModelCall,
    Night,
    NightShare,
    Project,
    Provider,
    Replay,
    Rollup,
    Run,
    Seed,
    TestOutcome,
    TextReplay,
    TextSuite,
    WorkerCheck,
)
from replayhub.nights.tiers import SHARE_TIERS
from replayhub.rollouts.verifier import UNVERIFIED_WARNING, rewards_unverified

# Tuples, here and below: to the stubs a tuple of names is also a tuple of field
# groups, where a list[str] is no list of groups (lists are invariant).
ROLLOUT_FIELDS = (
    "harness_command",
    "verifier_command",
    "rollout_mode",
    "rollout_anchor",
    "max_anchors",
    "min_source_reward",
    "max_source_reward",
    "pass_threshold",
    "verification_turn",
    "rollout_seed",
    "max_seed_tokens",
)


class BudgetInline(admin.StackedInline):
    model = Budget
    can_delete = False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "repo_path",
        "runner",
        "time_limit_seconds",
        "agentic_enabled",
    ]
    list_filter = ["runner", "agentic_enabled"]
    search_fields = ["slug", "name", "repo_path"]
    filter_horizontal = ["providers"]
    inlines = [BudgetInline]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    f.name
                    for f in [
                        *Project._meta.concrete_fields,
                        *Project._meta.many_to_many,
                    ]
                    if f.editable and not f.primary_key and f.name not in ROLLOUT_FIELDS
                ]
            },
        ),
        (
            "Rollouts",
            {
                "description": "For verifiers rollout records: how seeds are "
                "derived from a rollout and how its replays are judged.",
                "fields": ROLLOUT_FIELDS,
            },
        ),
    ]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if rewards_unverified(obj):
            messages.warning(
                request,
                f"Project {obj.slug} {UNVERIFIED_WARNING} Set a verifier command to "
                "score them in a sandbox of their own.",
            )


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    """Keys are never here: only the name of the workers' variable holding one."""

    list_display = ["name", "kind", "base_url", "key_env"]
    list_filter = ["kind"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    search_fields = ["name", "base_url"]


@admin.register(ModelCall)
class ModelCallAdmin(admin.ModelAdmin):
    list_display = [
        "replay",
        "provider",
        "model_requested",
        "model_answered",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "status",
    ]
    list_filter = ["provider", "status"]
    list_select_related = ["replay"]
    raw_id_fields = ["replay"]


@admin.register(EgressAttempt)
class EgressAttemptAdmin(admin.ModelAdmin):
    list_display = ["replay", "phase", "host", "port", "allowed", "outcome"]
    list_filter = ["phase", "allowed", "outcome"]
    search_fields = ["host"]
    raw_id_fields = ["replay"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "external_id",
        "project",
        "source",
        "title",
        "model",
        "preflight",
        "imported_at",
    ]
    list_filter = ["project", "source", "preflight", "provider", "model"]
    search_fields = ["external_id", "title", "original_commit"]
    date_hierarchy = "imported_at"
    list_select_related = ["project"]
    exclude = ["raw"]
    readonly_fields = ["record", "record_sha256", "provenance"]
    show_full_result_count = False

    @admin.display(description="record as received")
    def record(self, run: Run) -> str:
        text = json.dumps(run.record, indent=2, ensure_ascii=False, sort_keys=True)
        return format_html('<pre class="readonly">{}</pre>', text)


TEST_OUTCOME_FIELDS = (
    "tree",
    "attempt",
    "ran",
    "passed",
    "exit_code",
    "tests_executed",
    "timed_out",
)


class TestOutcomeInline(admin.TabularInline):
    model = TestOutcome
    extra = 0
    fields = TEST_OUTCOME_FIELDS
    readonly_fields = TEST_OUTCOME_FIELDS
    can_delete = False


@admin.register(Replay)
class ReplayAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "run",
        "project",
        "tier",
        "status",
        "phase",
        "verdict",
        "reason_code",
        "attempt",
        "created_at",
    ]
    list_filter = ["status", "verdict", "reason_code", "tier", "trigger", "project"]
    search_fields = ["run__external_id", "reason"]
    list_select_related = ["run", "project"]
    raw_id_fields = ["run", "requested_by"]
    inlines = [TestOutcomeInline]
    show_full_result_count = False


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = [
        "replay",
        "identical",
        "files_changed",
        "insertions",
        "deletions",
        "truncated",
    ]
    list_filter = ["identical", "truncated"]
    raw_id_fields = ["replay"]


@admin.register(TestOutcome)
class TestOutcomeAdmin(admin.ModelAdmin):
    list_display = [
        "replay",
        "tree",
        "attempt",
        "ran",
        "passed",
        "exit_code",
        "tests_executed",
    ]
    list_filter = ["tree", "ran", "passed", "timed_out"]
    raw_id_fields = ["replay"]


class BudgetShareInline(admin.TabularInline):
    """Each tier's share of the night: a row per tier, the tier's own
    dimensions set (``tiers.BUDGETED``), the others left at zero."""

    model = BudgetShare
    extra = 0
    max_num = len(SHARE_TIERS)
    fields = [
        "tier",
        "max_replays",
        "max_sandbox_minutes",
        "max_tokens",
        "max_cost_usd",
    ]


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = [
        "project",
        "window_start_hour",
        "window_end_hour",
        "timezone",
        "text_enabled",
        "text_target",
        "tape_enabled",
    ]
    inlines = [BudgetShareInline]
    fieldsets = [
        (
            "Night",
            {"fields": ["project", "window_start_hour", "window_end_hour", "timezone"]},
        ),
        (
            "Text tier, before the agentic tier",
            {
                "fields": [
                    "text_enabled",
                    "text_target",
                    "text_judge",
                    "agentic_after_text",
                    "text_similarity_below",
                    "text_score_at_most",
                    "escalate_categories",
                ]
            },
        ),
        (
            "Tape tier, before the others (runs with a tape; no model spend)",
            {"fields": ["tape_enabled"]},
        ),
    ]


class NightShareInline(admin.TabularInline):
    """What each tier may spend tonight, has reserved and has used: written
    by admission and settlement, read here."""

    model = NightShare
    extra = 0
    can_delete = False
    readonly_fields = [
        f.name
        for f in NightShare._meta.concrete_fields
        if f.name not in ("id", "night")
    ]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Night)
class NightAdmin(admin.ModelAdmin):
    list_display = ["project", "date", "status", "window_start", "window_end"]
    list_filter = ["status", "project"]
    date_hierarchy = "date"
    inlines = [NightShareInline]


@admin.register(WorkerCheck)
class WorkerCheckAdmin(admin.ModelAdmin):
    list_display = ["id", "requested_by", "requested_at", "answered_at", "worker"]


@admin.register(IngestToken)
class IngestTokenAdmin(admin.ModelAdmin):
    """Tokens are listed and revoked here. They are issued on a project's
    connections page, which shows the secret once, in its own answer: a
    message here would travel to the browser in a cookie."""

    list_display = ["prefix", "project", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["project", ("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["project"]
    search_fields = ["prefix", "project__slug"]
    actions = ["revoke"]
    readonly_fields = ["project", "prefix", "created_at", "last_used_at", "revoked_at"]
    fields = list(readonly_fields)

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        self.message_user(request, f"Revoked {count} token(s).")


@admin.register(Rollup)
class RollupAdmin(admin.ModelAdmin):
    list_display = [
        "date",
        "project",
        "model",
        "attempted",
        "identical",
        "equivalent",
        "divergent",
        "inconclusive",
        "deferred",
    ]
    list_filter = ["project"]
    date_hierarchy = "date"

    # Computed from the replays (``manage.py rollup`` recomputes them), and
    # summed into the all-projects totals as they are written: never by hand.
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ["filename", "project", "status", "imported", "created_at"]
    list_filter = ["status", "project"]
    list_select_related = ["project"]
    readonly_fields = [f.name for f in ImportJob._meta.fields]


@admin.register(Seed)
class SeedAdmin(admin.ModelAdmin):
    list_display = ["run", "number", "kind", "anchor", "anchor_node", "token_count"]
    list_filter = ["kind", "anchor"]
    list_select_related = ["run__project"]
    search_fields = ["key"]
    raw_id_fields = ["run"]
    readonly_fields = [f.name for f in Seed._meta.fields if f.name != "id"]


class FollowedFileInline(admin.TabularInline):
    model = FollowedFile
    extra = 0
    can_delete = False
    readonly_fields = [f.name for f in FollowedFile._meta.fields if f.name != "id"]


@admin.register(FollowSource)
class FollowSourceAdmin(admin.ModelAdmin):
    list_display = ["pattern", "project", "enabled", "last_pass_at"]
    list_filter = ["enabled", "project"]
    readonly_fields = ["last_pass_at", "last_summary"]
    inlines = [FollowedFileInline]


@admin.register(TextReplay)
class TextReplayAdmin(admin.ModelAdmin):
    """The text tier's attempts; never a reproduction verdict."""

    list_display = [
        "id",
        "run",
        "target_model",
        "status",
        "similarity",
        "equivalence_score",
        "error",
        "created_at",
    ]
    list_filter = ["status", "trigger", "target_provider", "project"]
    list_select_related = ["run"]
    raw_id_fields = ["run", "suite", "night", "requested_by"]


@admin.register(TextSuite)
class TextSuiteAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "project",
        "target",
        "replayed",
        "failed",
        "mean_similarity",
        "created_at",
    ]
    list_filter = ["project"]
