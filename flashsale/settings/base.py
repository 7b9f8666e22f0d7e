"""Settings for every environment, read from environment variables in this one place.

The defaults match the local stack (``python -m stack up``): MariaDB on 3310, Redis
on 6390, ZooKeeper on 2190, all on loopback.
"""

from __future__ import annotations

import math
import socket
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse, urlsplit, urlunsplit

import environ
from django.conf import global_settings
from django.core.exceptions import ImproperlyConfigured

from .processes import DEFAULT_PROCESS, PROCESSES

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()

# --- Core ------------------------------------------------------------------------

DEBUG = env.bool("DJANGO_DEBUG", default=False)
# The kind of process this is (flashsale.settings.processes): which secrets it uses,
# and so which it is refused to start without where others can reach it.
FLASHSALE_PROCESS = env.str("FLASHSALE_PROCESS", default=DEFAULT_PROCESS)
if FLASHSALE_PROCESS not in PROCESSES:
    raise ImproperlyConfigured(f"unknown FLASHSALE_PROCESS {FLASHSALE_PROCESS!r}; choose one of: "
                               f"{', '.join(PROCESSES)}")
PROCESS_NEEDS = PROCESSES[FLASHSALE_PROCESS].needs
# A fixed development key for a process started by hand; the local stack generates
# one (.run/secret-key), and a stack others can reach must set its own (see below).
# A kind of process that signs nothing gets none unless given one: Django refuses the
# empty key wherever something reads it.
DEV_SECRET_KEY = "flashsale-local-development-only"
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or (
    DEV_SECRET_KEY if "DJANGO_SECRET_KEY" in PROCESS_NEEDS else "")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "common",
    "buyers",
    "locking",
    "inventory",
    "orders",
    "payments",
    "waitingroom",
    "races",
    "dashboard",
]

MIDDLEWARE = [
    "common.middleware.RequestIdMiddleware",
    "common.middleware.ArrivalStampMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "common.middleware.ApplicationErrorMiddleware",
]

ROOT_URLCONF = "flashsale.urls"
WSGI_APPLICATION = "flashsale.wsgi.application"
# The API's paths have no trailing slash (POST /api/orders); never redirect them.
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

# Static files are nginx's: collectstatic writes them to STATIC_ROOT (the stack and the
# Docker image run it) and nginx serves /static/ with a year's cache, which the
# content hash in every name (ManifestStaticFilesStorage) makes safe. The apps never
# serve them.
STATIC_URL = "/static/"
STATIC_ROOT = env.str("DJANGO_STATIC_ROOT", default=str(BASE_DIR / "static"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"

# --- Database (MariaDB/MySQL) ------------------------------------------------------

MYSQL_PORT = env.int("MYSQL_PORT", default=3310)
DATABASES = {
    "default": env.db(
        "DATABASE_URL", default=f"mysql://flashsale:flashsale@127.0.0.1:{MYSQL_PORT}/flashsale"
    )
}
DATABASES["default"].setdefault("OPTIONS", {}).update(
    {
        "charset": "utf8mb4",
        # MySQL's own default, which the seed articles assume. Django would pick
        # READ COMMITTED; under REPEATABLE READ the snapshot pitfalls (stock read
        # before the lock was held) are the ones a MySQL shop actually meets.
        "isolation_level": env.str("MYSQL_ISOLATION_LEVEL", default="repeatable read"),
    }
)
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE_S",
                                               default=env.int("DB_CONN_MAX_AGE", default=60))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"]["TEST"] = {"CHARSET": "utf8mb4"}

# --- Redis (idempotency flags; later the Redis lock strategies) --------------------

REDIS_PORT = env.int("REDIS_PORT", default=6390)
# Both Redis servers' password ("": none), given to each URL below that names none: a
# deployment keeps it in its secret and the URLs in its config (deploy/k8s).
REDIS_PASSWORD = env.str("REDIS_PASSWORD", default="")


def redis_url_authenticated(url: str, password: str = REDIS_PASSWORD) -> str:
    """``url`` with ``password``, unless it names one already (or there is none)."""
    parts = urlsplit(url)
    if not password or parts.password is not None:
        return url
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:{quote(password, safe='')}@"
                                            + parts.netloc.rpartition("@")[2]))


REDIS_URL = redis_url_authenticated(env.str("REDIS_URL", default=f"redis://127.0.0.1:{REDIS_PORT}/0"))
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env.str("REDIS_KEY_PREFIX", default="flashsale"),
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.DefaultClient",
            "SOCKET_CONNECT_TIMEOUT": 1,
            "SOCKET_TIMEOUT": 2,
            # redis-py's pool refuses a 101st connection at once (MaxConnectionsError);
            # a process with more threads than that (scenario S19's crowd) needs more.
            "CONNECTION_POOL_KWARGS": {"max_connections": 512},
        },
    }
}

# --- ZooKeeper ------------------------------------------------------------------

