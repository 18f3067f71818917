from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from accounts import actions
from accounts.models import PREFIX


class PersonalOrAdminTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>`: a personal token (gpp_...) or one an
    admin made (rest_framework.authtoken), as before."""

    def authenticate_credentials(self, key):
        if not key.startswith(PREFIX):
            return super().authenticate_credentials(key)
        user = actions.authenticate(key)
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        return (user, None)
