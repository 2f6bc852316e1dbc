from __future__ import annotations

from django.contrib import admin

from .models import AuditEvent, Claim, Review


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
