"""Write the Grafana dashboard of ``docker-compose.yml`` from the dashboard's panels
(``dashboard.panels``), so that Grafana and ``/dashboard`` ask Prometheus the same:

    python -m dashboard.grafana    (writes monitoring/grafana/dashboards/flashsale.json)

``dashboard/tests`` fails when the file differs from what this writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .panels import PANELS, Panel

OUT = Path(__file__).resolve().parents[1] / "monitoring" / "grafana" / "dashboards" / "flashsale.json"
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}  # provisioned under this uid
WIDTH, HEIGHT = 12, 8  # two panels a row, on Grafana's 24-column grid


def _panel(panel: Panel, index: int) -> dict:
    now = {"instant": True, "format": "table"} if panel.kind == "table" else {}  # each series' value now
    targets = [{"datasource": DATASOURCE, "expr": query.expr, "legendFormat": query.legend,
                "refId": chr(ord("A") + n), **now} for n, query in enumerate(panel.queries)]
    return {
        "id": index + 1,
        "title": panel.title,
        "type": "table" if panel.kind == "table" else "timeseries",
        "datasource": DATASOURCE,
        "gridPos": {"x": (index % 2) * WIDTH, "y": (index // 2) * HEIGHT, "w": WIDTH, "h": HEIGHT},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "targets": targets,
    }


def dashboard() -> dict:
    return {
        "uid": "flashsale",
        "title": "flashsale: the sale, live",
        "tags": ["flashsale"],
        "timezone": "browser",
        "refresh": "2s",
        "time": {"from": "now-5m", "to": "now"},
        "schemaVersion": 39,
        "panels": [_panel(panel, i) for i, panel in enumerate(PANELS)],
    }


def rendered() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(rendered())
    print(f"written: {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
