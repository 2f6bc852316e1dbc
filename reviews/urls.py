"""The people's pages, grouped by the prefix of their address."""

from __future__ import annotations

from django.urls import include, path

from reviews.replay_page import continuations
from reviews.replay_page.views import (
    replay_claim,
    replay_decide,
    replay_detail,
    replay_diff_file,
    replay_progress,
    replay_release,
    replay_tape,
    review_undo_view,
)
from reviews.trends.views import (
    api_trends,
    trends,
    trends_export_csv,
    trends_export_json,
    trends_labels,
    trends_reproducibility,
)
from reviews.views import (
    budgets,
    connections,
    night_start,
    projects,
    provider_pages,
    queue,
    review_settings,
    runs,
    status,
)

app_name = "reviews"

replay_urls = [
    path("", replay_detail, name="replay_detail"),
    path("claim/", replay_claim, name="replay_claim"),
    path("progress/", replay_progress, name="replay_progress"),
    path("release/", replay_release, name="replay_release"),
    path("decide/", replay_decide, name="replay_decide"),
    path("tape/", replay_tape, name="replay_tape"),
    path(
        "rollout.jsonl",
        continuations.replay_rollout_record,
        name="replay_rollout_record",
    ),
    path(
        "diff/<slug:kind>/<int:index>/",
        replay_diff_file,
        name="replay_diff_file",
    ),
]

run_urls = [
    path("<int:run_id>/", runs.run_detail, name="run_detail"),
    path("<int:run_id>/text/", runs.run_text_replay, name="run_text_replay"),
    path("<int:run_id>/tape/", runs.run_tape_replay, name="run_tape_replay"),
]

text_urls = [
    path(
        "text-replays/<int:text_replay_id>/",
        runs.text_replay_detail,
        name="text_replay_detail",
    ),
    path("text-suites/", runs.text_suites, name="text_suites"),
    path("text-suites/new/", runs.text_suite_new, name="text_suite_new"),
    path("text-suites/<int:suite_id>/run/", runs.text_suite_run, name="text_suite_run"),
    path(
        "text-suites/<int:suite_id>/",
        runs.text_suite_detail,
        name="text_suite_detail",
    ),
]

trends_urls = [
    path("", trends, name="trends"),
    path("labels/", trends_labels, name="trends_labels"),
    path("reproducibility/", trends_reproducibility, name="trends_reproducibility"),
    path("export.csv", trends_export_csv, name="trends_export_csv"),
    path("export.json", trends_export_json, name="trends_export_json"),
]

budget_urls = [
    path("", budgets.budgets_page, name="budgets"),
    path("<slug:slug>/", budgets.budget_edit, name="budget_edit"),
    path(
        "<slug:slug>/night/",
        night_start.budget_night_start,
        name="budget_night_start",
    ),
]

# A project's slug may hold any character (``path``); the longer routes come
# first so the page's own route does not swallow them.
project_urls = [
    path("", projects.project_list, name="projects"),
    path("new/", projects.project_create, name="project_create"),
    path("<path:slug>/edit/", projects.project_edit, name="project_edit"),
    path("<path:slug>/review/", review_settings.project_review, name="project_review"),
    path(
        "<path:slug>/connections/",
        connections.project_connections,
        name="project_connections",
    ),
    path(
        "<path:slug>/review/labels/<int:label_id>/",
        review_settings.project_label_edit,
        name="project_label_edit",
    ),
    path(
        "<path:slug>/review/labels/<int:label_id>/remove/",
        review_settings.project_label_remove,
        name="project_label_remove",
    ),
    path("<path:slug>/remove/", projects.project_delete, name="project_remove"),
    path(
        "<path:slug>/runs/<int:run_id>/replay/",
        projects.run_replay_now,
        name="run_replay_now",
    ),
    path("<path:slug>/", projects.project_detail, name="project_detail"),
]

provider_urls = [
    path("", provider_pages.providers, name="providers"),
    path("<slug:name>/edit/", provider_pages.provider_edit, name="provider_edit"),
    path("<slug:name>/remove/", provider_pages.provider_remove, name="provider_remove"),
]

status_urls = [
    path("", status.status, name="status"),
    path("worker-checks/", status.worker_check_create, name="worker_check_create"),
    path(
        "worker-checks/<int:check_id>/",
        status.worker_check_detail,
        name="worker_check_detail",
    ),
]

urlpatterns = [
    path("", queue.queue, name="queue"),
    path("running/", queue.running, name="running"),
    path("next/", queue.next_item, name="next"),
    path("replays/<int:replay_id>/", include(replay_urls)),
    path("reviews/<int:review_id>/undo/", review_undo_view, name="review_undo"),
    path("runs/", include(run_urls)),
    path("", include(text_urls)),
    path("trends/", include(trends_urls)),
    # The same JSON as the export, for scripts; answers 401 rather than
    # redirecting (reviews' URLs are mounted at the root).
    path("api/v1/trends", api_trends, name="api_trends"),
    path("budgets/", include(budget_urls)),
    path("projects/", include(project_urls)),
    path("providers/", include(provider_urls)),
    path("status/", include(status_urls)),
    path("", include("reviews.together.urls")),
]
