from __future__ import annotations

from replayhub import roles


def user_roles(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "can_decide": user.has_perm(roles.DECIDE),
        "can_view_trends": user.has_perm(roles.VIEW_TRENDS),
        "can_view_money": user.has_perm(roles.VIEW_MONEY),
        "can_manage_budgets": user.has_perm(roles.MANAGE_BUDGETS),
        "can_upload": user.has_perm("replayhub.add_run"),
        "user_role": roles.role_of(user),
    }