ZK_PORT = env.int("ZK_PORT", default=2190)
ZOOKEEPER_HOSTS = env.str("ZOOKEEPER_HOSTS", default=f"127.0.0.1:{ZK_PORT}")
# The zookeeper lock's credentials ("user:password", digest; "": none): its nodes are
# that user's alone (locking.backends.zookeeper).
ZOOKEEPER_AUTH = env.str("ZOOKEEPER_AUTH", default="")

# --- Flash sale: strategy, instance, limits -----------------------------------------

# A name in common.strategies; an unknown one stops the start-up (common.apps).
FLASHSALE_STRATEGY = env.str("FLASHSALE_STRATEGY", default="atomic")
# A file whose absence holds this process's purchases (orders.barrier): an instance
# started with a new strategy sells nothing until the last one of the old has stopped
# (`make up` creates it then). "": never held.
FLASHSALE_PURCHASES_HELD_UNTIL_FILE = env.str("FLASHSALE_PURCHASES_HELD_UNTIL_FILE",
                                              default=env.str("FLASHSALE_PURCHASES_HELD_UNTIL", default=""))

# Reported in every response, so a client can see which instance served it.
FLASHSALE_INSTANCE = env.str("FLASHSALE_INSTANCE", default=socket.gethostname())
FLASHSALE_MAX_PER_ORDER = env.int("FLASHSALE_MAX_PER_ORDER", default=5)
# Units one buyer (user_id) may buy of one product over the whole sale, counted in the
# database under every strategy; 0: no limit (the load tests' buyers are all distinct).
FLASHSALE_PER_USER_LIMIT = env.int("FLASHSALE_PER_USER_LIMIT", default=0)
# Rows a product's stock is split into by a reset that does not say (article 004's
# segmented lock): N segments let N buyers of one product in at once.
FLASHSALE_STOCK_SEGMENTS = env.int("FLASHSALE_STOCK_SEGMENTS", default=1)
# Sleep inside the critical section so the race shows on a 2-core machine. It
# lengthens every locked section too: take throughput figures with it at 0.
# (FLASHSALE_RACE_DELAY_MS is its old name, still read.)
FLASHSALE_SECTION_DELAY_MS = env.float("FLASHSALE_SECTION_DELAY_MS",
                                       default=env.float("FLASHSALE_RACE_DELAY_MS", default=0.0))
# How long a purchase waits for the stock lock before answering 503 busy.
FLASHSALE_LOCK_WAIT_TIMEOUT_S = env.float("FLASHSALE_LOCK_WAIT_TIMEOUT_S",
                                          default=env.float("FLASHSALE_LOCK_WAIT_TIMEOUT", default=5.0))
# Row locks: a statement waits at most the purchase's lock wait for a row another
# transaction holds (the stock row under atomic or optimistic; the MySQL lock
# strategies set their own per acquisition), then gives up (503 busy).
# A transaction left idle longer than that (its process paused, its thread starved)
# is ended by MariaDB, and the rows and lock rows it held are freed: a stopped holder
# stalls the sale for seconds, not until it resumes. Longer than the row lock wait,
# so the stopped process's own waiters give up before they could be granted the row
# and stall the sale once more each. A purchase never idles that long; 0 turns it
# off. (MariaDB's own variable: unset it for MySQL.)
DB_IDLE_TRANSACTION_TIMEOUT_S = env.int(
    "DB_IDLE_TRANSACTION_TIMEOUT_S",
    default=env.int("DB_IDLE_TRANSACTION_TIMEOUT", default=int(FLASHSALE_LOCK_WAIT_TIMEOUT_S) + 1))
# How long a statement waits for a table's metadata lock (MariaDB's lock_wait_timeout,
# a day unless set; 0: the server's). The migrations' Job sets it short: an ALTER that
# waits behind a long transaction makes every later query of the table wait behind
# it, the sale's included, so it gives up and is retried instead.
DB_LOCK_WAIT_TIMEOUT_S = env.int("DB_LOCK_WAIT_TIMEOUT_S", default=0)
# Ids MySQL hands out are odd (auto_increment_increment 2, offset 1): the gate's
# order ids, allocated in Redis before their row exists, are even (orders.gate), and
# an explicit id never pushes MySQL's counter onto one the gate will still hand out.
DATABASES["default"]["OPTIONS"]["init_command"] = "SET SESSION " + ", ".join(
    [f"innodb_lock_wait_timeout = {math.ceil(FLASHSALE_LOCK_WAIT_TIMEOUT_S)}",
     "auto_increment_increment = 2", "auto_increment_offset = 1"]
    + ([f"idle_transaction_timeout = {DB_IDLE_TRANSACTION_TIMEOUT_S}"]
       if DB_IDLE_TRANSACTION_TIMEOUT_S else [])
    + ([f"lock_wait_timeout = {DB_LOCK_WAIT_TIMEOUT_S}"] if DB_LOCK_WAIT_TIMEOUT_S else []))
