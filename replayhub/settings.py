"""ReplayHub settings: one file, every value from the environment.

Embedded defaults run a fresh checkout with no servers (SQLite and Celery's
filesystem transport under ``var/``). ``DATABASE_URL`` and ``CELERY_BROKER_URL``
switch to PostgreSQL and Redis, the production stack.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import socket
import stat
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean (use 1/0, true/false)."
    )


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer.") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_names(name: str, default: list[str]) -> list[str]:
    """A comma-separated list of environment variable names, where a name
    ending in ``*`` stands for every variable it begins."""
    names = env_list(name, default)
    for entry in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?", entry):
            raise ImproperlyConfigured(
                f"{name}: {entry!r} is not a variable name, or a prefix of one "
                "ending in *."
            )
    return names


def database_from_url(url: str) -> dict:
    """Translate ``postgres://user:pass@host:port/name`` or ``sqlite:///path``."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": unquote(parts.path[1:]) or ":memory:",
            "OPTIONS": SQLITE_OPTIONS,
        }
    if parts.scheme in {"postgres", "postgresql"}:
        options: dict[str, str | bool] = dict(parse_qsl(parts.query))
        use_pool = options.pop("pool", "0") == "1"
        if use_pool:
            options["pool"] = True
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "CONN_MAX_AGE": 0 if use_pool else env_int("DATABASE_CONN_MAX_AGE", 60),
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": options,
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL scheme {parts.scheme!r} is not supported (postgres or sqlite)."
    )


VAR_DIR = Path(env_str("REPLAYHUB_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# Known on purpose so a fresh checkout runs; `check --deploy` refuses it.
DEV_SECRET_KEY = "replayhub-dev-only-secret-key-change-me-in-production"  # noqa: S105
SECRET_KEY = env_str("SECRET_KEY", DEV_SECRET_KEY)
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "csp",
    "django_htmx",
    "template_partials",
    "replayhub",
    "reviews",
]

MIDDLEWARE = [
    # Outermost: it drops the body of every answer to a HEAD request.
    "reviews.views.head_requests.HeadWithoutBody",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Inside the authentication, which says who is signed in.
    "reviews.views.page_caching.SignedInPagesNotStored",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "reviews.views.errors.NotAllowedPage",
]

ROOT_URLCONF = "replayhub.urls"
WSGI_APPLICATION = "replayhub.wsgi.application"

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
                "reviews.context_processors.user_roles",
                "reviews.together.notices.inbox",
            ],
            "builtins": ["template_partials.templatetags.partials"],
        },
    },
    {
        # Only the partials that repeat an element thousands of times a page
        # (reviews/render/jinja.py says which and why); always autoescaped.
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "DIRS": [BASE_DIR / "templates" / "jinja2"],
        "APP_DIRS": False,
        "OPTIONS": {"environment": "reviews.render.jinja.environment"},
    },
]

SQLITE_OPTIONS = {
    # WAL lets the web process read while the worker writes; IMMEDIATE avoids
    # the upgrade deadlock between two writers that both started as readers.
    "init_command": (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000;"
    ),
    "transaction_mode": "IMMEDIATE",
}

DATABASES = {
    "default": database_from_url(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'replayhub.sqlite3'}")
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not memory: the test suite's Celery worker is another process.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
    # The rollups' covering indexes are plain indexes on SQLite, which is
    # fine for the embedded default: nothing to warn a newcomer about.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "reviews:queue"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if env_bool("STATIC_MANIFEST", False)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = DEBUG

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", False) else None
)
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy, on every response. Pages show untrusted diffs, prompts
# and agent output: escaping keeps their markup inert, and this policy is the
# second line, so a slip in escaping still runs no script, loads nothing from
# elsewhere, injects no style and posts no form anywhere else. Scripts and
# styles are files under /static/ only: no inline <script>, no event handler
# attribute, no style attribute, no eval (base.html turns htmx's off). Django's
# admin runs under the same policy: it needs no exception.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

