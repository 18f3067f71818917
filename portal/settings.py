"""Settings, read from the environment.

With nothing set the portal runs on embedded defaults (an SQLite file, a
Celery broker in another SQLite file, console email) so `make demo` needs no
server. Every variable is parsed strictly: a bad value stops start-up with a
message that names it.
"""

import os
import re
import tempfile
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from urllib.parse import urlsplit

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


def env_rate(name, default):
    """A rate as DRF's throttles take it: `100/min` (per sec, min, hour or day)."""
    raw = os.environ.get(name) or default
    count, _, period = raw.partition("/")
    if not (count.isascii() and count.isdigit()) or period not in (
        "s",
        "sec",
        "m",
        "min",
        "h",
        "hour",
        "d",
        "day",
    ):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a rate like 100/min")
    return raw


_QUALIFIED_NAME = (
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_LABEL_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"


def env_metadata(name, *, labels):
    """`key=value,...` as Kubernetes labels (or annotations: any value)."""
    result = {}
    for item in env_list(name, []):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        bad_value = labels and not re.fullmatch(_LABEL_VALUE, value)
        if not sep or not re.fullmatch(_QUALIFIED_NAME, key) or bad_value:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a valid key=value")
        result[key] = value
    return result


def env_list(name, default):
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_database(name, default):
    raw = os.environ.get(name) or default
    try:
        config = dj_database_url.parse(
            raw,
            # Seconds a process keeps its connection; 0 closes it after every
            # request. Each gunicorn worker thread and Celery worker holds at
            # most one, so PostgreSQL sees at most workers x threads.
            conn_max_age=env_int("PORTAL_CONN_MAX_AGE", 60, minimum=0),
            conn_health_checks=env_bool("PORTAL_CONN_HEALTH_CHECKS", True),
        )
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
# `make demo` makes a random key of its own in VAR_DIR; commands run beside the
# demo (`manage.py api_token alice`) use it too. Nowhere else is there one.
_DEMO_KEY = VAR_DIR / "demo-secret-key"
if not SECRET_KEY and _DEMO_KEY.is_file():
    SECRET_KEY = _DEMO_KEY.read_text().strip()
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is false; make one with "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    SECRET_KEY = "insecure-debug-key-set-DJANGO_SECRET_KEY-in-production"
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

# Served over HTTPS by a proxy (the Ingress) that terminates TLS and sets
# X-Forwarded-Proto: secure cookies, redirect plain HTTP, HSTS.
PORTAL_HTTPS = env_bool("PORTAL_HTTPS", False)
if PORTAL_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    # Kubelet probes and Prometheus scrape the pod over plain HTTP.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("PORTAL_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("PORTAL_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("PORTAL_HSTS_PRELOAD", True)
X_FRAME_OPTIONS = "DENY"

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
    "axes",
    "django_prometheus",
    "mozilla_django_oidc",
    "teams",
    "gpu_requests",
    "accounts",
    "cluster",
    "billing",
    "provisioning",
    "batch",
    "notifications",
    "idle",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "portal.logs.RequestLogMiddleware",
    "portal.edge.RefuseBadInput",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "gpu_requests.timezones.TimeZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

# Pages load scripts and styles from /static/ only; the bars' widths are the
# only inline styles (attributes). htmx's own indicator <style> is turned off
# in base.html and lives in portal.css.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

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
                "gpu_requests.timezones.context",
                "accounts.context_processors.sign_in",
            ],
        },
    },
]

