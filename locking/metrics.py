"""What the locks did, for Prometheus (``/metrics``): acquisitions by outcome, the
wait for each lock and how long it was held, and the watchdog's lease renewals, by
the lock's backend (its ``settings.LOCKING`` alias). Never by the lock's name: a
name is a product's, and each value of a label is a series Prometheus keeps.

A lock that excludes nobody (the null lock of the lockless strategies) is not
measured: it has no wait and guards nothing.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from common.metrics import count, observe_later

ACQUISITIONS = Counter(
    "flashsale_lock_acquisitions",
    "Lock acquisitions by outcome: acquired, timed_out (the wait ran out), refused "
    "(a try that does not wait found it held), unavailable (its server could not be "
    "reached)",
    ["backend", "outcome"],
)
LOSSES = Counter(
    "flashsale_lock_losses",
    "Holds found lost, by where: before_commit (the holder's last check) or at_release "
    "(the release found the lock no longer the holder's: a lease ran out, a session "
    "expired); one hold can be found lost at both",
    ["backend", "found"],
)
RENEWALS = Counter(
    "flashsale_lock_renewals",
    "The watchdog's lease renewals by outcome: renewed, failed (the server did not "
    "answer; tried again next round), lost (the lock was no longer the holder's)",
    ["backend", "outcome"],
)
# Waits end at the lock's wait timeout (5 s by default); holds are a transaction's
# length, milliseconds unless a holder stalls.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
WAIT_SECONDS = Histogram(
    "flashsale_lock_wait_seconds",
    "Seconds from asking for a lock to getting it, for the acquisitions that got it",
    ["backend"], buckets=_BUCKETS)
HOLD_SECONDS = Histogram(
    "flashsale_lock_hold_seconds",
    "Seconds from getting a lock to releasing it",
    ["backend"], buckets=_BUCKETS)


def timed(histogram: Histogram, backend: str, seconds: float) -> None:
    """Observe ``seconds`` in ``histogram`` for ``backend``, off the caller's path."""
    observe_later(histogram, (backend,), seconds)


__all__ = ["ACQUISITIONS", "HOLD_SECONDS", "LOSSES", "RENEWALS", "WAIT_SECONDS", "count", "timed"]
