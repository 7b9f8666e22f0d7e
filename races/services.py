"""A race: every strategy chosen, each on a product of its own, against the same
buyers at the same moment.

``race_start`` resets one product per strategy (``race-<strategy>``, reset under that
strategy: nothing restarts), writes the race down and queues it. The buyers never
run in a web worker: the race runner (``manage.py run_races``, a process of the
stack) takes the race from the queue and sends them through the stack's own nginx
(``races.runner``), writing the race's figures back several times a second.

One race at a time, since races share the machine: starting one takes a lease
(redis-py's ``Lock`` on ``race:current``, with the race's id as its token), which the
runner renews while its buyers run and gives back when it is done. A runner that
died lets the lease lapse, and its race reads ``abandoned``; the next one may start.

A race may put every product's sale behind a waiting room, on the same terms: its
buyers then ask for their places first, wait their turns and buy with their
admissions, and each column shows its room's queue and admissions as they go.

A race is one JSON document in Redis. The newest stays readable until the next
race starts (which resets its products anyway); older ones are gone.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.conf import settings
from django_redis import get_redis_connection
from redis.exceptions import LockError
from redis.lock import Lock

from common.errors import InvalidInput, NotFound
from orders.reset import sale_reset
from waitingroom.services import RoomTerms

from .errors import RaceRunning
from .limits import RACE_SKU_PREFIX

QUEUE = "race:queue"  # race ids for the runner, oldest first
_IDS = "race:ids"
_LATEST = "race:latest"  # the one race still kept
# How long a race holds the machine without a word from its runner: the runner renews
# it every tick, so only a dead (or never started) runner lets it lapse.
LEASE_S = 15.0


def _redis():
    return get_redis_connection("default")


def _key(race_id: int) -> str:
    return f"race:{race_id}"


_LEASE = "race:current"


def _lease() -> Lock:
    return Lock(_redis(), _LEASE, timeout=LEASE_S, thread_local=False)


def race_lease(race_id: int) -> Lock:
    """The machine's one-race lease, held under the race's id (any process may renew
    or give it back by naming the race)."""
    lock = _lease()
    lock.local.token = str(race_id).encode()
    return lock


def lease_holder() -> int | None:
    holder = _redis().get(_LEASE)
    return int(holder) if holder is not None else None


def _race_and_holder(race_id: int) -> tuple[bytes | None, int | None]:
    """The race as kept and the lease's holder, read in one command: read one after
    the other, a race that ended between the two (its last state written, then the
    lease given back) would be read running, without its lease: abandoned."""
    raw, holder = _redis().mget([_key(race_id), _LEASE])
    return raw, (None if holder is None else int(holder))


def _lapsed(race: dict, holder: int | None) -> bool:
    """Whether the race, not over yet, lost the lease: its runner died, or never took it."""
    return race["status"] in ("queued", "running") and holder != race["id"]


def race_start(*, strategies: list[str], stock: int, buyers: int, concurrency: int,
               room: RoomTerms | None = None) -> dict:
    """Reset one product per strategy (each sale behind a waiting room on ``room``'s
    terms, if given) and queue the race for the runner.

    :raises RaceRunning: another race holds the lease.
    :raises InvalidInput: a room, and its buyers, all from the runner's one address,
        would meet the room's bound of places per address; or a product's reset
        refused (nothing is queued).
    :raises Unavailable: a product's reset refused (nothing is queued).
    """
    bound = settings.FLASHSALE_ROOM_PLACES_PER_ADDRESS
    if room is not None and 0 < bound < buyers:
        message = (f"a race's buyers come from one address, which takes {bound} places in a waiting room "
                   "(FLASHSALE_ROOM_PLACES_PER_ADDRESS): a race with a room needs at most as many buyers, "
                   "or the bound off (0, as the stack runs)")
        raise InvalidInput(message, extra={"fields": {"room_rate": [message]}})
    race_id = int(_redis().incr(_IDS))
    lease = _lease()
    if not lease.acquire(blocking=False, token=str(race_id)):
        running = lease_holder()
        raise RaceRunning(f"race {running} is running: one race at a time",
                          extra={"race_id": running})
    try:
        lanes = []
        for name in strategies:
            sku = f"{RACE_SKU_PREFIX}{name}"
            sale_reset(sku=sku, stock=stock, name=f"Race under {name}", strategy=name, room=room)
            lanes.append(lane_new(strategy=name, sku=sku, stock=stock, room=room is not None))
        race = {
            "id": race_id, "status": "queued", "strategies": strategies, "stock": stock, "buyers": buyers,
            "concurrency": concurrency,
            "room": None if room is None else {"rate": room.rate, "active": room.active,
                                                "admission_s": room.admission_s},
            "created_at": now_iso(), "started_at": None, "finished_at": None,
            "elapsed_s": 0.0, "sent": 0, "answered": 0, "total": buyers * len(strategies), "error": None,
            "lanes": lanes,
        }
        client = _redis()
        previous = client.set(_LATEST, race_id, get=True)
        if previous is not None:
            client.delete(_key(int(previous)))
        race_save(race)
        client.rpush(QUEUE, race_id)
    except BaseException:
        lease.release()
        raise
    return race


def lane_new(*, strategy: str, sku: str, stock: int, room: bool = False) -> dict:
    """One strategy's column of the race, before its first buyer."""
    return {"strategy": strategy, "sku": sku, "stock": stock, "remaining": stock, "orders": 0,
            "sold_out": 0, "busy": 0, "errors": 0, "oversold": 0, "lost_updates": 0, "consistent": None,
            "orders_per_s": None, "p50_ms": None, "p99_ms": None, "verdict": None, "series": [],
            "room": {"waiting": 0, "admitted": 0, "admitted_per_s": None, "series": []} if room else None}


def race_json(*, race_id: int) -> bytes:
    """The race as its runner last wrote it, in the JSON it is kept in: what a page
    reading it 4 times a second is sent, as it is (no serializer builds it again per
    read: that was most of the read's time, docs/profile/races/). A race whose
    lease lapsed before it was over reads ``abandoned``.

    :raises NotFound: no such race (or not the newest).
    """
    raw, holder = _race_and_holder(race_id)
    if raw is None:
        raise NotFound(f"no race {race_id} (only the newest race is kept)", extra={"race_id": race_id})
    race = json.loads(raw)
    return json.dumps(race | {"status": "abandoned"}).encode() if _lapsed(race, holder) else raw


def race_latest_json() -> bytes:
    """The newest race, as ``race_json``.

    :raises NotFound: none has been started.
    """
    latest = _redis().get(_LATEST)
    if latest is None:
        raise NotFound("no race has been started")
    return race_json(race_id=int(latest))


def race_take(*, race_id: int) -> dict | None:
    """A queued race, for the runner to run: None when it is gone (a newer race
    replaced it) or when its lease lapsed before the runner took it (it is written
    down ``abandoned``)."""
    raw, holder = _race_and_holder(race_id)
    if raw is None:
        return None
    race = json.loads(raw)
    if _lapsed(race, holder):
        race_end(race, status="abandoned", error="its lease lapsed before the runner took it")
        return None
    return race


def race_save(race: dict) -> None:
    _redis().set(_key(race["id"]), json.dumps(race))


def race_end(race: dict, *, status: str, error: str | None = None) -> None:
    """Write the race's last state and give the machine back."""
    race.update(status=status, error=error, finished_at=now_iso())
    race_save(race)
    try:
        race_lease(race["id"]).release()
    except LockError:
        pass  # it lapsed (LockNotOwnedError): nothing of ours to give back


def now_iso() -> str:
    return datetime.now(UTC).isoformat()
