"""Settings, read from the environment.

With nothing set the portal runs on embedded defaults (an SQLite file, a
Celery broker on the filesystem, console email) so `make demo` needs no
server. Every variable is parsed strictly: a bad value stops start-up with a
message that names it.
"""

import os
import re
import tempfile
from decimal import Decimal, InvalidOperation
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", BASE_DIR / "var"))


def env_str(name, default):
    return os.environ.get(name, default)


def env_bool(name, default):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true or false)")


def env_int(name, default, *, minimum=None):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_decimal(name, default):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return Decimal(default)
    try:
        return Decimal(raw)
    except InvalidOperation:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a decimal number") from None


def env_list(name, default):
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_database(name, default):
    raw = os.environ.get(name) or default
    try:
        config = dj_database_url.parse(raw, conn_max_age=60)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a database URL: {exc}") from None
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Concurrent web, worker and beat processes share the demo's file.
        config["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
        # Tests that start a real Celery worker need a test database the worker
        # can open too: a file, not SQLite's default in-memory one.
        test_name = f"portal-test-{os.getpid()}.sqlite3"
        config["TEST"] = {"NAME": os.path.join(tempfile.gettempdir(), test_name)}
    return config


DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and os.environ.get("PORTAL_REQUIRE_SECRET"):
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set")
    SECRET_KEY = "insecure-demo-key-set-DJANGO_SECRET_KEY-in-production"
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "django_htmx",
    "template_partials",
    "gpu_requests",
    "cluster",
    "billing",
    "provisioning",
    "batch",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env_database("DATABASE_URL", f"sqlite:///{VAR_DIR / 'portal.sqlite3'}")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("PORTAL_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "GPU portal <gpu-portal@localhost>")
PORTAL_BASE_URL = env_str("PORTAL_BASE_URL", "http://127.0.0.1:8000")
PORTAL_CURRENCY = env_str("PORTAL_CURRENCY", "USD")

# Celery: Redis in production and CI; with nothing set, kombu's filesystem
# transport, so the demo's worker and beat need no server.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir),
        "data_folder_out": str(_broker_dir),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Publishing fails fast when Redis is down instead of blocking the web
    # request for seconds: the decision is already in the database, and the
    # sweep queues whatever could not be sent.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"max_retries": 0, "socket_connect_timeout": 2}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery closes the database connection around every task unless told to
# reuse it; a new PostgreSQL connection per sync costs more than the sync.
# portal/celery.py still drops one that broke or outlived CONN_MAX_AGE.
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000, minimum=0)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    "advance-quota-lifecycle": {
        "task": "gpu_requests.advance_lifecycle",
        "schedule": env_int("PORTAL_LIFECYCLE_INTERVAL", 30, minimum=1),
    },
}

# Provisioning (provisioning/): the cluster the portal manages and how.
# Empty PORTAL_KUBECONFIG falls back to $KUBECONFIG, then in-cluster, then ~/.kube/config.
PORTAL_KUBECONFIG = env_str("PORTAL_KUBECONFIG", "") or None
PORTAL_KUBE_CONTEXT = env_str("PORTAL_KUBE_CONTEXT", "") or None
PORTAL_KUBE_TIMEOUT = env_int("PORTAL_KUBE_TIMEOUT", 10, minimum=1)
PORTAL_KUBE_RETRIES = env_int("PORTAL_KUBE_RETRIES", 2, minimum=0)
PORTAL_KUBE_FIELD_MANAGER = env_str("PORTAL_KUBE_FIELD_MANAGER", "gpu-portal")
PORTAL_NAMESPACE_PREFIX = env_str("PORTAL_NAMESPACE_PREFIX", "")
PORTAL_RBAC_CLUSTER_ROLE = env_str("PORTAL_RBAC_CLUSTER_ROLE", "edit")
PORTAL_RBAC_SUBJECTS = env_str("PORTAL_RBAC_SUBJECTS", "group")
if PORTAL_RBAC_SUBJECTS not in ("group", "users"):
    raise ImproperlyConfigured(
        f"PORTAL_RBAC_SUBJECTS={PORTAL_RBAC_SUBJECTS!r} must be group or users"
    )
PORTAL_RBAC_GROUP_TEMPLATE = env_str("PORTAL_RBAC_GROUP_TEMPLATE", "gpu-team-{slug}")
if "{slug}" not in PORTAL_RBAC_GROUP_TEMPLATE:
    raise ImproperlyConfigured("PORTAL_RBAC_GROUP_TEMPLATE must contain {slug}")
PORTAL_RBAC_USER_PREFIX = env_str("PORTAL_RBAC_USER_PREFIX", "oidc:")
# A worker's claim on a team's sync runs out after this many seconds (if it died).
PORTAL_SYNC_LEASE = env_int("PORTAL_SYNC_LEASE", 60, minimum=1)
PORTAL_SYNC_SWEEP_INTERVAL = env_int("PORTAL_SYNC_SWEEP_INTERVAL", 5, minimum=1)
PORTAL_DRIFT_CHECK_INTERVAL = env_int("PORTAL_DRIFT_CHECK_INTERVAL", 300, minimum=1)
PORTAL_INVENTORY_INTERVAL = env_int("PORTAL_INVENTORY_INTERVAL", 60, minimum=1)
CELERY_BEAT_SCHEDULE |= {
    "provisioning-sweep": {
        "task": "provisioning.sweep",
        "schedule": PORTAL_SYNC_SWEEP_INTERVAL,
    },
    "provisioning-drift-check": {
        "task": "provisioning.check_drift",
        "schedule": PORTAL_DRIFT_CHECK_INTERVAL,
    },
    # The entry keeps its name, so a database scheduler updates it in place.
    "provisioning-inventory": {
        "task": "cluster.record_inventory",
        "schedule": PORTAL_INVENTORY_INTERVAL,
    },
}

