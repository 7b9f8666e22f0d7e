"""The dashboard's panels: what ``/dashboard`` draws and the Grafana dashboard of
``docker-compose.yml`` shows (``python -m dashboard.grafana`` writes it from this list),
each a title, a unit and the PromQL queries behind it, over the recording rules of
``monitoring/rules.yml``. One list: the page and Grafana ask Prometheus the same."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str  # a series' name: {{label}} is the series' value of that label


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    unit: str  # "ops" (a second), "s" (drawn in ms), "short" (a count), "percentunit" (a share), "bytes"
    queries: tuple[Query, ...]
    kind: str = "graph"  # "graph": over the last minutes; "table": each series' value now

    def as_dict(self) -> dict:
        return asdict(self)


PANELS = (
    Panel("orders", "Orders a second, by strategy", "ops",
          (Query("flashsale:orders:rate10s", "{{strategy}}"),)),
    Panel("answers", "The answer mix, by strategy (share of its answers, last 10 s)", "percentunit",
          (Query("flashsale:purchases:share10s", "{{strategy}} {{code}}"),), kind="table"),
    Panel("lock-wait", "Lock wait p50 and p99, by strategy", "s",
          (Query("flashsale:lock_wait_seconds:p50_10s", "{{backend}} p50"),
           Query("flashsale:lock_wait_seconds:p99_10s", "{{backend}} p99"))),
    Panel("latency", "Purchase latency p99, by strategy", "s",
          (Query("flashsale:purchase_seconds:p99_10s", "{{strategy}}"),)),
    Panel("stock", "Stock left of the live sales, by strategy", "short",
          (Query("flashsale:sale_stock_left", "{{strategy}}"),)),
    Panel("backlog", "The gate: orders waiting to be written, and written a second", "short",
          (Query("flashsale:gate_backlog", "backlog"), Query("flashsale:gate_written:rate10s", "written/s"),
           Query("flashsale:gate_dead_letters", "dead letters"))),
    Panel("gate-lag", "The gate: how long the oldest order not yet written has waited", "s",
          (Query("flashsale:gate_oldest_unwritten_seconds", "oldest unwritten"),)),
    Panel("instances", "Instances: requests in flight, and CPU used (cores)", "short",
          (Query("flashsale:requests_in_flight", "{{instance}} in flight"),
           Query("flashsale:instance_cpu:rate10s", "{{instance}} cores"))),
    Panel("memory", "Instances: resident memory (the server's master and workers)", "bytes",
          (Query("flashsale:instance_memory_bytes", "{{instance}}"),)),
    Panel("room", "Waiting rooms: places waiting, and taken and admitted a second", "short",
          (Query("flashsale:room_waiting", "waiting"), Query("flashsale:room_places:rate10s", "places/s"),
           Query("flashsale:room_admissions:rate10s", "admitted/s"))),
)
