from django.urls import path

from gpu_requests import team_views, views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("requests/", views.request_list, name="request_list"),
    path("requests/new/", views.request_new, name="request_new"),
    path("requests/<int:pk>/", views.request_detail, name="request_detail"),
    path("requests/<int:pk>/comment/", views.request_comment, name="request_comment"),
    path("requests/<int:pk>/cancel/", views.request_cancel, name="request_cancel"),
    path("requests/<int:pk>/approve/", views.request_approve, name="request_approve"),
    path("requests/<int:pk>/reject/", views.request_reject, name="request_reject"),
    path("requests/<int:pk>/revoke/", views.request_revoke, name="request_revoke"),
    path("requests/<int:pk>/end-early/", views.request_end_early, name="request_end_early"),
    path("review/", views.review_queue, name="review_queue"),
    path("timeline/", views.timeline_page, name="timeline"),
    path("preferences/", team_views.preferences, name="preferences"),
    path("teams/new/", team_views.team_new, name="team_new"),
    path("teams/<slug:slug>/", team_views.team_page, name="team_page"),
    path("teams/<slug:slug>/members/add/", team_views.member_add, name="member_add"),
    path(
        "teams/<slug:slug>/members/<int:user_id>/role/", team_views.member_role, name="member_role"
    ),
    path(
        "teams/<slug:slug>/members/<int:user_id>/remove/",
        team_views.member_remove,
        name="member_remove",
    ),
]