# Batch windows (batch/): how far ahead the planner plans, how it weighs recent
# usage, what spot capacity costs, and when it plans again before an occurrence.
PORTAL_BATCH_HORIZON_DAYS = env_int("PORTAL_BATCH_HORIZON_DAYS", 14, minimum=1)
PORTAL_BATCH_USAGE_DAYS = env_int("PORTAL_BATCH_USAGE_DAYS", 7, minimum=1)
PORTAL_BATCH_SPOT_FACTOR = env_decimal("PORTAL_BATCH_SPOT_FACTOR", "0.6")
if not Decimal(0) < PORTAL_BATCH_SPOT_FACTOR <= Decimal(1):
    raise ImproperlyConfigured("PORTAL_BATCH_SPOT_FACTOR must be above 0 and at most 1")
PORTAL_BATCH_PLAN_LEAD = env_int("PORTAL_BATCH_PLAN_LEAD", 900, minimum=0)
PORTAL_BATCH_TICK_INTERVAL = env_int("PORTAL_BATCH_TICK_INTERVAL", 10, minimum=1)
CELERY_BEAT_SCHEDULE |= {
    "batch-tick": {"task": "batch.tick", "schedule": PORTAL_BATCH_TICK_INTERVAL},
}

# Requests longer than this are refused; open-ended requests are allowed.
QUOTA_MAX_JUSTIFICATION = 2000

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "gpu_requests.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU portal API",
    "DESCRIPTION": "Request GPU quota, review it, and follow its lifecycle.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Two choice sets share the field name `status`: naming both keeps the
    # requests' enum `StatusEnum`, as published before teams had a sync status.
    "ENUM_NAME_OVERRIDES": {
        "StatusEnum": "gpu_requests.models.QuotaRequest.Status",
        "SyncStatusEnum": "gpu_requests.models.SyncStatus",
        "BatchJobStatusEnum": "batch.models.BatchJob.Status",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("PORTAL_LOG_LEVEL", "INFO")},
}

# Billing (billing/): GPU-hours metered from Prometheus (DCGM exporter and
# kube-state-metrics). Empty PORTAL_PROMETHEUS_URL: no metering, and the
# billing pages say so.
PORTAL_PROMETHEUS_URL = env_str("PORTAL_PROMETHEUS_URL", "").rstrip("/")
PORTAL_PROMETHEUS_TIMEOUT = env_int("PORTAL_PROMETHEUS_TIMEOUT", 30, minimum=1)
# Seconds between the samples the ledger judges (the scrape interval, usually).
PORTAL_BILLING_STEP = env_int("PORTAL_BILLING_STEP", 60, minimum=1)
if 3600 % PORTAL_BILLING_STEP:
    raise ImproperlyConfigured(
        f"PORTAL_BILLING_STEP={PORTAL_BILLING_STEP} must divide an hour (3600 seconds)"
    )
# Engine activity (0-1) at or above which a sample step counts as active.
PORTAL_BILLING_IDLE_THRESHOLD = env_decimal("PORTAL_BILLING_IDLE_THRESHOLD", "0.05")
if not Decimal(0) <= PORTAL_BILLING_IDLE_THRESHOLD <= Decimal(1):
    raise ImproperlyConfigured("PORTAL_BILLING_IDLE_THRESHOLD must be between 0 and 1")
# A closed hour is ingested this many seconds after it ends (late scrapes).
PORTAL_BILLING_DELAY = env_int("PORTAL_BILLING_DELAY", 600, minimum=0)
PORTAL_BILLING_INTERVAL = env_int("PORTAL_BILLING_INTERVAL", 300, minimum=1)
# A fresh install meters this many closed hours back; each beat run ingests at most
# PORTAL_BILLING_HOURS_PER_RUN pending hours (oldest first).
PORTAL_BILLING_BACKFILL_HOURS = env_int("PORTAL_BILLING_BACKFILL_HOURS", 24, minimum=1)
PORTAL_BILLING_HOURS_PER_RUN = env_int("PORTAL_BILLING_HOURS_PER_RUN", 24, minimum=1)
# What a team is charged for: allocated GPU-hours, or the greater of reserved and allocated.
PORTAL_BILLING_CHARGE = env_str("PORTAL_BILLING_CHARGE", "allocation")
if PORTAL_BILLING_CHARGE not in ("allocation", "reservation"):
    raise ImproperlyConfigured(
        f"PORTAL_BILLING_CHARGE={PORTAL_BILLING_CHARGE!r} must be allocation or reservation"
    )
# Label names as the operator's scrape config leaves them (defaults: released
# dcgm-exporter and kube-state-metrics scraped with honor_labels).
PORTAL_BILLING_LABEL_NAMESPACE = env_str("PORTAL_BILLING_LABEL_NAMESPACE", "namespace")
PORTAL_BILLING_LABEL_POD = env_str("PORTAL_BILLING_LABEL_POD", "pod")
PORTAL_BILLING_LABEL_HOSTNAME = env_str("PORTAL_BILLING_LABEL_HOSTNAME", "Hostname")
PORTAL_BILLING_LABEL_NODE = env_str("PORTAL_BILLING_LABEL_NODE", "node")
for _name in ("NAMESPACE", "POD", "HOSTNAME", "NODE"):
    if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", globals()[f"PORTAL_BILLING_LABEL_{_name}"]):
        raise ImproperlyConfigured(f"PORTAL_BILLING_LABEL_{_name} is not a Prometheus label name")
CELERY_BEAT_SCHEDULE |= {
    "billing-ingest-closed-hours": {
        "task": "billing.ingest_closed_hours",
        "schedule": PORTAL_BILLING_INTERVAL,
    },
}
