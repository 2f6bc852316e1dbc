"""Working together: comments, second opinions, gold, hand-off, the Done tab,
search, bulk confirm, agreement and the inbox; grouped by prefix."""

from __future__ import annotations

from django.urls import include, path

from reviews.together import views

replay_urls = [
    path("comments/", views.comment_create, name="comment_create"),
    path("comments/new/", views.comment_new, name="comment_new"),
    path("comments/people/", views.comment_people, name="comment_people"),
    path("second-opinion/", views.second_opinion, name="second_opinion"),
    path("gold/", views.gold_toggle, name="gold_toggle"),
    path("assign/", views.claim_assign, name="claim_assign"),
]

comment_urls = [
    path("reply/", views.comment_reply, name="comment_reply"),
    path("resolve/", views.comment_resolve, name="comment_resolve"),
]

inbox_urls = [
    path("", views.inbox, name="inbox"),
    path("read/", views.inbox_read, name="inbox_read"),
]

urlpatterns = [
    path("replays/<int:replay_id>/", include(replay_urls)),
    path("comments/<int:comment_id>/", include(comment_urls)),
    path("done/", views.done, name="done"),
    path("search/", views.search, name="search"),
    path("bulk-confirm/", views.bulk, name="bulk"),
    path("agreement/", views.agreement, name="agreement"),
    path("inbox/", include(inbox_urls)),
]
