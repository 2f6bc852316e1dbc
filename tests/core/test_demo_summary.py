"""The demo's closing lines name every login, the admin's too: by the time the
demo's replays finish, bootstrap_admin's line has scrolled out of sight. Under
./dev run, which prints them with the URL, they say where they are saved
instead: each login is printed once."""

from __future__ import annotations

import io
from pathlib import Path

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


def test_dev_run_prints_each_login_once(settings, tmp_path):
    """./dev run prints the logins with the URL (``demo --logins-only``);
    the demo's closing lines, after its progress, then say where they are
    saved instead of printing every password a second time."""
    settings.VAR_DIR = tmp_path
    said = io.StringIO()
    call_command("bootstrap_admin", stdout=said)
    call_command("demo", "--logins-only", stdout=said)
    dev = (Path(__file__).resolve().parents[2] / "dev").read_text()
    (full_demo,) = [
        line.split("manage.py ", 1)[1].split("&")[0].split()
        for line in dev.splitlines()
        if "manage.py demo " in line and "--logins-only" not in line
    ]
    command = Command(stdout=said)
    parsed = vars(command.create_parser("manage.py", "demo").parse_args(full_demo[1:]))

    command.close(logins_shown=parsed["logins_shown"])

    out = said.getvalue()
    for person in ("reviewer", "reviewer2", "lead"):
        assert out.count(f"demo login: {person} /") == 1
    assert out.count("admin login: admin /") == 1
    assert out.splitlines()[-1] == (
        f"demo: the logins are printed above, with the URL, and saved in "
        f"{tmp_path / 'demo-logins.txt'} and {tmp_path / 'admin-password.txt'}"
    )
