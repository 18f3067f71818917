from functools import wraps

from django.conf import settings
from django.http import Http404
from django.urls import path
from mozilla_django_oidc import views as oidc_views

from accounts import views


def sso_only(view):
    """404 while single sign-on is not configured (no OIDC_RP_CLIENT_ID)."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not settings.OIDC_RP_CLIENT_ID:
            raise Http404("Single sign-on is not configured.")
        return view(request, *args, **kwargs)

    return wrapped


urlpatterns = [
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.revoke, name="token_revoke"),
    path(
        "sso/login/",
        sso_only(oidc_views.OIDCAuthenticationRequestView.as_view()),
        name="oidc_authentication_init",
    ),
    path(
        "sso/callback/",
        sso_only(oidc_views.OIDCAuthenticationCallbackView.as_view()),
        name="oidc_authentication_callback",
    ),
    path("sso/logout/", sso_only(oidc_views.OIDCLogoutView.as_view()), name="oidc_logout"),
]
