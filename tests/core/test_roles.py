"""Roles and the app-wide permissions they grant."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

from replayhub import roles
from reviews.models import Ability


def test_app_wide_permissions_are_declared_on_the_ability_model(db):
    declared = {codename for codename, _ in Ability._meta.permissions}
    assert declared == {codename for codename, _ in roles.ABILITIES}
    held = Permission.objects.filter(codename__in=declared)
    assert {(p.content_type.app_label, p.content_type.model) for p in held} == {
        ("reviews", "ability")
    }
    assert not Ability._meta.managed


def test_each_role_holds_what_the_roles_module_names(db):
    for role, names in roles.ROLE_PERMISSIONS.items():
        held = {
            f"{p.content_type.app_label}.{p.codename}"
            for p in Group.objects.get(name=role).permissions.all()
        }
        if role == roles.ADMIN:
            assert {roles.DECIDE, roles.VIEW_TRENDS, roles.VIEW_MONEY} <= held
            assert "replayhub.change_project" in held
        else:
            assert held == set(names)


def test_reviewers_decide_and_leads_read_trends_and_money(reviewer, lead):
    assert reviewer.has_perm(roles.DECIDE)
    assert not reviewer.has_perm(roles.VIEW_MONEY)
    assert lead.has_perm(roles.VIEW_TRENDS) and lead.has_perm(roles.VIEW_MONEY)
    assert not lead.has_perm(roles.DECIDE)


def test_syncing_the_groups_leaves_every_apps_models_module_as_it_was(db):
    from django.apps import apps

    before = {config.label: config.models_module for config in apps.get_app_configs()}

    roles.sync_groups(apps)

    after = {config.label: config.models_module for config in apps.get_app_configs()}
    # Without its models module, migrate --run-syncdb makes no table for an app.
    assert after == before and after["contenttypes"] is not None


def test_the_roles_stand_again_after_a_flush(transactional_db):
    """``manage.py flush`` empties every table, the groups the data migration
    made included; like Django's permissions, they are made again after it."""
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)

    for role, names in roles.ROLE_PERMISSIONS.items():
        held = Group.objects.get(name=role).permissions.count()
        assert held >= max(len(names), 1), role