# How often an optimistic purchase redoes its transaction after finding the stock
# changed before answering 503 busy.
FLASHSALE_OPTIMISTIC_RETRIES = env.int("FLASHSALE_OPTIMISTIC_RETRIES", default=10)
# Pass the lock's fencing token (setnx, redisson, zookeeper) to the stock write,
# which refuses a holder whose lock expired and went to a newer one. Only scenario
# S17 turns it off (override_settings), to show a stale holder's write landing:
# deliberately no environment variable, so no deployment switches it off by accident.
FLASHSALE_FENCING = True
# Once the stock is gone, answer sold out from a Redis state without lock or
# transaction; once a segmented product's stock is short of a purchase, by a fresh
# read, without its segments' locks. Off: every purchase pays the full path (to
# compare lock costs).
FLASHSALE_SOLD_OUT_FAST_PATH = env.bool("FLASHSALE_SOLD_OUT_FAST_PATH",
                                        default=env.bool("FLASHSALE_SOLDOUT_FAST_PATH", default=True))
# Whether the purchases are counted for /metrics (common.metrics, orders.metrics):
# off only to measure what counting costs.
FLASHSALE_METRICS = env.bool("FLASHSALE_METRICS", default=True)
# The Prometheus the dashboard's panel data is asked of (/dashboard/data/<panel>), by
# the server: visitors send no query of their own. Empty: the panels answer 503.
FLASHSALE_PROMETHEUS_URL = env.str("FLASHSALE_PROMETHEUS_URL", default="")
# All of a panel's data request (waiting for another's fill, then its queries): it
# holds a worker that sells, so well under a purchase's deadline.
FLASHSALE_PROMETHEUS_TIMEOUT_S = env.float("FLASHSALE_PROMETHEUS_TIMEOUT_S", default=2.0)
# What /metrics reads when Prometheus scrapes, besides what the workers counted: the
# gate's backlog is read from Redis by the apps, so that it shows with the persisters
# down; the live sales' stock and oversold units from the database; the waiting rooms'
# queues from Redis.
FLASHSALE_METRICS_COLLECTORS = ["orders.gate.backlog.GateBacklogCollector",
                                "orders.watch.SaleWatchCollector",
                                "waitingroom.metrics.RoomCollector"]
# Answer a plain JSON purchase before Django's middleware chain and DRF's view
# (orders.wsgi), with the same answer. Off: every purchase takes Django's whole
# path (to measure what that path costs: docs/strategies/gate.md).
# (FLASHSALE_PURCHASE_FRONT is its old name, still read.)
FLASHSALE_PURCHASE_SHORTCUT = env.bool("FLASHSALE_PURCHASE_SHORTCUT",
                                       default=env.bool("FLASHSALE_PURCHASE_FRONT", default=True))
# How long the product page's cached answer counts as fresh (inventory.reads): the
# stock it shows is at most this, plus one rebuild, behind the database.
FLASHSALE_PRODUCT_FRESH_MS = env.int("FLASHSALE_PRODUCT_FRESH_MS", default=500)
# ... and how long each process keeps what it read from there, on top.
FLASHSALE_PRODUCT_LOCAL_MS = env.int("FLASHSALE_PRODUCT_LOCAL_MS", default=100)
# The full audit, for the admin at /api/products/<sku>/audit
# (orders.selectors.sale_audit_recent): that of a sale of
# FLASHSALE_AUDIT_KEEP_FROM_ORDERS orders or more is kept for FLASHSALE_AUDIT_KEEP_MS
# by each instance; a smaller sale's is never kept.
FLASHSALE_AUDIT_KEEP_MS = env.int("FLASHSALE_AUDIT_KEEP_MS", default=1000)
FLASHSALE_AUDIT_KEEP_FROM_ORDERS = env.int("FLASHSALE_AUDIT_KEEP_FROM_ORDERS", default=10_000)
# The public summary at /api/products/<sku>/audit/summary is kept in the shared cache
# this long, for every instance at once: an answer is at most this plus one audit old.
FLASHSALE_AUDIT_SUMMARY_MS = env.int("FLASHSALE_AUDIT_SUMMARY_MS", default=1000)
# A purchase older than this (its process was paused, or starved) is not committed
# (503 busy, nothing written): nginx has answered 504 for it at 10 s, and its client
# has moved on. Below nginx's proxy_read_timeout and the age at which a claim is stale.
FLASHSALE_PURCHASE_DEADLINE_S = env.float("FLASHSALE_PURCHASE_DEADLINE_S",
                                          default=env.float("FLASHSALE_PURCHASE_DEADLINE", default=8.0))
# Idempotency flags in Redis: a request claims its key before any work (and drops the
# claim when it fails); a completed purchase's flag answers replays for a day. A
# claim whose request has not finished after FLASHSALE_IDEMPOTENCY_PENDING_TTL_S is
# stale: its instance died between its work and its answer. A retry that finds it
# asks the database (the order, or nothing) and takes the key over. The claim does
# not expire by itself: an expired claim of an order that committed just before its
# instance died would look like a key never used. The stale age outlives the request
# (its deadline) but not by much: a dead instance's keys are free in seconds.
FLASHSALE_IDEMPOTENCY_PENDING_TTL_S = env.int(
    "FLASHSALE_IDEMPOTENCY_PENDING_TTL_S",
    default=env.int("FLASHSALE_IDEMPOTENCY_PENDING_TTL",
                    default=math.ceil(FLASHSALE_PURCHASE_DEADLINE_S) + 2))
