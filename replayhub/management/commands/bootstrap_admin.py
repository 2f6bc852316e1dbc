from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from replayhub.roles import ADMIN


class Command(BaseCommand):
    help = "Create the first admin login if there is none, and print how to log in."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username, **options):
        user_model = get_user_model()
        secret_file = settings.VAR_DIR / "admin-password.txt"
        if user_model.objects.filter(is_superuser=True).exists():
            hint = f" (password in {secret_file})" if secret_file.exists() else ""
            self.stdout.write(f"admin login: an administrator already exists{hint}")
            return
        password = secrets.token_urlsafe(12)
        user = user_model.objects.create_superuser(username=username, password=password)
        user.groups.add(Group.objects.get(name=ADMIN))
        secret_file.write_text(f"{username} {password}\n")
        secret_file.chmod(0o600)
        self.stdout.write(
            f"admin login: {username} / {password}  (saved in {secret_file})"
        )
