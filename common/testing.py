"""Helpers for the test suites of every app: running code in other threads, each
with its own database connection, as concurrent requests would."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connection


def start_thread(fn: Callable[[], Any], *, daemon: bool = False) -> tuple[threading.Thread, dict[str, Any]]:
    """Start ``fn`` in a thread; its outcome lands in the returned dict as "value"
    or "error". The thread's database connection, if it opened one, is closed.
    ``daemon``: for a call that may never return when the code under test is wrong,
    so that the test fails instead of the run hanging."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:
            box["error"] = e
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=daemon)
    thread.start()
    return thread, box


def in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in another thread and wait: return its value or raise its error."""
    thread, box = start_thread(fn)
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def run_at_once(fn: Callable[[int], Any], n: int, *,
                ready: Callable[[], object] | None = None) -> list[BaseException | None]:
    """Call ``fn(0)`` … ``fn(n - 1)`` in ``n`` threads released together by a
    barrier; return each call's exception, or None where it returned. ``ready`` runs
    in each thread before the barrier (its database connection opened, say): what
    the calls race on starts together, not what each must set up first."""
    barrier = threading.Barrier(n)

    def call(i: int) -> Any:
        if ready is not None:
            ready()
        barrier.wait()
        return fn(i)

    started = [start_thread(functools.partial(call, i)) for i in range(n)]
    for thread, _ in started:
        thread.join()
    return [box.get("error") for _, box in started]


@contextmanager
def held_elsewhere(make_lock: Callable[[], Any]) -> Iterator[None]:
    """Inside the ``with`` block, another thread (its own DB connection) holds the
    lock ``make_lock()`` returns; it releases it on the way out."""
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        lock = make_lock()
        assert lock.acquire(timeout=10)
        holding.set()
        done.wait(30)
        lock.release()

    thread, box = start_thread(hold)
    if not holding.wait(10):
        thread.join()
        raise box.get("error") or RuntimeError("the other thread never got the lock")
    try:
        yield
    finally:
        done.set()
        thread.join()
    if "error" in box:
        raise box["error"]


def wait_until(condition: Callable[[], Any], timeout: float = 5.0, what: str = "the condition") -> None:
    """Poll ``condition`` every 10 ms until it holds; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.01)


@contextmanager
def idle_transaction_allowed() -> Iterator[None]:
    """This thread's database session may idle inside a transaction: a test whose
    transaction waits on work of its own (a process starting, Hypothesis making the
    next example) that a busy machine stretches past the server's cut of idle
    transactions (``DB_IDLE_TRANSACTION_TIMEOUT_S``, the apps' guard against a stopped
    holder, not what such a test checks). The cut is back afterwards."""
    from django.conf import settings

    with connection.cursor() as cursor:
        cursor.execute("SET SESSION idle_transaction_timeout = 0")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION idle_transaction_timeout = %s",
                           [settings.DB_IDLE_TRANSACTION_TIMEOUT_S])


def alive_file_touches(command: str, alive: Path, monkeypatch: Any, *, times: int = 3, **options: Any
                       ) -> list[int]:
    """Run the management ``command`` (a long-running loop that takes ``--alive-file``)
    until it has touched ``alive`` ``times`` times, then stop it as SIGTERM would (its
    own handler, called from here; ``monkeypatch`` keeps it from the real signal): the
    file's modification times seen, 30 s at most."""
    import signal

    from django.core.management import call_command

    handlers: dict[int, Any] = {}
    monkeypatch.setattr(signal, "signal", lambda signum, handler: handlers.setdefault(signum, handler))
    touched: list[int] = []

    def watch() -> None:
        deadline = time.monotonic() + 30
        while len(touched) < times and time.monotonic() < deadline:
            if alive.exists() and (not touched or alive.stat().st_mtime_ns != touched[-1]):
                touched.append(alive.stat().st_mtime_ns)
            time.sleep(0.005)
        while signal.SIGTERM not in handlers and time.monotonic() < deadline:
            time.sleep(0.005)
        handlers[signal.SIGTERM](signal.SIGTERM, None)
        connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        call_command(command, alive_file=alive, **options)
    finally:
        watcher.join()
    return touched