DATABASES = {"default": env_database("DATABASE_URL", f"sqlite:///{VAR_DIR / 'portal.sqlite3'}")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Shared by every process (API throttling counts): Redis in production; with
# nothing set, each process counts on its own.
PORTAL_CACHE_URL = env_str("PORTAL_CACHE_URL", "")
if PORTAL_CACHE_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": PORTAL_CACHE_URL,
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Single sign-on (OpenID Connect, accounts/oidc.py): on when OIDC_RP_CLIENT_ID
# is set. The provider's endpoints are given, not discovered at start-up.
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_RP_CLIENT_SECRET", "")
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile groups")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_OP_LOGOUT_ENDPOINT = env_str("OIDC_OP_LOGOUT_ENDPOINT", "")
if OIDC_RP_CLIENT_ID:
    _missing = [
        name
        for name in (
            "OIDC_RP_CLIENT_SECRET",
            "OIDC_OP_AUTHORIZATION_ENDPOINT",
            "OIDC_OP_TOKEN_ENDPOINT",
            "OIDC_OP_USER_ENDPOINT",
            "OIDC_OP_JWKS_ENDPOINT",
        )
        if not globals()[name]
    ]
    if _missing:
        raise ImproperlyConfigured(f"OIDC_RP_CLIENT_ID is set: set {', '.join(_missing)} too")
OIDC_STORE_ID_TOKEN = True
OIDC_OP_LOGOUT_URL_METHOD = "accounts.oidc.logout_url"
PORTAL_OIDC_NAME = env_str("PORTAL_OIDC_NAME", "single sign-on")
PORTAL_OIDC_USERNAME_CLAIM = env_str("PORTAL_OIDC_USERNAME_CLAIM", "preferred_username")
# Groups claim -> platform admins, and -> team memberships: the regex names the
# team's slug (`team`) and, if it matches, the manager role (`role`).
PORTAL_OIDC_ADMIN_GROUPS = env_list("PORTAL_OIDC_ADMIN_GROUPS", [])
PORTAL_OIDC_TEAM_GROUP_REGEX = env_str(
    "PORTAL_OIDC_TEAM_GROUP_REGEX", r"gpu-team-(?P<team>[a-z0-9-]+?)(?:-(?P<role>manager))?"
)
try:
    if "team" not in re.compile(PORTAL_OIDC_TEAM_GROUP_REGEX).groupindex:
        raise ImproperlyConfigured("PORTAL_OIDC_TEAM_GROUP_REGEX needs a (?P<team>...) group")
except re.error as exc:
    raise ImproperlyConfigured(f"PORTAL_OIDC_TEAM_GROUP_REGEX is not a regex: {exc}") from None
# Username and password logins (the demo's); false leaves single sign-on only.
PORTAL_LOCAL_LOGIN = env_bool("PORTAL_LOCAL_LOGIN", True)
if not PORTAL_LOCAL_LOGIN and not OIDC_RP_CLIENT_ID:
    raise ImproperlyConfigured("PORTAL_LOCAL_LOGIN=false needs single sign-on (OIDC_RP_CLIENT_ID)")
if OIDC_OP_LOGOUT_ENDPOINT:
    # Logging out posts here and is redirected to the provider: a form's
    # redirect is bound by form-action too.
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(
        "{0.scheme}://{0.netloc}".format(urlsplit(OIDC_OP_LOGOUT_ENDPOINT))
    )
AUTHENTICATION_BACKENDS = [
    # Counts failed logins and refuses them past the limit (before the check).
    "axes.backends.AxesStandaloneBackend",
    *(["accounts.oidc.PortalOIDCBackend"] if OIDC_RP_CLIENT_ID else []),
    *(["django.contrib.auth.backends.ModelBackend"] if PORTAL_LOCAL_LOGIN else []),
]
# Past PORTAL_LOGIN_FAILURE_LIMIT failures for one username, or from one
# address, logins are refused (429) for PORTAL_LOGIN_COOLOFF_MINUTES.
AXES_FAILURE_LIMIT = env_int("PORTAL_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("PORTAL_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# Behind an Ingress every request comes from the proxy: set PORTAL_TRUSTED_PROXIES
# to the number of proxies in front of the portal, and the client's address is
# read from X-Forwarded-For (portal/proxies.py), for login limits and API throttles.
PORTAL_TRUSTED_PROXIES = env_int("PORTAL_TRUSTED_PROXIES", 0, minimum=0)
AXES_CLIENT_IP_CALLABLE = "portal.proxies.client_ip"
AXES_USERNAME_CALLABLE = "portal.proxies.login_username"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
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
# Who runs the platform, as the FOCUS export names the provider and invoice issuer.
PORTAL_FOCUS_PROVIDER_NAME = env_str("PORTAL_FOCUS_PROVIDER_NAME", "GPU portal").strip()
if not PORTAL_FOCUS_PROVIDER_NAME:
    raise ImproperlyConfigured("PORTAL_FOCUS_PROVIDER_NAME must not be empty")

# Celery: Redis in production and CI; with nothing set, kombu's SQLAlchemy
# transport on an SQLite file, so the demo's worker and beat need no server.
# Each message is written in one transaction and taken in another (BEGIN
# IMMEDIATE), so concurrent producers and consumers never see half a message.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", f"sqlite:///{VAR_DIR / 'broker.sqlite3'}")
SQLITE_BROKER_TRANSPORT_OPTIONS = {"connect_args": {"timeout": 30}}
REDIS_BROKER_TRANSPORT_OPTIONS = {"max_retries": 0, "socket_connect_timeout": 2}
# A prefix on every broker key, so that portals (or test sessions) sharing one
# Redis database never take each other's messages.
if CELERY_BROKER_KEY_PREFIX := env_str("CELERY_BROKER_KEY_PREFIX", ""):
    REDIS_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = CELERY_BROKER_KEY_PREFIX
if CELERY_BROKER_URL.startswith("sqlite:///"):
    CELERY_BROKER_TRANSPORT = "portal.broker:Transport"  # portal/broker.py
    # Passed to SQLAlchemy's create_engine: wait up to 30 s for another
    # process's write lock instead of failing at once.
    CELERY_BROKER_TRANSPORT_OPTIONS = SQLITE_BROKER_TRANSPORT_OPTIONS
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Publishing fails fast when Redis is down instead of blocking the web
    # request for seconds: the decision is already in the database, and the
    # sweep queues whatever could not be sent.
    CELERY_BROKER_TRANSPORT_OPTIONS = REDIS_BROKER_TRANSPORT_OPTIONS
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
# The clock batch windows run on (cluster/clock.py): "real", or "kubesim" for its
# simulated clock (tests and the demo), read again every PORTAL_CLOCK_REFRESH seconds.
PORTAL_CLOCK = env_str("PORTAL_CLOCK", "real")
if PORTAL_CLOCK not in ("real", "kubesim"):
    raise ImproperlyConfigured(f"PORTAL_CLOCK={PORTAL_CLOCK!r} must be real or kubesim")
PORTAL_CLOCK_REFRESH = env_int("PORTAL_CLOCK_REFRESH", 5, minimum=1)
PORTAL_NAMESPACE_PREFIX = env_str("PORTAL_NAMESPACE_PREFIX", "")
# What is before a slug in a namespace name: lowercase letters, digits and '-',
# starting with a letter or digit; never `kube-` (Kubernetes' own namespaces).
if PORTAL_NAMESPACE_PREFIX and not re.fullmatch(
    r"[a-z0-9][-a-z0-9]{0,61}", PORTAL_NAMESPACE_PREFIX
):
    raise ImproperlyConfigured(
        f"PORTAL_NAMESPACE_PREFIX={PORTAL_NAMESPACE_PREFIX!r} must be lowercase letters, digits "
        "or '-', starting with a letter or digit (it begins a namespace name)"
    )
if PORTAL_NAMESPACE_PREFIX.startswith("kube-"):
    raise ImproperlyConfigured(
        f"PORTAL_NAMESPACE_PREFIX={PORTAL_NAMESPACE_PREFIX!r}: "
        "kube-* names are Kubernetes' own namespaces"
    )
# The namespace the portal runs in (deploy/ sets it from the pod's own): never a
# team's, whatever a slug and the prefix make.
PORTAL_OWN_NAMESPACE = env_str("PORTAL_OWN_NAMESPACE", "portal")
if PORTAL_OWN_NAMESPACE and not re.fullmatch(
    r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", PORTAL_OWN_NAMESPACE
):
    raise ImproperlyConfigured(
        f"PORTAL_OWN_NAMESPACE={PORTAL_OWN_NAMESPACE!r} is not a namespace name"
    )
# Labels and annotations every team namespace gets (e.g. for a NetworkPolicy
# or cost-allocation controller): "key=value,key2=value2".
PORTAL_NAMESPACE_LABELS = env_metadata("PORTAL_NAMESPACE_LABELS", labels=True)
PORTAL_NAMESPACE_ANNOTATIONS = env_metadata("PORTAL_NAMESPACE_ANNOTATIONS", labels=False)
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
# What team members put in their own kubeconfig (the team page shows it): the
# API server they reach, its CA, and the OIDC provider the API server trusts
# (its --oidc-issuer-url and --oidc-client-id); kubectl gets tokens through
# the kubelogin plugin. Without PORTAL_CLUSTER_API_URL the page says whom to ask.
PORTAL_CLUSTER_NAME = env_str("PORTAL_CLUSTER_NAME", "gpu-cluster")
PORTAL_CLUSTER_API_URL = env_str("PORTAL_CLUSTER_API_URL", "")
if PORTAL_CLUSTER_API_URL and urlsplit(PORTAL_CLUSTER_API_URL).scheme != "https":
    raise ImproperlyConfigured("PORTAL_CLUSTER_API_URL must be an https:// URL")
PORTAL_CLUSTER_CA_DATA = env_str("PORTAL_CLUSTER_CA_DATA", "")
PORTAL_CLUSTER_OIDC_ISSUER = env_str("PORTAL_CLUSTER_OIDC_ISSUER", "")
PORTAL_CLUSTER_OIDC_CLIENT_ID = env_str("PORTAL_CLUSTER_OIDC_CLIENT_ID", "") or OIDC_RP_CLIENT_ID
PORTAL_CLUSTER_OIDC_SCOPES = env_list("PORTAL_CLUSTER_OIDC_SCOPES", ["email", "groups"])
if PORTAL_CLUSTER_API_URL and not (PORTAL_CLUSTER_OIDC_ISSUER and PORTAL_CLUSTER_OIDC_CLIENT_ID):
    raise ImproperlyConfigured(
        "PORTAL_CLUSTER_API_URL is set: set PORTAL_CLUSTER_OIDC_ISSUER and "
        "PORTAL_CLUSTER_OIDC_CLIENT_ID (or OIDC_RP_CLIENT_ID) too"
    )
# /metrics is for Prometheus only: it names teams and their sync failures. It is
# served to a request with `Authorization: Bearer <PORTAL_METRICS_TOKEN>` (from a
# Secret; Prometheus' `authorization.credentials_file`); without a token set it is
# a 404, except with DJANGO_DEBUG on (a developer's machine).
PORTAL_METRICS_TOKEN = env_str("PORTAL_METRICS_TOKEN", "")
# /readyz gives each of its checks (database, broker, cluster) this many seconds.
PORTAL_READY_TIMEOUT = env_int("PORTAL_READY_TIMEOUT", 2, minimum=1)
# A worker's claim on a team's sync runs out after this many seconds (if it died).
PORTAL_SYNC_LEASE = env_int("PORTAL_SYNC_LEASE", 60, minimum=1)
PORTAL_SYNC_SWEEP_INTERVAL = env_int("PORTAL_SYNC_SWEEP_INTERVAL", 5, minimum=1)
# Teams per message when the sweep queues many at once (one claim and one read of
# their desired state per message); a single change is still one team's message.
PORTAL_SYNC_BATCH = env_int("PORTAL_SYNC_BATCH", 20, minimum=1)
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
# Node label of spot capacity (Karpenter's; GKE: cloud.google.com/gke-spot=true).
PORTAL_BATCH_SPOT_LABEL = env_str("PORTAL_BATCH_SPOT_LABEL", "karpenter.sh/capacity-type=spot")
if "=" not in PORTAL_BATCH_SPOT_LABEL:
    raise ImproperlyConfigured("PORTAL_BATCH_SPOT_LABEL must be key=value")
PORTAL_BATCH_JOB_TTL = env_int("PORTAL_BATCH_JOB_TTL", 3600, minimum=0)
PORTAL_BATCH_WATCH_SECONDS = env_int("PORTAL_BATCH_WATCH_SECONDS", 5, minimum=1)
PORTAL_BATCH_RELIST_SECONDS = env_int("PORTAL_BATCH_RELIST_SECONDS", 300, minimum=1)
CELERY_BEAT_SCHEDULE |= {
    "batch-tick": {"task": "batch.tick", "schedule": PORTAL_BATCH_TICK_INTERVAL},
    "batch-watch": {"task": "batch.watch", "schedule": PORTAL_BATCH_WATCH_SECONDS},
}

REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header makes DRF answer anonymous
    # callers 401 rather than 403, whichever scheme they meant to use.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.PersonalOrAdminTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "teams.schema.AutoSchema",
    "DEFAULT_PARSER_CLASSES": ["teams.api.JSONParser"],
    "DEFAULT_THROTTLE_CLASSES": [
        "portal.proxies.AnonRateThrottle",
        "portal.proxies.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_rate("PORTAL_API_RATE_ANON", "60/min"),
        "user": env_rate("PORTAL_API_RATE_USER", "1200/min"),
    },
    "DEFAULT_PAGINATION_CLASS": "teams.api.Pagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "teams.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU portal API",
    "DESCRIPTION": "Request GPU quota, review it, and follow its lifecycle.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "/static/favicon.svg",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "teams.schema.no_nul_characters",
    ],
    # Two choice sets share the field name `status`: naming both keeps the
    # requests' enum `StatusEnum`, as published before teams had a sync status.
    "ENUM_NAME_OVERRIDES": {
        "StatusEnum": "gpu_requests.models.QuotaRequest.Status",
        "SyncStatusEnum": "teams.models.SyncStatus",
        "BatchJobStatusEnum": "batch.models.BatchJob.Status",
        "IdleModeEnum": "idle.models.Mode",
    },
}

