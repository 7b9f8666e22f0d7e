"""The race runner's metrics (``manage.py run_races --metrics-port``): the races it
ran by how they ended, and whether one is running now. Its buyers' purchases are
counted where they are answered, by the apps (``orders.metrics``)."""

from prometheus_client import Counter, Gauge

RACES = Counter("flashsale_races", "Races the runner ran, by how they ended: finished, failed, abandoned",
                ["status"])
RUNNING = Gauge("flashsale_race_running", "1 while the runner sends a race's buyers, else 0")
