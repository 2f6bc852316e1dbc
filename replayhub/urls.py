from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path

from replayhub import api, health
from replayhub.attest.views import (
    ReviewSide,
    attestation_key,
    commit_verdict,
    replay_attestation,
)
from replayhub.recorder.views import recorder_download
from reviews.api import replay_detail, run_detail
from reviews.together.blind import hidden_from
from reviews.together.past import with_settled
from reviews.views import upload

admin.site.site_header = "ReplayHub administration"
admin.site.site_title = "ReplayHub"


@login_not_required
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page links: send them to it."""
    return HttpResponseRedirect(static("replayhub/favicon.ico"))


REVIEW_SIDE = ReviewSide(hidden_from=hidden_from, with_settled=with_settled)

urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("", include("reviews.urls")),
    # Ingest: the HTTP API (token auth for pushes, session for reads) and the
    # upload page.
    path(
        "api/v1/projects/<slug:slug>/runs",
        api.runs_create,
        name="api_runs_create",
    ),
    path(
        "api/v1/projects/<slug:slug>/import-jobs/<int:job_id>",
        api.import_job,
        name="api_import_job",
    ),
    path("api/v1/runs/<int:run_id>", run_detail, name="api_run_detail"),
    path("api/v1/runs/<int:run_id>/atif", api.run_atif, name="api_run_atif"),
    path(
        "api/v1/replays/<int:replay_id>",
        replay_detail,
        name="api_replay_detail",
    ),
    path(
        "api/v1/replays/<int:replay_id>/atif",
        api.replay_atif,
        name="api_replay_atif",
    ),
    # Signed attestations and the commit gate (docs/attestations.md); the
    # review app's part is handed to the domain's views here.
    path(
        "api/v1/replays/<int:replay_id>/attestation",
        replay_attestation,
        {"side": REVIEW_SIDE},
        name="api_replay_attestation",
    ),
    path(
        "api/v1/attestation-key.pub",
        attestation_key,
        name="api_attestation_key",
    ),
    path(
        "api/v1/commits/<str:sha>/verdict",
        commit_verdict,
        {"side": REVIEW_SIDE},
        name="api_commit_verdict",
    ),
    # The recorder that runs where the agents run (docs/recorder.md).
    path(
        "recorder/replayhub-record.py",
        recorder_download,
        name="recorder_download",
    ),
    path("runs/upload/", upload.runs_upload, name="runs_upload"),
    path("runs/upload/<int:job_id>/", upload.upload_job, name="runs_upload_job"),
]

# Styled error pages with the navigation and a way back.
handler400 = "reviews.views.errors.bad_request"
handler403 = "reviews.views.errors.forbidden"
handler404 = "reviews.views.errors.not_found"
handler500 = "reviews.views.errors.server_error"