# Celery, configured for long, expensive tasks. A replay can run for tens of
# minutes: a message is acknowledged only after its task ends (acks late) and is
# given back when the worker dies; one message at a time (prefetch 1); and the
# broker's visibility timeout outlives the hard time limit, so Redis never hands
# a running replay to a second worker. Tasks claim their row with a conditional
# UPDATE, so a redelivery is harmless. Never eager: tasks run in a real worker.
# The filesystem transport has no host; naming one keeps kombu from warning.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://localhost/")
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 3 * 3600)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 60
if CELERY_BROKER_URL.startswith("filesystem://"):
    _queue_dir = VAR_DIR / "celery"
    for _sub in ("queue", "processed", "control"):
        (_queue_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir / "queue"),
        "data_folder_out": str(_queue_dir / "queue"),
        "processed_folder": str(_queue_dir / "processed"),
        "store_processed": False,
        # Broadcast (control) messages; the default is a "control" folder in the
        # current directory.
        "control_folder": str(_queue_dir / "control"),
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": CELERY_TASK_TIME_LIMIT + 600
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_MAX_TASKS_PER_CHILD = 100
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_ALWAYS_EAGER = False
CELERY_TASK_DEFAULT_QUEUE = "default"
# Celery's consumer, surviving a broker lost while it holds messages.
CELERY_WORKER_CONSUMER = "replayhub.lib.consumer:Consumer"
CELERY_TASK_ROUTES = {"replayhub.tasks.run_replay": {"queue": "replay"}}
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    # Gives back replays whose worker died (lease expired), sends again queued
    # replays whose message is gone, and touches the beat's heartbeat; every
    # minute unless REPLAYHUB_REAP_SECONDS says otherwise.
    "reap-expired-leases": {
        "task": "replayhub.tasks.reap_expired_leases",
        "schedule": float(env_int("REPLAYHUB_REAP_SECONDS", 60)),
    },
    # Starts each project's night at its window and closes ended ones.
    "nightly-tick": {
        "task": "replayhub.tasks.nightly_tick",
        "schedule": 120.0,
    },
    # Sends again the recount of any night a decision asked for and that has
    # not been counted since (a lost message, a failed recount).
    "rollup-sweep": {
        "task": "reviews.tasks.rollup_sweep",
        "schedule": 60.0,
    },
    # Queues a follow pass for each followed rollout source.
    "follow-rollouts": {
        "task": "replayhub.tasks.follow_rollouts",
        "schedule": float(env_int("REPLAYHUB_FOLLOW_SECONDS", 30)),
    },
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")


# Replays.
def traversable_by_anyone(path: Path) -> bool:
    """True when every existing ancestor of ``path`` is searchable by other users."""
    return all(
        not p.exists() or p.stat().st_mode & 0o001 for p in (path, *path.parents)
    )


def default_work_dir() -> Path:
    # The sandbox drops to an unprivileged uid, which must be able to reach the
    # replay workspaces: a checkout under a private home (/root is 0700) cannot
    # keep them in var/, so they go to a per-checkout folder in /var/tmp.
    preferred = VAR_DIR / "replays"
    if traversable_by_anyone(VAR_DIR):
        return preferred
    digest = hashlib.sha256(str(VAR_DIR).encode()).hexdigest()[:12]
    fallback = Path("/var/tmp") / f"replayhub-{os.getuid()}-{digest}"  # noqa: S108
    fallback.mkdir(mode=0o711, exist_ok=True)
    # A shared directory: refuse a name another user planted (a link or a
    # directory of theirs) instead of writing replays into it.
    info = fallback.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ImproperlyConfigured(
            f"{fallback} is not a directory owned by this user; set REPLAYHUB_WORK_DIR."
        )
    return fallback


