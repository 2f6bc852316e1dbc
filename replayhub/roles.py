"""The three roles and what each may do, as Django groups and permissions.

Views check permissions (``user.has_perm``), never group names, so an admin can
grant a single ability to one person without inventing a role.

Most permissions are Django's per-model ones (``replayhub.view_replay``). The
app-wide abilities below belong to no model's rows; ``reviews.models.Ability``
(a model without a table) carries them, so they are named ``reviews.<codename>``.
"""

from __future__ import annotations

REVIEWER = "reviewer"
LEAD = "lead"
ADMIN = "admin"

ABILITIES = [
    ("decide_replay", "Can confirm, overturn or rerun a replay"),
    ("view_trends", "Can read the trends dashboard"),
    ("view_money", "Can see money budgets and costs"),
    ("view_agreement", "Can read reviewer agreement and everyone's decisions"),
    ("manage_claims", "Can release or reassign anyone's claim"),
    ("manage_gold", "Can mark decided replays as gold items"),
    ("bulk_confirm", "Can confirm a filtered set of replays at once"),
]

_READ = [
    "replayhub.view_project",
    "replayhub.view_run",
    "replayhub.view_replay",
    "replayhub.view_comparison",
    "replayhub.view_testoutcome",
    "replayhub.view_budget",
    "replayhub.view_night",
    "reviews.view_claim",
    "reviews.view_review",
    "reviews.view_auditevent",
    "reviews.view_comment",
    "reviews.add_comment",
]

ROLE_PERMISSIONS: dict[str, list[str]] = {
    REVIEWER: [*_READ, "reviews.decide_replay", "reviews.bulk_confirm"],
    LEAD: [
        *_READ,
        "reviews.view_trends",
        "reviews.view_money",
        "reviews.view_agreement",
    ],
    # Admins get every permission of both apps (granted in the migration).
    ADMIN: [],
}

DECIDE = "reviews.decide_replay"
VIEW_TRENDS = "reviews.view_trends"
VIEW_MONEY = "reviews.view_money"
VIEW_AGREEMENT = "reviews.view_agreement"
MANAGE_CLAIMS = "reviews.manage_claims"
MANAGE_GOLD = "reviews.manage_gold"
BULK_CONFIRM = "reviews.bulk_confirm"
COMMENT = "reviews.add_comment"
MANAGE_BUDGETS = "replayhub.change_budget"
MANAGE_PROJECTS = "replayhub.change_project"
VIEW_REPLAYS = "replayhub.view_replay"
VIEW_BUDGETS = "replayhub.view_budget"
VIEW_PROJECTS = "replayhub.view_project"


def role_of(user) -> str:
    """The highest role a user holds, for display only."""
    if user.is_superuser:
        return ADMIN
    names = set(user.groups.values_list("name", flat=True))
    for role in (ADMIN, LEAD, REVIEWER):
        if role in names:
            return role
    return ""


def sync_groups(apps, schema_editor=None) -> None:
    """Create or refresh the role groups; a migration calls it after schema changes.

    Admins receive every permission of both apps as they stand, so a later
    migration that adds a model calls this again.
    """
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after all migrations ran; they must
    # exist now so the groups can reference them on a fresh database.
    # A migration's historical apps have no models module; the registry's own
    # apps keep theirs (without one, migrate --run-syncdb skips the app).
    for app_config in apps.get_app_configs():
        kept = app_config.models_module
        app_config.models_module = kept or True
        try:
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = kept
    set_groups(apps)


def set_groups(apps=None, **kwargs) -> None:
    """The role groups with their permissions, the permissions being there.

    Also after every ``post_migrate`` of the last app (``reviews.apps``): a
    ``manage.py flush`` empties the groups the data migration made, as it
    does the permissions Django then makes again; this makes the roles again
    (a flush names no ``apps``: the registry's own)."""
    if apps is None:
        from django.apps import apps
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    for role, names in ROLE_PERMISSIONS.items():
        group, _ = group_model.objects.get_or_create(name=role)
        if role == ADMIN:
            perms = permission_model.objects.filter(
                content_type__app_label__in=["replayhub", "reviews"]
            )
        else:
            perms = [
                permission_model.objects.get(
                    content_type__app_label=name.split(".")[0],
                    codename=name.split(".")[1],
                )
                for name in names
            ]
        group.permissions.set(perms)
