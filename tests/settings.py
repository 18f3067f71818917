"""The portal's settings with the secret key production requires set to a
test-only one (DJANGO_DEBUG stays false, as in production)."""

import os

os.environ.setdefault(
    "DJANGO_SECRET_KEY", "tests-only-" + "k" * 20 + "-not-for-any-deployment-0123456789"
)

from portal.settings import *  # noqa: F403