# How long a retry whose key's first request is still in flight waits for its outcome
# before answering 503 busy.
FLASHSALE_INFLIGHT_WAIT_S = env.float("FLASHSALE_INFLIGHT_WAIT_S",
                                      default=env.float("FLASHSALE_INFLIGHT_WAIT", default=2.0))
FLASHSALE_IDEMPOTENCY_TTL_S = env.int("FLASHSALE_IDEMPOTENCY_TTL_S",
                                      default=env.int("FLASHSALE_IDEMPOTENCY_TTL", default=24 * 3600))
# The gate strategy (orders.gate): its Redis (the sale's stock, the order stream);
# a Redis Cluster when FLASHSALE_GATE_REDIS_CLUSTER is true (every key of one product
# shares a hash tag, so one script touches one slot). A server of its own, never the
# cache's: orders answered 201 live there until a persister writes them, and a flush
# of the cache (cache.clear()) or an eviction must not reach them. It runs noeviction.
REDIS_GATE_PORT = env.int("REDIS_GATE_PORT", default=REDIS_PORT + 1)
FLASHSALE_GATE_REDIS_URL = redis_url_authenticated(
    env.str("FLASHSALE_GATE_REDIS_URL", default=f"redis://127.0.0.1:{REDIS_GATE_PORT}/0"))
FLASHSALE_GATE_REDIS_CLUSTER = env.bool("FLASHSALE_GATE_REDIS_CLUSTER", default=False)
# Or a primary behind Redis Sentinel: FLASHSALE_GATE_REDIS_SENTINELS ("host:port,...")
# names the sentinels, which name the master of FLASHSALE_GATE_REDIS_SENTINEL_SERVICE;
# the URL then gives only its database (and its password). Each new connection goes to
# the master the sentinels name at that moment.
FLASHSALE_GATE_REDIS_SENTINELS = [(host, int(port)) for host, port in
                                  (address.rsplit(":", 1)
                                   for address in env.list("FLASHSALE_GATE_REDIS_SENTINELS", default=[]))]
FLASHSALE_GATE_REDIS_SENTINEL_SERVICE = env.str("FLASHSALE_GATE_REDIS_SENTINEL_SERVICE",
                                                default="flashsale-gate")
if FLASHSALE_GATE_REDIS_SENTINELS and FLASHSALE_GATE_REDIS_CLUSTER:
    raise ImproperlyConfigured("the gate's Redis is a Cluster or behind Sentinel, not both")
# The sale's scripts of the purchases a process serves at once go to the gate's Redis
# together, one write and one read for all (orders/gate/pipeline.py); off: each in a
# round trip of its own. Not on a Redis Cluster, whose client runs each script.
FLASHSALE_GATE_PIPELINE = env.bool("FLASHSALE_GATE_PIPELINE", default=True)
# How many replicas of the gate's Redis must hold what a purchase's script wrote (and
# what it read) before the purchase is answered: WAIT after the script, on its
# connection. 0: the primary alone, as a single machine has it (its append-only file
# is the durability). A WAIT that times out (FLASHSALE_GATE_REPLICA_WAIT_MS) answers
# "outcome unknown" for an accepted order, "unavailable" for a refusal, never 201.
FLASHSALE_GATE_REPLICAS = env.int("FLASHSALE_GATE_REPLICAS", default=0)
FLASHSALE_GATE_REPLICA_WAIT_MS = env.int("FLASHSALE_GATE_REPLICA_WAIT_MS", default=200)
if FLASHSALE_GATE_REPLICAS < 0 or FLASHSALE_GATE_REPLICA_WAIT_MS < 1:
    raise ImproperlyConfigured("FLASHSALE_GATE_REPLICAS must be 0 or more, "
                               "FLASHSALE_GATE_REPLICA_WAIT_MS 1 or more")
# Once a gate sale's stock is 0, each process answers its purchases sold out from
# memory, without the script, for this long at a time (then asks Redis again); a reset
# of a sold-out sale answers only after that long, so no process answers from the old
# sale after it. Only while FLASHSALE_SOLD_OUT_FAST_PATH is on. Keyed purchases are
# answered from memory when the sale accepted at most FLASHSALE_GATE_SOLD_OUT_KEYS
# keys (each process holds them, to tell a replay from a new purchase); past that,
# they run the script.
FLASHSALE_GATE_SOLD_OUT_MEMORY_S = env.float("FLASHSALE_GATE_SOLD_OUT_MEMORY_S",
                                             default=env.float("FLASHSALE_GATE_SOLD_OUT_MEMORY", default=0.5))
