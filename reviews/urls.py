from __future__ import annotations

from django.urls import include, path

from reviews import budgets, projects, rollouts, runs, views
from reviews.trends import views as trends

app_name = "reviews"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("running/", views.running, name="running"),
    path("next/", views.next_item, name="next"),
    path("replays/<int:replay_id>/", views.replay_detail, name="replay_detail"),
    path("replays/<int:replay_id>/claim/", views.replay_claim, name="replay_claim"),
    path(
        "replays/<int:replay_id>/progress/",
        views.replay_progress,
        name="replay_progress",
    ),
    path(
        "replays/<int:replay_id>/release/",
        views.replay_release,
        name="replay_release",
    ),
    path("replays/<int:replay_id>/decide/", views.replay_decide, name="replay_decide"),
    path(
        "replays/<int:replay_id>/rollout.jsonl",
        rollouts.replay_rollout_record,
        name="replay_rollout_record",
    ),
    path("reviews/<int:review_id>/undo/", views.review_undo_view, name="review_undo"),
    path(
        "replays/<int:replay_id>/diff/<slug:kind>/<int:index>/",
        views.replay_diff_file,
        name="replay_diff_file",
    ),
    path("runs/<int:run_id>/", runs.run_detail, name="run_detail"),
    path("runs/<int:run_id>/text/", runs.run_text_replay, name="run_text_replay"),
    path(
        "text-replays/<int:text_replay_id>/",
        runs.text_replay_detail,
        name="text_replay_detail",
    ),
    path("text-suites/", runs.text_suites, name="text_suites"),
    path(
        "text-suites/<int:suite_id>/",
        runs.text_suite_detail,
        name="text_suite_detail",
    ),
    path("trends/", trends.trends, name="trends"),
    path("trends/labels/", trends.trends_labels, name="trends_labels"),
    path("trends/export.csv", trends.trends_export_csv, name="trends_export_csv"),
    path("trends/export.json", trends.trends_export_json, name="trends_export_json"),
    # The same JSON as the export, for scripts; answers 401 rather than
    # redirecting (reviews' URLs are mounted at the root).
    path("api/v1/trends", trends.api_trends, name="api_trends"),
    path("budgets/", budgets.budgets_page, name="budgets"),
    path("budgets/<slug:slug>/", budgets.budget_edit, name="budget_edit"),
    path("projects/", views.projects, name="projects"),
    path("projects/new/", projects.project_create, name="project_create"),
    # A project's slug may hold any character (``path``); the longer routes
    # come first so the page's own route does not swallow them.
    path("projects/<path:slug>/edit/", projects.project_edit, name="project_edit"),
    path(
        "projects/<path:slug>/runs/<int:run_id>/replay/",
        projects.run_replay_now,
        name="run_replay_now",
    ),
    path("projects/<path:slug>/", projects.project_detail, name="project_detail"),
    path("status/", views.status, name="status"),
    path("", include("reviews.team_urls")),
    path(
        "status/worker-checks/", views.worker_check_create, name="worker_check_create"
    ),
    path(
        "status/worker-checks/<int:check_id>/",
        views.worker_check_detail,
        name="worker_check_detail",
    ),
]
