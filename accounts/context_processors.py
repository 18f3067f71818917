from django.conf import settings


def sign_in(request):
    """How people sign in here: single sign-on, local accounts, or both."""
    return {
        "sso_enabled": bool(settings.OIDC_RP_CLIENT_ID),
        "sso_name": settings.PORTAL_OIDC_NAME,
        "local_login": settings.PORTAL_LOCAL_LOGIN,
    }