# How long a process remembers which strategy a product's sale runs under (the
# purchase's one decision, orders.resolve.strategy_resolve) instead of asking Redis
# on every purchase. A reset that changes a product's strategy answers only after
# this long, so that no process sells the new sale under the old strategy.
FLASHSALE_STRATEGY_MEMORY_S = env.float("FLASHSALE_STRATEGY_MEMORY_S",
                                        default=env.float("FLASHSALE_STRATEGY_MEMORY", default=1.0))
FLASHSALE_GATE_SOLD_OUT_KEYS = env.int("FLASHSALE_GATE_SOLD_OUT_KEYS", default=20_000)
# The persister (manage.py persist_orders): most orders one transaction writes, and
# how long an entry may sit unacknowledged with a consumer before another claims it
# (the consumer died or stopped mid-batch). A live one commits a batch in milliseconds.
FLASHSALE_GATE_BATCH = env.int("FLASHSALE_GATE_BATCH", default=200)
FLASHSALE_GATE_CLAIM_IDLE_MS = env.int("FLASHSALE_GATE_CLAIM_IDLE_MS", default=5_000)
# How long a persister waits after a round that found less than a batch, for the
# next to find more (orders.gate.persister.Persister): an order's wait to be written
# grows by up to this, a round's CPU is shared by more orders.
FLASHSALE_GATE_LINGER_MS = env.int("FLASHSALE_GATE_LINGER_MS", default=50)
# The expirer (manage.py expire_orders, payments.expiry): most orders one transaction
# expires, and how long it waits between passes. An order is expired at most this long
# after its window ends.
FLASHSALE_EXPIRY_BATCH = env.int("FLASHSALE_EXPIRY_BATCH", default=500)
FLASHSALE_EXPIRY_INTERVAL_S = env.float("FLASHSALE_EXPIRY_INTERVAL_S", default=1.0)
# A pause with a batch in hand (claimed, its units not yet back everywhere): 0 but in
# the verdicts, which kill an expirer there.
FLASHSALE_EXPIRY_PAUSE_MS = env.float("FLASHSALE_EXPIRY_PAUSE_MS", default=0.0)
# How long past its window an order may still be paid before the expirer takes its
# units back: a payment the buyer confirmed at the last second, whose webhook comes
# a little later, still counts as in time.
FLASHSALE_PAYMENT_GRACE_S = env.float("FLASHSALE_PAYMENT_GRACE_S", default=5.0)
# The payment provider (payments.provider): Stripe's API, or the stack's stand-in
# (payprovider), which the stack points these at. Without a key, paying answers 503.
FLASHSALE_PAYMENTS_API_BASE = env.str("FLASHSALE_PAYMENTS_API_BASE", default="https://api.stripe.com")
FLASHSALE_PAYMENTS_API_KEY = env.str("FLASHSALE_PAYMENTS_API_KEY", default="")
FLASHSALE_PAYMENTS_WEBHOOK_SECRET = env.str("FLASHSALE_PAYMENTS_WEBHOOK_SECRET", default="")
# The waiting room (waitingroom): a place whose holder has not asked for this long is
# skipped when its turn comes (a page asks every few seconds); one address takes at
# most this many places a sale (0: no bound; shared addresses, a NAT, need room).
FLASHSALE_ROOM_ABANDON_S = env.int("FLASHSALE_ROOM_ABANDON_S", default=20)
FLASHSALE_ROOM_PLACES_PER_ADDRESS = env.int("FLASHSALE_ROOM_PLACES_PER_ADDRESS", default=10)
# What one unit costs, in the currency's minor unit (cents), and the currency.
FLASHSALE_UNIT_PRICE = env.int("FLASHSALE_UNIT_PRICE", default=999)
FLASHSALE_CURRENCY = env.str("FLASHSALE_CURRENCY", default="usd")
# Where the race runner (manage.py run_races) sends a race's buyers: the stack's own
# nginx, never an address a request names.
FLASHSALE_RACE_TARGET = env.str("FLASHSALE_RACE_TARGET", default="http://127.0.0.1:8080")
# A directory where the race runner records each race's history, race-<id>.jsonl
# (common.history; python -m verdicts check judges one). Empty: none recorded.
FLASHSALE_RACE_HISTORIES = env.str("FLASHSALE_RACE_HISTORIES", default="")
# Token for the admin API (reset). Empty: only a staff session may reset.
FLASHSALE_ADMIN_TOKEN = env.str("FLASHSALE_ADMIN_TOKEN", default="")
# Where the stack is published (docker-compose passes its NGINX_BIND). Beyond
# loopback, others can reach the admin API: the apps refuse to start while a
# credential is missing or well known (the compose file's defaults, the dev key).
FLASHSALE_PUBLIC_BIND = env.str("FLASHSALE_PUBLIC_BIND", default="127.0.0.1")
WELL_KNOWN_SECRETS = {"", "change-me", "flashsale", "flashsale-root", DEV_SECRET_KEY}
WELL_KNOWN_WEBHOOK_SECRETS = {"whsec_compose"}  # docker-compose.yml's, for its stand-in
# The admin token and the secret key are guessed offline or by the thousand: at least
# this long (token_urlsafe(32) is 43).
SECRET_MIN_LENGTH = 32