REPLAYHUB_WORK_DIR = Path(env_str("REPLAYHUB_WORK_DIR", str(default_work_dir())))
# Each worker removes what dead workers left under its work folder at start,
# then this often (seconds).
REPLAYHUB_SWEEP_SECONDS = env_int("REPLAYHUB_SWEEP_SECONDS", 900)
# Environments built by projects' setup phases, kept per worker host: at most
# this many bytes (least recently used evicted first); a failed setup is not
# run again for the same key for this long.
REPLAYHUB_ENV_CACHE_DIR = Path(
    env_str("REPLAYHUB_ENV_CACHE_DIR", str(REPLAYHUB_WORK_DIR / "environments"))
)
REPLAYHUB_ENV_CACHE_MAX_BYTES = env_int("REPLAYHUB_ENV_CACHE_MAX_BYTES", 20 * 1024**3)
REPLAYHUB_ENV_FAILURE_SECONDS = env_int("REPLAYHUB_ENV_FAILURE_SECONDS", 3600)
# Finished agent installs, kept to be copied into later environments: beside
# the environments unless named (workers on one host that keep separate
# environment caches may share this one).
REPLAYHUB_AGENT_INSTALLS_DIR = env_str("REPLAYHUB_AGENT_INSTALLS_DIR", "")
# A directory every worker host mounts (NFS or the like): an environment built
# on one host is published there and fetched by the others instead of running
# setup again (environments/store.py). Empty: none, each host builds its own.
REPLAYHUB_ENV_STORE_DIR = env_str("REPLAYHUB_ENV_STORE_DIR", "")
# Or a bucket of an S3-compatible object store, ``s3://bucket/prefix`` (taken
# before the directory), at its endpoint (empty: AWS's); the credentials come
# from boto3's own chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a
# profile, an instance role), never from here.
REPLAYHUB_ENV_STORE_URL = env_str("REPLAYHUB_ENV_STORE_URL", "")
REPLAYHUB_ENV_STORE_ENDPOINT = env_str("REPLAYHUB_ENV_STORE_ENDPOINT", "")
# Agent CLIs fetched ahead, one folder per profile and version
# (``<profile>-<version>/npm`` an npm cache, ``/wheels`` a wheel folder), bound
# read-only into the setup phase that installs one; a release not there comes
# from its registry. Empty: none. The sandbox's uid must be able to read it.
REPLAYHUB_AGENT_CACHE = env_str("REPLAYHUB_AGENT_CACHE", "")
# Root images unpacked on this worker (manage.py image_import).
REPLAYHUB_IMAGES_DIR = Path(
    env_str("REPLAYHUB_IMAGES_DIR", str(REPLAYHUB_WORK_DIR / "images"))
)
# Bare mirrors of the projects whose repository is a URL, one per project
# and URL on each host that reads history. Replays borrow their objects, so
# the sandbox's uid must be able to read them: under var/ when others can
# reach it, else beside the replays.
REPLAYHUB_MIRROR_DIR = Path(
    env_str(
        "REPLAYHUB_MIRROR_DIR",
        str(
            VAR_DIR / "mirrors"
            if traversable_by_anyone(VAR_DIR)
            else REPLAYHUB_WORK_DIR / "mirrors"
        ),
    )
)
# The variables a project's repository credential may be read from
# (--repo-credential-env, the project form): names, or prefixes ending in *.
# Whoever registers a project chooses the URL its credential is sent to, so
# only variables the operator set aside for repository tokens may be named.
REPLAYHUB_REPO_CREDENTIAL_ENVS = env_names(
    "REPLAYHUB_REPO_CREDENTIAL_ENVS", ["REPLAYHUB_REPO_TOKEN_*"]
)
# This deployment's own secrets: never a repository credential, whatever the
# list above says (a provider's key variable never is either).
REPLAYHUB_SECRET_ENVS = (
    "SECRET_KEY",
    "DATABASE_URL",
    "POSTGRES_PASSWORD",
    "CELERY_BROKER_URL",
    "EMAIL_HOST_PASSWORD",
    "REPLAYHUB_DEMO_MODEL_KEY",
)
# A clone or fetch of a mirror ends after this many seconds, below the web's
# gunicorn --timeout (300 s), and once it has grown the mirror by this many
# bytes.
REPLAYHUB_MIRROR_FETCH_SECONDS = env_int("REPLAYHUB_MIRROR_FETCH_SECONDS", 180)
REPLAYHUB_MIRROR_FETCH_MAX_BYTES = env_int(
    "REPLAYHUB_MIRROR_FETCH_MAX_BYTES", 4 * 1024**3
)
# The runner /healthz checks; each project names its own runner.
REPLAYHUB_DEFAULT_RUNNER = env_str("REPLAYHUB_DEFAULT_RUNNER", "bwrap")
# A queued replay (or text replay) whose broker message is older than this is
# sent again (a broker restart without persistence loses messages; the database
# does not).
REPLAYHUB_REQUEUE_AFTER_SECONDS = env_int("REPLAYHUB_REQUEUE_AFTER_SECONDS", 1800)
# A queued replay is sent again sooner, after this many seconds, when the
# broker's replay queue is empty: its message is then surely gone (the beat
# looks every 60 s). Longer than admission takes to send a night's messages.
REPLAYHUB_ORPHAN_AFTER_SECONDS = env_int("REPLAYHUB_ORPHAN_AFTER_SECONDS", 90)
# /healthz calls the beat stalled when its periodic job (every 60 s) has not
# run for this long.
REPLAYHUB_BEAT_STALE_SECONDS = env_int("REPLAYHUB_BEAT_STALE_SECONDS", 180)
REPLAYHUB_LEASE_SECONDS = env_int("REPLAYHUB_LEASE_SECONDS", 120)
# A night's replay that met a remote out of reach, or a host that could not
# provision it, goes back to the queue: first this many seconds later, then
# twice as long each time up to the cap, while its night's window is open
# (replay/retries.py). A host failure is tried on at most HOST_TRIES hosts.
REPLAYHUB_RETRY_FIRST_SECONDS = env_int("REPLAYHUB_RETRY_FIRST_SECONDS", 15)
REPLAYHUB_RETRY_MAX_SECONDS = env_int("REPLAYHUB_RETRY_MAX_SECONDS", 300)
REPLAYHUB_HOST_TRIES = env_int("REPLAYHUB_HOST_TRIES", 3)
# A worker claims no replay while its work folder has less free space than
# this, and stops claiming at all after this many host failures in a row
# (until it is restarted); the status page names the hosts that stopped.
REPLAYHUB_MIN_FREE_DISK_MB = env_int("REPLAYHUB_MIN_FREE_DISK_MB", 512)
REPLAYHUB_HOST_FAILURES_TO_STOP = env_int("REPLAYHUB_HOST_FAILURES_TO_STOP", 3)
# The host a worker stops as: the machine's name, unless several workers on
# one machine have work folders of their own (one full disk stops its own).
REPLAYHUB_HOST_NAME = env_str("REPLAYHUB_HOST_NAME", "") or socket.gethostname()
# A static relay built ahead (the production image builds it in a stage of its
# own, so the worker needs no compiler); empty: built on first use under
# VAR_DIR (sandbox/relaybin.py).
REPLAYHUB_STATIC_RELAY = env_str("REPLAYHUB_STATIC_RELAY", "")
REPLAYHUB_REVIEW_LEASE_SECONDS = env_int("REPLAYHUB_REVIEW_LEASE_SECONDS", 600)
# A reviewer can take back their own decision for this long after making it.
REPLAYHUB_REVIEW_UNDO_SECONDS = env_int("REPLAYHUB_REVIEW_UNDO_SECONDS", 300)
# A decision's night is counted again this long after the first decision of a
# burst, by a worker; the decisions made meanwhile are counted in one pass.
REPLAYHUB_ROLLUP_DELAY_SECONDS = env_int("REPLAYHUB_ROLLUP_DELAY_SECONDS", 5)
# Egress attempts and refused model calls a replay keeps one by one; past
# these, they are only counted (by host and outcome, by provider and status).
REPLAYHUB_EVIDENCE_KEPT = env_int("REPLAYHUB_EVIDENCE_KEPT", 200)
# A replay's tape of model exchanges: bytes of JSON one exchange and the whole
# tape may hold (an answer past the first is left out, then its request).
REPLAYHUB_TAPE_EXCHANGE_BYTES = env_int("REPLAYHUB_TAPE_EXCHANGE_BYTES", 4 * 1024**2)
REPLAYHUB_TAPE_BYTES = env_int("REPLAYHUB_TAPE_BYTES", 32 * 1024**2)
REPLAYHUB_MAX_ATTEMPTS = env_int("REPLAYHUB_MAX_ATTEMPTS", 3)
# Mentions and assignments also go out by e-mail (Django's EMAIL_* settings) to
# users who have an address.
REPLAYHUB_NOTICE_EMAIL = env_bool("REPLAYHUB_NOTICE_EMAIL", False)
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend"
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "replayhub@localhost")

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
# "json" (default): one JSON object per line, the replay id on every line of a
# replay; "plain" for reading in a terminal.
LOG_FORMAT = env_str("LOG_FORMAT", "json")
if LOG_FORMAT not in {"json", "plain"}:
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r} is not json or plain.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "replay_id": {"()": "replayhub.logs.ReplayIdFilter"},
        "client_errors": {"()": "replayhub.logs.ClientErrorFilter"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "replayhub.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["replay_id"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # 400, 403, 404, 405: DEBUG without a traceback; 5xx stay errors.
    "loggers": {
        "django.request": {"filters": ["client_errors"]},
    },
}

