import os
import subprocess
import sys

import pytest
from django.conf import settings


def start_up(**env):
    """Load the settings in a fresh interpreter, as `manage.py` would."""
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", **env},
        capture_output=True,
        text=True,
        cwd=settings.BASE_DIR,
    )


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DJANGO_DEBUG", "maybe", "DJANGO_DEBUG='maybe' is not a boolean"),
        ("PORTAL_LIFECYCLE_INTERVAL", "soon", "PORTAL_LIFECYCLE_INTERVAL='soon' is not a whole"),
        ("PORTAL_LIFECYCLE_INTERVAL", "0", "PORTAL_LIFECYCLE_INTERVAL='0' must be at least 1"),
        ("DATABASE_URL", "mysqlish://x", "DATABASE_URL='mysqlish://x' is not a database URL"),
        ("PORTAL_NAMESPACE_LABELS", "a=b c", "PORTAL_NAMESPACE_LABELS: 'a=b c' is not a valid"),
        ("PORTAL_NAMESPACE_ANNOTATIONS", "=x", "PORTAL_NAMESPACE_ANNOTATIONS: '=x' is not a valid"),
        ("PORTAL_API_RATE_USER", "fast", "PORTAL_API_RATE_USER='fast' is not a rate"),
        ("PORTAL_LOG_FORMAT", "xml", "PORTAL_LOG_FORMAT='xml' must be text or json"),
        ("PORTAL_TRUSTED_PROXIES", "-1", "PORTAL_TRUSTED_PROXIES='-1' must be at least 0"),
        ("PORTAL_CLOCK", "sim", "PORTAL_CLOCK='sim' must be real or kubesim"),
        ("PORTAL_NAMESPACE_PREFIX", "kube-", "PORTAL_NAMESPACE_PREFIX='kube-': kube-* names"),
        ("PORTAL_NAMESPACE_PREFIX", "Team_", "PORTAL_NAMESPACE_PREFIX='Team_' must be lowercase"),
        ("PORTAL_OWN_NAMESPACE", "Portal", "PORTAL_OWN_NAMESPACE='Portal' is not a namespace"),
        ("PORTAL_CLUSTER_API_URL", "http://k8s:6443", "PORTAL_CLUSTER_API_URL must be an https"),
        ("PORTAL_CLUSTER_API_URL", "https://k8s:6443", "set PORTAL_CLUSTER_OIDC_ISSUER and"),
        ("PORTAL_BILLING_HISTORY_STEP", "7", "PORTAL_BILLING_HISTORY_STEP=7 must divide an hour"),
        ("PORTAL_BILLING_HISTORY_END", "2027-01-04", "PORTAL_BILLING_HISTORY_END='2027-01-04' is"),
        ("PORTAL_BILLING_HISTORY_END", "soon", "PORTAL_BILLING_HISTORY_END='soon' is not a time"),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable(name, value, message):
    result = start_up(**{name: value})
    assert result.returncode != 0
    assert message in result.stderr


def test_the_defaults_need_no_server():
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings as s; "
            "print(s.DATABASES['default']['ENGINE'], s.CELERY_BROKER_URL, s.EMAIL_BACKEND)",
        ],
        env={
            key: value
            for key, value in os.environ.items()
            if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "EMAIL_BACKEND")
        }
        | {"DJANGO_SETTINGS_MODULE": "portal.settings"},
        capture_output=True,
        text=True,
        cwd=settings.BASE_DIR,
    )
    engine, broker, email = result.stdout.split()
    assert (engine, email) == (
        "django.db.backends.sqlite3",
        "django.core.mail.backends.console.EmailBackend",
    )
    assert broker.startswith("sqlite:///") and broker.endswith("/broker.sqlite3")


def test_times_are_stored_in_utc():
    assert settings.USE_TZ is True
