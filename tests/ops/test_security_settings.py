"""Production settings: a secret key is required, `check --deploy` passes
with the README's production variables, passwords are checked, pages carry a
Content-Security-Policy."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client

# The README's "Deploy" section lists exactly these.
PRODUCTION = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "Zk3-" + "q7Vb1xN9" * 7,
    "DJANGO_ALLOWED_HOSTS": "gpu.example.com",
    "PORTAL_HTTPS": "true",
}


def run(args, **env):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PORTAL_"))}
    return subprocess.run(
        [sys.executable, *args],
        env=environ | {"DJANGO_SETTINGS_MODULE": "portal.settings"} | env,
        capture_output=True,
        text=True,
        cwd=settings.BASE_DIR,
    )


def test_a_missing_secret_key_stops_start_up_with_a_message(tmp_path):
    result = run(
        ["-c", "import django; django.setup()"], DJANGO_DEBUG="false", PORTAL_VAR_DIR=str(tmp_path)
    )
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is false" in result.stderr


def test_commands_beside_the_demo_use_its_key(tmp_path):
    (tmp_path / "demo-secret-key").write_text("made-by-make-demo-" + "x" * 40 + "\n")
    result = run(
        ["-c", "from django.conf import settings; print(settings.SECRET_KEY)"],
        DJANGO_DEBUG="false",
        PORTAL_VAR_DIR=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "made-by-make-demo-" + "x" * 40


def test_debug_runs_without_a_secret_key():
    result = run(["-c", "import django; django.setup()"], DJANGO_DEBUG="true")
    assert result.returncode == 0, result.stderr


def test_check_deploy_passes_with_the_production_settings():
    result = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_fails_without_https():
    result = run(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        **(PRODUCTION | {"PORTAL_HTTPS": "false"}),
    )
    assert result.returncode != 0
    assert "security.W004" in result.stderr + result.stdout  # no HSTS


@pytest.mark.parametrize(
    ("password", "message"),
    [
        ("short1", "too short"),
        ("password123", "too common"),
        ("83920571620", "entirely numeric"),
        ("alice.example", "too similar"),
    ],
)
def test_the_four_password_validators(alice, password, message):
    alice.email = "alice@example.com"
    with pytest.raises(ValidationError) as error:
        validate_password(password, user=alice)
    assert message in " ".join(error.value.messages)


def test_pages_carry_a_content_security_policy(db):
    response = Client().get("/accounts/login/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe-eval" not in policy


def test_database_connections_are_kept_as_the_environment_says():
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "d = s.DATABASES['default']; print(d['CONN_MAX_AGE'], d['CONN_HEALTH_CHECKS'])"
    )
    result = run(
        ["-c", code], **PRODUCTION, PORTAL_CONN_MAX_AGE="0", PORTAL_CONN_HEALTH_CHECKS="no"
    )
    assert result.stdout.split() == ["0", "False"], result.stderr
    result = run(["-c", code], **PRODUCTION)
    assert result.stdout.split() == ["60", "True"], result.stderr
    result = run(["-c", code], **PRODUCTION, PORTAL_CONN_MAX_AGE="-1")
    assert "PORTAL_CONN_MAX_AGE='-1' must be at least 0" in result.stderr
