"""What one read of a race costs the app: ``GET /api/races/<id>`` in-process, a race of
6 lanes × 60 ticks (about what a page reads at the end of a 12 s race), CPU per
request over 300 reads, then cProfile's top entries by cumulative time.

    DJANGO_SETTINGS_MODULE=flashsale.settings.test python -m benchmarks.profile_race_read

Uses the suite's Redis database (1), and removes the race it writes there. The page
reads a running race 4 times a second per viewer: this is what each read costs.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flashsale.settings.test")

import django  # noqa: E402

django.setup()

from django.test import Client  # noqa: E402

from races import services  # noqa: E402

RACE_ID, READS = 999_999, 300


def main() -> None:
    lanes = [services.lane_new(strategy=name, sku=f"race-{name}", stock=100)
             | {"series": [[round(i * 0.2, 1), i] for i in range(60)]}
             for name in ("none", "local", "setnx", "redisson", "zookeeper", "atomic")]
    services.race_save({
        "id": RACE_ID, "status": "finished", "strategies": [lane["strategy"] for lane in lanes], "stock": 100,
        "buyers": 1000, "concurrency": 64, "created_at": "2026-11-24T06:00:00+00:00",
        "started_at": "2026-11-24T06:00:00+00:00", "finished_at": "2026-11-24T06:00:12+00:00",
        "elapsed_s": 12.0, "sent": 6000, "answered": 6000, "total": 6000, "error": None, "lanes": lanes})
    client = Client(HTTP_HOST="127.0.0.1")
    try:
        assert client.get(f"/api/races/{RACE_ID}").status_code == 200
        started = time.process_time()
        for _ in range(READS):
            client.get(f"/api/races/{RACE_ID}")
        per_read_ms = (time.process_time() - started) / READS * 1000
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(READS):
            client.get(f"/api/races/{RACE_ID}")
        profile.disable()
    finally:
        services._redis().delete(f"race:{RACE_ID}")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(18)
    print("$ python -m benchmarks.profile_race_read")
    print(f"GET /api/races/<id>, 6 lanes x 60 ticks: {per_read_ms:.2f} ms of CPU per read "
          f"(process_time over {READS})")
    print(out.getvalue())


if __name__ == "__main__":
    main()