def weak_secret(value: str, min_length: int = 1) -> bool:
    """Whether ``value`` is missing, well known or shorter than ``min_length``."""
    return value in WELL_KNOWN_SECRETS or len(value) < min_length


def refuse_weak_secrets(where: str, secrets: dict[str, tuple[str, int]]) -> None:
    """Stop the process when a credential is missing, well known or shorter than its
    least length: ``secrets`` gives each one's value and least length by the name a
    message gives it; ``where`` says why that matters here."""
    weak = [name for name, (value, min_length) in secrets.items() if weak_secret(value, min_length)]
    if weak:
        raise ImproperlyConfigured(
            f"refusing to start: {where} while {', '.join(weak)} {'is' if len(weak) == 1 else 'are'} "
            f"missing, well known or short (the token and the key: at least {SECRET_MIN_LENGTH} "
            "characters); set each to a secret of your own, e.g. "
            "python -c \"import secrets; print(secrets.token_urlsafe(32))\" (.env.example)")


if not (FLASHSALE_PUBLIC_BIND in ("localhost", "::1") or FLASHSALE_PUBLIC_BIND.startswith("127.")):
    refuse_weak_secrets(f"published on {FLASHSALE_PUBLIC_BIND} (beyond loopback)", {
        **{name: (value, SECRET_MIN_LENGTH) for name, value in (
            ("FLASHSALE_ADMIN_TOKEN", FLASHSALE_ADMIN_TOKEN), ("DJANGO_SECRET_KEY", SECRET_KEY))
           if name in PROCESS_NEEDS},
        "DB_PASSWORD": (DATABASES["default"].get("PASSWORD", ""), 1)})
    # Whoever knows the webhook's secret can sign a payment that never happened: the
    # compose file's stand-in default is for loopback only (empty: payments off).
    if FLASHSALE_PAYMENTS_WEBHOOK_SECRET in WELL_KNOWN_WEBHOOK_SECRETS:
        raise ImproperlyConfigured(
            f"refusing to start: published on {FLASHSALE_PUBLIC_BIND} (beyond loopback) while "
            "FLASHSALE_PAYMENTS_WEBHOOK_SECRET is well known; set it to your endpoint's signing secret")
# Wrong admin tokens one client address may send before the next are answered 429
# (orders.auth), DRF's "<n>/<s|m|h|d>"; empty: not counted.
FLASHSALE_ADMIN_FAILURES = env.str("FLASHSALE_ADMIN_FAILURES", default="10/m")
# The product the browser page shows when the URL names none.
FLASHSALE_DEMO_SKU = env.str("FLASHSALE_DEMO_SKU", default="demo-1")

# Leases: how long a holder that died (or stopped) keeps the stock from everyone.
# A purchase holds its lock for milliseconds, so a few seconds leave a wide margin;
# past it, a slow holder's lease runs out and the fencing token refuses its write
# (503 stale_lock, nothing kept). Redisson's watchdog renews a live holder every
# third of its lease; setnx has no watchdog. ZooKeeper's session cannot be shorter
# than two ticks of the server (4 s with the stack's tickTime of 2 s).
FLASHSALE_SETNX_TTL_MS = env.int("FLASHSALE_SETNX_TTL_MS", default=5_000)
FLASHSALE_WATCHDOG_TIMEOUT_MS = env.int("FLASHSALE_WATCHDOG_TIMEOUT_MS", default=5_000)
# How long the Redis locks wait for a reply before their server counts as unreachable.
FLASHSALE_LOCK_REDIS_TIMEOUT_S = env.float("FLASHSALE_LOCK_REDIS_TIMEOUT_S",
                                           default=env.float("FLASHSALE_LOCK_REDIS_TIMEOUT", default=5.0))
FLASHSALE_ZK_SESSION_TIMEOUT_S = env.float("FLASHSALE_ZK_SESSION_TIMEOUT_S",
                                           default=env.float("FLASHSALE_ZK_SESSION_TIMEOUT", default=4.0))

