"""The kinds of flashsale process, and the secrets each one uses.

``FLASHSALE_PROCESS`` names the kind a process is (``web`` unless set: the kind that
uses every secret). Under the production settings a process refuses to start without
the secrets its kind needs, and a deployment gives it no other: ``deploy/k8s`` hands
each container exactly these keys of the Secret ``flashsale-secrets``
(``tests/test_k8s_secrets.py`` holds the manifests to this table). A persister whose
memory or environment leaks gives away no key that signs buyers' tokens or opens the
admin API. The database password is not here: each process has its role's database
user in ``DATABASE_URL`` (``flashsale-db-users``), and every kind needs one.

A secret a process of another kind needs is empty in it, and Django refuses an empty
``SECRET_KEY`` where it is read: code that reached for a secret its process was not
given fails at once, instead of signing with a default.
"""

from __future__ import annotations

from dataclasses import dataclass

SECRET_KEY = "DJANGO_SECRET_KEY"
ADMIN_TOKEN = "FLASHSALE_ADMIN_TOKEN"
REDIS_PASSWORD = "REDIS_PASSWORD"
ZOOKEEPER_AUTH = "ZOOKEEPER_AUTH"
BUYER_TOKEN_KEY = "FLASHSALE_BUYER_TOKEN_KEY"
PAYMENTS_API_KEY = "FLASHSALE_PAYMENTS_API_KEY"
PAYMENTS_WEBHOOK_SECRET = "FLASHSALE_PAYMENTS_WEBHOOK_SECRET"


@dataclass(frozen=True)
class Process:
    """A kind of process: the secrets it refuses to start without, and those it takes
    when the deployment has them (without, the part that uses one is off)."""

    why: str
    needs: tuple[str, ...]
    may: tuple[str, ...] = ()

    @property
    def secrets(self) -> tuple[str, ...]:
        return self.needs + self.may


PROCESSES = {
    "web": Process(
        "the app instances: buyers' tokens and the session's signatures (the secret key), the admin API, "
        "both Redis servers, ZooKeeper's locks; the provider's key and webhook secret when payments are on",
        needs=(SECRET_KEY, ADMIN_TOKEN, REDIS_PASSWORD, ZOOKEEPER_AUTH),
        may=(BUYER_TOKEN_KEY, PAYMENTS_API_KEY, PAYMENTS_WEBHOOK_SECRET)),
    "persister": Process("the gate's persisters: the gate's Redis", needs=(REDIS_PASSWORD,)),
    "expirer": Process(
        "the expirer: gives units back under the stock's locks, whichever strategy's (Redis, ZooKeeper)",
        needs=(REDIS_PASSWORD, ZOOKEEPER_AUTH)),
    "racer": Process(
        "the race runner: signs its buyers' tokens, resets the race's products, keeps its lease in Redis",
        needs=(SECRET_KEY, REDIS_PASSWORD), may=(BUYER_TOKEN_KEY,)),
    "buyers": Process("a run of manage.py buyers_make: signs the tokens of the buyers it makes",
                      needs=(SECRET_KEY,), may=(BUYER_TOKEN_KEY,)),
    "schema": Process("the migrations and the waits for them: the database alone", needs=()),
}
DEFAULT_PROCESS = "web"
# Every secret some kind of process needs (a deployment must have each), and those
# only taken when present.
NEEDED = tuple(dict.fromkeys(name for process in PROCESSES.values() for name in process.needs))
OPTIONAL = tuple(dict.fromkeys(name for process in PROCESSES.values() for name in process.may
                               if name not in NEEDED))
