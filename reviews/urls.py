from django.urls import path

from . import budgets, views

app_name = "reviews"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("running/", views.running, name="running"),
    path("next/", views.next_item, name="next"),
    path("replays/<int:replay_id>/", views.replay_detail, name="replay_detail"),
    path("replays/<int:replay_id>/claim/", views.replay_claim, name="replay_claim"),
    path(
        "replays/<int:replay_id>/release/",
        views.replay_release,
        name="replay_release",
    ),
    path("replays/<int:replay_id>/decide/", views.replay_decide, name="replay_decide"),
    path(
        "replays/<int:replay_id>/diff/<slug:kind>/<int:index>/",
        views.replay_diff_file,
        name="replay_diff_file",
    ),
    path("trends/", views.trends, name="trends"),
    path("budgets/", budgets.budgets_page, name="budgets"),
    path("budgets/<slug:slug>/", budgets.budget_edit, name="budget_edit"),
    path("projects/", views.projects, name="projects"),
    path("status/", views.status, name="status"),
    path(
        "status/worker-checks/", views.worker_check_create, name="worker_check_create"
    ),
    path(
        "status/worker-checks/<int:check_id>/",
        views.worker_check_detail,
        name="worker_check_detail",
    ),
]