# One line per request (portal.requests) and per task (portal.tasks); JSON
# objects, one per line, with PORTAL_LOG_FORMAT=json.
PORTAL_LOG_FORMAT = env_str("PORTAL_LOG_FORMAT", "text")
if PORTAL_LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"PORTAL_LOG_FORMAT={PORTAL_LOG_FORMAT!r} must be text or json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": PORTAL_LOG_FORMAT},
    },
    "root": {"handlers": ["console"], "level": env_str("PORTAL_LOG_LEVEL", "INFO")},
    "loggers": {
        # portal.requests has a line for every 4xx already; Django's own would
        # add a traceback to an expected 403. Server errors still come here.
        "django.request": {"level": "ERROR"},
        # A line per login and logout otherwise; lockouts are warnings.
        "axes": {"level": "WARNING"},
    },
}
# The worker logs through LOGGING too, instead of Celery's own format.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

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
# History loaded at a coarser resolution than the scrape (e.g. backfilled from a
# downsampled store; the demo's generated month is sampled every minute and needs
# none): hours before PORTAL_BILLING_HISTORY_END are metered at
# PORTAL_BILLING_HISTORY_STEP, later ones at PORTAL_BILLING_STEP.
# Each hour keeps the step it was metered at, and the pages say so.
PORTAL_BILLING_HISTORY_STEP = env_int("PORTAL_BILLING_HISTORY_STEP", 0, minimum=0)
if PORTAL_BILLING_HISTORY_STEP and 3600 % PORTAL_BILLING_HISTORY_STEP:
    raise ImproperlyConfigured(
        f"PORTAL_BILLING_HISTORY_STEP={PORTAL_BILLING_HISTORY_STEP} must divide an hour"
    )