# Ingest (native run records from files, the HTTP API and the upload page).
# A record's prompt above this many UTF-8 bytes is refused, naming the limit.
REPLAYHUB_MAX_PROMPT_BYTES = env_int("REPLAYHUB_MAX_PROMPT_BYTES", 1024 * 1024)
# A longer line is refused without being held in memory: the importer keeps at
# most one line, so this bounds its memory whatever the file's size.
REPLAYHUB_MAX_RECORD_BYTES = env_int("REPLAYHUB_MAX_RECORD_BYTES", 8 * 1024 * 1024)
# A run imported with a patch (a SWE-bench prediction, an agent's submission)
# keeps the patch in the database, never in the project's repository: a patch
# above this many UTF-8 bytes is refused, and so is one that would bring an
# import's patches above the second figure (they are held until it ends).
REPLAYHUB_MAX_PATCH_BYTES = env_int("REPLAYHUB_MAX_PATCH_BYTES", 1024 * 1024)
REPLAYHUB_MAX_IMPORT_PATCH_BYTES = env_int(
    "REPLAYHUB_MAX_IMPORT_PATCH_BYTES", 128 * 1024 * 1024
)
# POST /api/v1/projects/<slug>/runs answers 413 above this body size.
REPLAYHUB_API_MAX_BODY_BYTES = env_int("REPLAYHUB_API_MAX_BODY_BYTES", 16 * 1024 * 1024)
# The upload page answers 413 above this file size.
REPLAYHUB_UPLOAD_MAX_BYTES = env_int("REPLAYHUB_UPLOAD_MAX_BYTES", 256 * 1024 * 1024)
# Files up to this size are imported in the request; larger ones by a worker,
# with a page that shows the progress.
REPLAYHUB_UPLOAD_INLINE_MAX_BYTES = env_int(
    "REPLAYHUB_UPLOAD_INLINE_MAX_BYTES", 8 * 1024 * 1024
)
# An import job whose progress has not moved for this long lost its worker: it
# is queued again (importing a file twice stores nothing twice).
REPLAYHUB_IMPORT_STALE_SECONDS = env_int("REPLAYHUB_IMPORT_STALE_SECONDS", 600)
# The API and the upload page preflight at most this many pending runs per
# request (git runs per run); the rest stay pending for the next import.
REPLAYHUB_SYNC_PREFLIGHT_MAX = env_int("REPLAYHUB_SYNC_PREFLIGHT_MAX", 200)
# Followed rollout directories (import_runs --follow, the admin's follow
# sources) are looked at this often by the beat task.
REPLAYHUB_FOLLOW_SECONDS = env_int("REPLAYHUB_FOLLOW_SECONDS", 30)

