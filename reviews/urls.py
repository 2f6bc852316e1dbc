from django.urls import path

from . import views

app_name = "reviews"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("trends/", views.trends, name="trends"),
    path("budgets/", views.budgets, name="budgets"),
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