_history_end = env_str("PORTAL_BILLING_HISTORY_END", "")
try:
    PORTAL_BILLING_HISTORY_END = (
        datetime.fromisoformat(_history_end.replace("Z", "+00:00")) if _history_end else None
    )
except ValueError:
    PORTAL_BILLING_HISTORY_END = "bad"
if PORTAL_BILLING_HISTORY_END == "bad" or (
    PORTAL_BILLING_HISTORY_END and PORTAL_BILLING_HISTORY_END.tzinfo is None
):
    raise ImproperlyConfigured(
        f"PORTAL_BILLING_HISTORY_END={_history_end!r} is not a time with its zone "
        "(e.g. 2027-01-04T00:00Z)"
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
# While this file exists, closed hours wait (Prometheus is being backfilled: metered
# now, they would count as zero); its first line is shown on the Spend pages.
PORTAL_BILLING_HOLD_FILE = env_str("PORTAL_BILLING_HOLD_FILE", "")
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
# Seconds between two looks at hard budgets: a team whose running total reached its
# budget is held (and its running batch work stopped, as the budget says), and let go
# when the month turns (docs/billing.md, "Budgets").
PORTAL_BUDGET_INTERVAL = env_int("PORTAL_BUDGET_INTERVAL", 60, minimum=1)
CELERY_BEAT_SCHEDULE |= {
    "billing-ingest-closed-hours": {
        "task": "billing.ingest_closed_hours",
        "schedule": PORTAL_BILLING_INTERVAL,
    },
    "billing-enforce-budgets": {
        "task": "billing.enforce_budgets",
        "schedule": PORTAL_BUDGET_INTERVAL,
    },
}

# Outgoing webhooks (notifications/): each delivery is tried at most
# PORTAL_WEBHOOK_MAX_ATTEMPTS times, waiting PORTAL_WEBHOOK_BACKOFF seconds
# after the first failure and twice as long after each next one.
PORTAL_WEBHOOK_TIMEOUT = env_int("PORTAL_WEBHOOK_TIMEOUT", 10, minimum=1)
PORTAL_WEBHOOK_MAX_ATTEMPTS = env_int("PORTAL_WEBHOOK_MAX_ATTEMPTS", 6, minimum=1)
PORTAL_WEBHOOK_BACKOFF = env_int("PORTAL_WEBHOOK_BACKOFF", 30, minimum=1)
# Private, loopback and link-local addresses are refused (a webhook must not
# reach the portal's own network) unless this is on (an on-premises receiver).
PORTAL_WEBHOOK_ALLOW_PRIVATE = env_bool("PORTAL_WEBHOOK_ALLOW_PRIVATE", False)
# Plain http to a loopback address (a receiver on the developer's machine).
PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK = env_bool("PORTAL_WEBHOOK_ALLOW_HTTP_LOOPBACK", DEBUG)
PORTAL_WEBHOOK_SWEEP_INTERVAL = env_int("PORTAL_WEBHOOK_SWEEP_INTERVAL", 10, minimum=1)
# Delivered and failed deliveries leave the log after this many days (hourly).
PORTAL_WEBHOOK_LOG_DAYS = env_int("PORTAL_WEBHOOK_LOG_DAYS", 30, minimum=1)
CELERY_BEAT_SCHEDULE |= {
    "notifications-sweep": {
        "task": "notifications.sweep",
        "schedule": PORTAL_WEBHOOK_SWEEP_INTERVAL,
    },
    "notifications-prune": {"task": "notifications.prune", "schedule": 3600},
}

# --- Idle policies (docs/idle.md) ---
# Evaluated every this many seconds; a bare pod's team is reminded every
# PORTAL_IDLE_REMIND_MINUTES while it stays idle past its grace.
PORTAL_IDLE_INTERVAL = env_int("PORTAL_IDLE_INTERVAL", 60, minimum=10)
PORTAL_IDLE_REMIND_MINUTES = env_int("PORTAL_IDLE_REMIND_MINUTES", 60, minimum=1)
CELERY_BEAT_SCHEDULE |= {
    "idle-evaluate": {"task": "idle.evaluate", "schedule": PORTAL_IDLE_INTERVAL},
}