# The demo's stand-in model API (``manage.py demo_model``, started by
# ``./dev run``, which sets both URLs to the two ports after PORT, or to free
# ones) and the variable that holds its key on the workers.
REPLAYHUB_DEMO_MODEL_URL = env_str("REPLAYHUB_DEMO_MODEL_URL", "http://127.0.0.1:8765")
# The demo's package index (served by ``manage.py demo_model`` too), from which
# the demo's second project installs what its tests need.
REPLAYHUB_DEMO_INDEX_URL = env_str(
    "REPLAYHUB_DEMO_INDEX_URL", "http://127.0.0.1:8766/simple/"
)
DEMO_MODEL_KEY_ENV = "REPLAYHUB_DEMO_MODEL_KEY"

# The text tier's calls to a provider: seconds to connect and between reads,
# retries after a 429 or 5xx, the first backoff (doubling), the longest answer.
REPLAYHUB_TEXT_TIMEOUT_SECONDS = env_int("REPLAYHUB_TEXT_TIMEOUT_SECONDS", 120)
REPLAYHUB_TEXT_RETRIES = env_int("REPLAYHUB_TEXT_RETRIES", 3)
REPLAYHUB_TEXT_BACKOFF_MS = env_int("REPLAYHUB_TEXT_BACKOFF_MS", 1000)
REPLAYHUB_TEXT_MAX_TOKENS = env_int("REPLAYHUB_TEXT_MAX_TOKENS", 4096)

