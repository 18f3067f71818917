from urllib.parse import quote, unquote

from django.urls import path, register_converter

from billing import views


class WorkloadPart:
    """A workload's namespace, owner kind or owner name as one path segment, whatever
    it holds: a team member with `edit` can give a pod any owner, "a/b", "..", "%"
    or "" included. Written percent-encoded (so "/" is "%2F", "." and ".." are
    "%2E" and "%2E%2E", which browsers would otherwise resolve away) and read back
    with one unquote; names without such characters keep their plain URL."""

    regex = "[^/]*"

    def to_python(self, value):
        return unquote(value)

    def to_url(self, value):
        if value in (".", ".."):
            return "%2E" * len(value)
        return quote(value, safe="")


register_converter(WorkloadPart, "workload_part")

urlpatterns = [
    path("", views.overview, name="billing"),
    path("admin/", views.admin_page, name="billing_admin"),
    path("fleet/", views.fleet_page, name="billing_fleet"),
    path("health/", views.health_page, name="billing_health"),
    path("teams/<slug:slug>/", views.team_page, name="billing_team"),
    path("teams/<slug:slug>/budget/", views.team_budget, name="billing_team_budget"),
    path(
        "teams/<slug:slug>/workloads/<workload_part:namespace>/<workload_part:kind>/"
        "<workload_part:name>/",
        views.workload_page,
        name="billing_workload",
    ),
]
