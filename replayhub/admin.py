from django.contrib import admin

from .models import (
    Budget,
    Comparison,
    Night,
    Project,
    Replay,
    Run,
    TestOutcome,
    WorkerCheck,
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
    inlines = [BudgetInline]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "external_id",
        "project",
        "title",
        "model",
        "preflight",
        "imported_at",
    ]
    list_filter = ["project", "preflight", "provider", "model"]
    search_fields = ["external_id", "title", "original_commit"]
    date_hierarchy = "imported_at"
    list_select_related = ["project"]
    readonly_fields = ["raw", "record_sha256", "provenance"]
    show_full_result_count = False


class TestOutcomeInline(admin.TabularInline):
    model = TestOutcome
    extra = 0
    fields = [
        "tree",
        "attempt",
        "ran",
        "passed",
        "exit_code",
        "tests_executed",
        "timed_out",
    ]
    readonly_fields = fields
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


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = [
        "project",
        "max_replays",
        "max_sandbox_minutes",
        "max_tokens",
        "max_cost_usd",
        "window_start_hour",
        "window_end_hour",
        "timezone",
    ]


@admin.register(Night)
class NightAdmin(admin.ModelAdmin):
    list_display = [
        "project",
        "date",
        "status",
        "reserved_replays",
        "used_replays",
        "limit_replays",
        "deferred",
    ]
    list_filter = ["status", "project"]
    date_hierarchy = "date"


@admin.register(WorkerCheck)
class WorkerCheckAdmin(admin.ModelAdmin):
    list_display = ["id", "requested_by", "requested_at", "answered_at", "worker"]
