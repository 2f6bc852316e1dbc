"""Working together: comments, second opinions, gold, hand-off, history, inbox."""

from __future__ import annotations

from django.urls import path

from reviews import teamviews as views

urlpatterns = [
    path(
        "replays/<int:replay_id>/comments/",
        views.comment_create,
        name="comment_create",
    ),
    path("comments/<int:comment_id>/reply/", views.comment_reply, name="comment_reply"),
    path(
        "comments/<int:comment_id>/resolve/",
        views.comment_resolve,
        name="comment_resolve",
    ),
    path(
        "replays/<int:replay_id>/second-opinion/",
        views.second_opinion,
        name="second_opinion",
    ),
    path("replays/<int:replay_id>/gold/", views.gold_toggle, name="gold_toggle"),
    path("replays/<int:replay_id>/assign/", views.claim_assign, name="claim_assign"),
    path("done/", views.done, name="done"),
    path("search/", views.search, name="search"),
    path("bulk-confirm/", views.bulk, name="bulk"),
    path("agreement/", views.agreement, name="agreement"),
    path("inbox/", views.inbox, name="inbox"),
    path("inbox/read/", views.inbox_read, name="inbox_read"),
]