# Attestations
# The Ed25519 key that signs replays' attestations (docs/attestations.md): the
# path of its PEM file, or the name of the environment variable holding the
# PEM. Never the key itself in a setting. With neither, nothing is signed: the
# replay page offers no attestation and the API answers 404.
REPLAYHUB_ATTESTATION_KEY_FILE = env_str("REPLAYHUB_ATTESTATION_KEY_FILE", "")
REPLAYHUB_ATTESTATION_KEY_ENV = env_str("REPLAYHUB_ATTESTATION_KEY_ENV", "")
if REPLAYHUB_ATTESTATION_KEY_ENV and not re.fullmatch(
    r"[A-Za-z_][A-Za-z0-9_]*", REPLAYHUB_ATTESTATION_KEY_ENV
):
    raise ImproperlyConfigured(
        "REPLAYHUB_ATTESTATION_KEY_ENV: name the variable that holds the key, "
        "not the key itself."
    )
# The replay page's attestation link shows only when a key is configured.
_PAGES: dict = TEMPLATES[0]
_PAGES["OPTIONS"]["context_processors"].append(
    "replayhub.attest.context_processors.attestations"
)
del _PAGES

# Outbound deliveries: commit statuses on a project's forge and its webhooks
# (replayhub.outbound, docs/outbound.md).
# The address this deployment's pages are reached at (https://replayhub.example),
# for the links in statuses and webhooks; empty: the messages carry no link.
REPLAYHUB_BASE_URL = env_str("REPLAYHUB_BASE_URL", "")
# Private, loopback, link-local and reserved addresses are never posted to
# (no SSRF into the workers' network) but for these ranges, comma-separated
# CIDRs the operator allows (a forge on the internal network).
REPLAYHUB_OUTBOUND_ALLOW_PRIVATE = env_list("REPLAYHUB_OUTBOUND_ALLOW_PRIVATE", [])
for _cidr in REPLAYHUB_OUTBOUND_ALLOW_PRIVATE:
    try:
        ipaddress.ip_network(_cidr, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"REPLAYHUB_OUTBOUND_ALLOW_PRIVATE: {_cidr!r} is not a CIDR."
        ) from None
# Seconds to connect and between reads; attempts in all (5xx, 408, 429 and
# network errors are tried again); the first wait between two, doubling.
REPLAYHUB_OUTBOUND_TIMEOUT_SECONDS = env_int("REPLAYHUB_OUTBOUND_TIMEOUT_SECONDS", 10)
REPLAYHUB_OUTBOUND_ATTEMPTS = env_int("REPLAYHUB_OUTBOUND_ATTEMPTS", 6)
REPLAYHUB_OUTBOUND_BACKOFF_SECONDS = env_int("REPLAYHUB_OUTBOUND_BACKOFF_SECONDS", 2)
# Sends again the deliveries whose message was lost or whose worker died.
CELERY_BEAT_SCHEDULE["deliver-sweep"] = {
    "task": "replayhub.tasks.deliver_sweep",
    "schedule": 300.0,
}
