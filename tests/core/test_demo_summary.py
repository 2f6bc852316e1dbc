"""The demo's closing lines name every login, the admin's too: by the time the
demo's replays finish, bootstrap_admin's line has scrolled out of sight."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from replayhub.management.commands.demo import Command

pytestmark = pytest.mark.django_db


def test_the_closing_lines_name_the_admin_login_with_the_demo_ones(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    first = io.StringIO()
    call_command("bootstrap_admin", stdout=first)
    admin_line = first.getvalue().strip()
    assert admin_line.startswith("admin login: admin / ")

    out = io.StringIO()
    command = Command(stdout=out)
    command.print_logins()
    command.print_admin_login()

    lines = out.getvalue().splitlines()
    assert [line.split(" /")[0] for line in lines if " / " in line] == [
        "demo login: reviewer",
        "demo login: reviewer2",
        "demo login: lead",
        "admin login: admin",
    ]
    assert admin_line in lines


def test_without_the_saved_password_it_says_an_admin_exists(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("bootstrap_admin", stdout=io.StringIO())
    (tmp_path / "admin-password.txt").unlink()
    out = io.StringIO()
    Command(stdout=out).print_admin_login()
    assert out.getvalue() == "admin login: an administrator created before the demo\n"
