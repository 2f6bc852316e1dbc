"""The inbox: a reviewer who is mentioned or handed a replay hears of it.

E-mail is optional (``REPLAYHUB_NOTICE_EMAIL``) and goes through Django's mail
settings after the transaction commits; a mail server that fails never undoes
the comment or the assignment that caused the notice.
"""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from replayhub import roles
from replayhub.models import Replay
from reviews.models import Notice
from reviews.together.blind import hidden_from

log = logging.getLogger(__name__)

# "@name" where name is a Django username; not the middle of an e-mail address.
MENTION = re.compile(r"(?<![\w.@+-])@([\w.@+-]*[\w])")


def mentioned(text: str) -> list[str]:
    """The usernames ``text`` mentions, in order, each once."""
    seen: dict[str, None] = {}
    for name in MENTION.findall(text):
        seen.setdefault(name, None)
    return list(seen)


def mentioned_users(text: str, *, exclude=None) -> list:
    names = mentioned(text)
    if not names:
        return []
    users = get_user_model().objects.filter(username__in=names, is_active=True)
    if exclude is not None:
        users = users.exclude(pk=exclude.pk)
    return list(users.order_by("username"))


def mentionable() -> list[str]:
    """The usernames a comment may mention: active people who comment or decide."""
    # One query for what has_perm would ask user by user.
    wanted = [tuple(perm.split(".", 1)) for perm in (roles.COMMENT, roles.DECIDE)]
    through = Q(is_superuser=True)
    for app_label, codename in wanted:
        for via in ("groups__permissions", "user_permissions"):
            through |= Q(
                **{
                    f"{via}__content_type__app_label": app_label,
                    f"{via}__codename": codename,
                }
            )
    users = get_user_model().objects.filter(through, is_active=True).distinct()
    return list(users.order_by("username").values_list("username", flat=True))


def unknown_mentions(text: str) -> list[str]:
    """The names ``text`` mentions that belong to nobody it may mention."""
    names = mentioned(text)
    if not names:
        return []
    known = set(mentionable())
    return [name for name in names if name not in known]


def notify(
    *,
    user,
    actor,
    kind: str,
    replay_id: int,
    text: str,
    thread_id: int | None = None,
    blind_text: str = "",
) -> Notice:
    """A notice for ``user``, mailed too when notices go by mail.
    ``blind_text`` is what the mail says instead of ``text`` to a reviewer
    the replay's blind review still keeps it from (the inbox hides it the
    same way)."""
    notice = Notice.objects.create(
        user=user,
        actor=actor,
        kind=kind,
        replay_id=replay_id,
        thread_id=thread_id,
        text=text[:300],
    )
    if settings.REPLAYHUB_NOTICE_EMAIL and user.email:
        if blind_text and _blind_to(user, replay_id):
            text = blind_text
        link = reverse("reviews:replay_detail", args=[replay_id])
        if notice.anchor:
            link = f"{link}#{notice.anchor}"
        transaction.on_commit(
            lambda: _mail(user.email, f"ReplayHub: {text[:120]}", f"{text}\n\n{link}")
        )
    return notice


def _blind_to(user, replay_id: int) -> bool:
    project_id = Replay.objects.values_list("project_id", flat=True).get(pk=replay_id)
    return bool(hidden_from(user, [(replay_id, project_id)]))


def _mail(to: str, subject: str, body: str) -> None:
    try:
        send_mail(subject, body, None, [to])
    except Exception:  # a mail outage never breaks the action that caused it
        log.exception("could not send a notice to %s", to)


def notices_read(
    *, user, replay_id: int | None = None, notice_id: int | None = None
) -> int:
    """Mark ``user``'s unread notices read: all of them, one, or a replay's.

    Opening a replay is reading what was said about it, so the replay page
    calls this with its id before the badge is drawn. Returns how many changed.
    """
    rows = Notice.objects.filter(user=user, read_at__isnull=True)
    if replay_id is not None:
        rows = rows.filter(replay_id=replay_id)
    if notice_id is not None:
        rows = rows.filter(pk=notice_id)
    return rows.update(read_at=timezone.now())


def unread_count(user) -> int:
    return Notice.objects.filter(user=user, read_at__isnull=True).count()


def inbox(request) -> dict:
    """Context processor: the unread count for the inbox badge."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"inbox_unread": unread_count(user)}