# One alias per lock; each strategy names the one that guards its stock
# (common.strategies), and those that take none share "null".
LOCKING: dict[str, dict[str, Any]] = {
    "null": {"BACKEND": "locking.backends.null.NullLockBackend"},
    "local": {
        "BACKEND": "locking.backends.local.LocalLockBackend",
        "OPTIONS": {"wait_timeout": FLASHSALE_LOCK_WAIT_TIMEOUT_S},
    },
    "setnx": {
        "BACKEND": "locking.backends.redis.setnx.SetnxLockBackend",
        "OPTIONS": {
            "url": REDIS_URL,
            "socket_timeout": FLASHSALE_LOCK_REDIS_TIMEOUT_S,
            "key_prefix": "flashsale:lock:",
            "ttl_ms": FLASHSALE_SETNX_TTL_MS,
            "retry_interval": env.float("FLASHSALE_SETNX_RETRY_MS", default=20) / 1000,
            "wait_timeout": FLASHSALE_LOCK_WAIT_TIMEOUT_S,
        },
    },
    "redisson": {
        "BACKEND": "locking.backends.redis.redisson.RedissonLockBackend",
        "OPTIONS": {
            "url": REDIS_URL,
            "socket_timeout": FLASHSALE_LOCK_REDIS_TIMEOUT_S,
            "key_prefix": "flashsale:rlock:",
            "watchdog_timeout_ms": FLASHSALE_WATCHDOG_TIMEOUT_MS,
            "wait_timeout": FLASHSALE_LOCK_WAIT_TIMEOUT_S,
        },
    },
    "redisson-fair": {
        "BACKEND": "locking.backends.redis.redisson_fair.RedissonFairLockBackend",
        "OPTIONS": {
            "url": REDIS_URL,
            "socket_timeout": FLASHSALE_LOCK_REDIS_TIMEOUT_S,
            "key_prefix": "flashsale:fairlock:",
            "watchdog_timeout_ms": FLASHSALE_WATCHDOG_TIMEOUT_MS,
            "waiter_timeout_ms": env.int("FLASHSALE_FAIR_WAITER_TIMEOUT_MS", default=3_000),
            "wait_timeout": FLASHSALE_LOCK_WAIT_TIMEOUT_S,
        },
    },
    "zookeeper": {
        "BACKEND": "locking.backends.zookeeper.ZooKeeperLockBackend",
        "OPTIONS": {
            "hosts": ZOOKEEPER_HOSTS,
            "auth": ZOOKEEPER_AUTH,
            "root": "/flashsale/locks",
            "session_timeout": FLASHSALE_ZK_SESSION_TIMEOUT_S,
            "wait_timeout": FLASHSALE_LOCK_WAIT_TIMEOUT_S,
        },
    },
    "mysql": {
        "BACKEND": "locking.backends.mysql.InsertLockBackend",
        "OPTIONS": {"using": "default", "wait_timeout": FLASHSALE_LOCK_WAIT_TIMEOUT_S},
    },
    "mysql-for-update": {
        "BACKEND": "locking.backends.mysql.ForUpdateLockBackend",
        "OPTIONS": {"using": "default", "wait_timeout": FLASHSALE_LOCK_WAIT_TIMEOUT_S},
    },
}

# Redis behind Sentinel ("host:port,host:port"; empty: REDIS_URL's server): the cache
# and the Redis locks ask the sentinels for the master of REDIS_SENTINEL_SERVICE at
# each new connection, and follow a failover; REDIS_URL then names only the database.
REDIS_SENTINELS = [(host, int(port)) for host, port in
                   (address.rsplit(":", 1) for address in env.list("REDIS_SENTINELS", default=[]))]
REDIS_SENTINEL_SERVICE = env.str("REDIS_SENTINEL_SERVICE", default="flashsale")
if REDIS_SENTINELS:
    CACHES["default"]["LOCATION"] = f"redis://{REDIS_SENTINEL_SERVICE}{urlparse(REDIS_URL).path}"
    CACHES["default"]["OPTIONS"].update(
        CONNECTION_FACTORY="django_redis.pool.SentinelConnectionFactory", SENTINELS=REDIS_SENTINELS,
        SENTINEL_KWARGS={"socket_timeout": 1, "socket_connect_timeout": 1})
    for _alias in LOCKING.values():
        if _alias.get("OPTIONS", {}).get("url") == REDIS_URL:
            _alias["OPTIONS"].update(sentinels=REDIS_SENTINELS, service=REDIS_SENTINEL_SERVICE)

# --- REST framework ----------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_PARSER_CLASSES": ["common.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "common.negotiation.SingleFormatNegotiation",
    "EXCEPTION_HANDLER": "common.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Proxies in front of the instances (nginx): a throttle counts the address the
    # first of them saw, not a forwarded header a client could write.
    "NUM_PROXIES": env.int("FLASHSALE_TRUSTED_PROXIES", default=1),
}
# Buyers (buyers/): with FLASHSALE_BUYER_AUTH (the default) a purchase needs a buyer's
# credentials (a bearer token, or the shop page's session with its CSRF token), takes
# the buyer from them (a body user_id is refused), and an order is shown to its buyer
# only. Off, the buyer is the body's user_id, as in the seckill articles' demos.
FLASHSALE_BUYER_AUTH = env.bool("FLASHSALE_BUYER_AUTH", default=True)
# The tokens' signing key (empty: one derived from SECRET_KEY) and lifetime in seconds.
FLASHSALE_BUYER_TOKEN_KEY = env.str("FLASHSALE_BUYER_TOKEN_KEY", default="")
FLASHSALE_BUYER_TOKEN_TTL_S = env.int("FLASHSALE_BUYER_TOKEN_TTL_S",
                                      default=env.int("FLASHSALE_BUYER_TOKEN_TTL", default=3600))
