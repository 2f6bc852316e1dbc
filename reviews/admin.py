from __future__ import annotations

from django.contrib import admin

from reviews.models import (
    AuditEvent,
    Claim,
    Comment,
    GoldItem,
    Label,
    Review,
    ReviewPolicy,
)


@admin.register(Claim)
class ClaimAdmin(admin.ModelAdmin):
    list_display = ["replay", "reviewer", "claimed_at", "expires_at"]
    raw_id_fields = ["replay"]


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = [
        "replay",
        "reviewer",
        "decision",
        "verdict_before",
        "verdict_after",
        "created_at",
    ]
    list_filter = ["decision", "verdict_before", "verdict_after"]
    raw_id_fields = ["replay"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the audit trail is append-only, even for admins."""

    list_display = ["created_at", "actor", "action", "object_type", "object_id"]
    list_filter = ["action", "object_type"]
    search_fields = ["object_id"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ReviewPolicy)
class ReviewPolicyAdmin(admin.ModelAdmin):
    """A project's review rules, and the labels its decisions carry."""

    list_display = [
        "project",
        "blind",
        "second_on_overturn",
        "second_on_verdicts",
        "gold_rate_percent",
    ]
    fields = [
        "project",
        "blind",
        "second_on_overturn",
        "second_on_verdicts",
        "gold_rate_percent",
    ]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        AuditEvent.objects.create(
            actor=request.user,
            action="policy.update" if change else "policy.create",
            object_type="project",
            object_id=str(obj.project_id),
            after={name: form.cleaned_data.get(name) for name in form.changed_data},
        )


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["project", "name", "kind", "required", "position"]
    list_filter = ["project", "kind", "required"]


@admin.register(GoldItem)
class GoldItemAdmin(admin.ModelAdmin):
    list_display = ["replay", "verdict", "band", "active", "marked_by", "marked_at"]
    list_filter = ["active", "verdict"]
    raw_id_fields = ["replay"]


@admin.register(Comment)
class CommentAdmin(admin.ModelAdmin):
    list_display = ["replay", "author", "target", "path", "line_start", "created_at"]
    raw_id_fields = ["replay", "parent"]
    search_fields = ["body"]