# How often a process reads again the buyers whose tokens were withdrawn (deactivated
# or deleted; buyers.withdrawals): a withdrawn token is refused within this long.
FLASHSALE_BUYER_WITHDRAWN_REFRESH_S = env.float("FLASHSALE_BUYER_WITHDRAWN_REFRESH_S", default=1.0)
# New buyers (POST /api/buyers) and sign-ins per client address; empty: off.
FLASHSALE_THROTTLE_SIGN_UP = env.str("FLASHSALE_THROTTLE_SIGN_UP", default="30/m")
# Proof of work (common.challenges): the zero bits a new account's challenge asks (0:
# none; a waiting room's is its sale's, set by its reset), and how long a challenge is
# good for. 16 bits: about 65,000 hashes, well under a second in the page's worker.
FLASHSALE_SIGN_UP_CHALLENGE_BITS = env.int("FLASHSALE_SIGN_UP_CHALLENGE_BITS", default=16)
FLASHSALE_CHALLENGE_TTL_S = env.int("FLASHSALE_CHALLENGE_TTL_S", default=120)
# Sign-in lockout (buyers.lockout): failed sign-ins a client, and a username, may make
# before each further one locks it out (0: not counted), from 1 s doubling up to the
# most; failures are forgotten this long after the last.
FLASHSALE_SIGN_IN_FREE_PER_CLIENT = env.int("FLASHSALE_SIGN_IN_FREE_PER_CLIENT", default=20)
FLASHSALE_SIGN_IN_FREE_PER_USERNAME = env.int("FLASHSALE_SIGN_IN_FREE_PER_USERNAME", default=10)
FLASHSALE_SIGN_IN_LOCKOUT_MAX_S = env.int("FLASHSALE_SIGN_IN_LOCKOUT_MAX_S", default=900)
FLASHSALE_SIGN_IN_FORGET_S = env.int("FLASHSALE_SIGN_IN_FORGET_S", default=3600)
# The page's sign-in and sign-out go back to the shop.
LOGIN_URL = "sign-in"
LOGIN_REDIRECT_URL = LOGOUT_REDIRECT_URL = "/"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# New passwords hashed with MD5: Django's advice for a test suite, whose PBKDF2 is the
# cost of its sign-ups and sign-ins (make test's stacks set it; production refuses it).
# A password hashed either way is checked either way.
FLASHSALE_QUICK_PASSWORD_HASHING = env.bool("FLASHSALE_QUICK_PASSWORD_HASHING", default=False)
if FLASHSALE_QUICK_PASSWORD_HASHING:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *global_settings.PASSWORD_HASHERS]
# Declined payments per order and per buyer (payments.throttles), DRF rates; past
# one, the pay endpoint answers 429 without asking the provider; empty: not counted.
FLASHSALE_PAY_DECLINES_PER_ORDER = env.str("FLASHSALE_PAY_DECLINES_PER_ORDER", default="5/h")
FLASHSALE_PAY_DECLINES_PER_BUYER = env.str("FLASHSALE_PAY_DECLINES_PER_BUYER", default="10/h")
# Purchase throttles (orders.throttles), DRF rates "<n>/<s|m|h|d>"; empty: off.
FLASHSALE_THROTTLE_USER = env.str("FLASHSALE_THROTTLE_USER", default="5/s")
FLASHSALE_THROTTLE_ADDRESS = env.str("FLASHSALE_THROTTLE_ADDRESS", default="100/s")

SPECTACULAR_SETTINGS = {
    "TITLE": "flashsale",
    "DESCRIPTION": "A flash-sale purchase API with pluggable concurrency strategies.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The docs page's assets from the sidecar package, collected and served by nginx.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # One name per choice set the API uses in more than one place.
    "ENUM_NAME_OVERRIDES": {"StrategyEnum": "common.strategies.STRATEGY_NAMES",
                            "RaceStatusEnum": "races.apis.RACE_STATUSES",
                            "OrderStatusEnum": "orders.apis.ORDER_STATUSES"},
}

# --- Logging ---------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # JSON, a line each, with the request's id (common.requestlog): what nginx's
    # access log names the request by. LOG_FORMAT=plain for a terminal.
    "formatters": {
        "json": {"()": "pythonjsonlogger.json.JsonFormatter", "style": "{",
                 "fmt": "{asctime}{levelname}{name}{message}{request_id}",
                 "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"}},
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"},
    },
    "filters": {"request_id": {"()": "common.requestlog.RequestIdFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["request_id"],
                             "formatter": env.str("LOG_FORMAT", default="json")}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="WARNING")},
    # Django logs every 4xx answer as a warning. Here a refusal is the sale's answer
    # (most of a flash sale's answers are 409 sold out), not a fault. 5xx are logged.
    # orders.auth: every admin action, one line at INFO, whatever LOG_LEVEL says; so
    # orders.gate.persister: every order written or dead-lettered, named for its request.
    "loggers": {"django.request": {"level": "ERROR"}, "orders.auth": {"level": "INFO"},
                "orders.gate.persister": {"level": "INFO"}},
}
