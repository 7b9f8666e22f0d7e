"""The comparison report's charts: drawn by matplotlib as inline SVG (no CDN, the
page opens offline)."""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from .figures import HotRow, OpeningRow, Row, hot_sweep, number_text  # noqa: E402

OK_COLOR, BAD_COLOR, CEILING_COLOR, NEUTRAL_COLOR = "#2e7d32", "#c62828", "#9e9e9e", "#1565c0"


def _svg(fig) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline: drop the XML prologue


def _bars(labels, values, colors, title, ylabel, hline=None, hline_label=None):
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    clean = [0 if (isinstance(v, float) and math.isnan(v)) else v for v in values]
    bars = ax.bar(labels, clean, color=colors)
    for bar, value in zip(bars, values, strict=True):
        nan = isinstance(value, float) and math.isnan(value)
        text = "–" if nan else f"{value:,.2f}".rstrip("0").rstrip(".")
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8)
    if hline is not None:
        ax.axhline(hline, color=CEILING_COLOR, linestyle="--", linewidth=1, label=hline_label)
        ax.legend(fontsize=8, frameon=False, loc="upper right")
    ax.set_title(title, fontsize=11)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def _grouped_bars(labels: list[str], series: list[tuple[str, list[float]]], title: str, ylabel: str,
                  hline: float | None = None, hline_label: str | None = None) -> str:
    """Bars side by side per label, one series each (fading left to right), as SVG."""
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, [0 if math.isnan(v) else v for v in values], width, label=name,
               color=NEUTRAL_COLOR, alpha=1.0 - 0.6 * i / max(len(series) - 1, 1))
    if hline is not None:
        ax.axhline(hline, color=CEILING_COLOR, linestyle="--", linewidth=1, label=hline_label)
    ax.set_xticks(range(len(labels)), labels, rotation=30, fontsize=8)
    ax.set_title(title, fontsize=11)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def charts(rows: list[Row]) -> dict[str, str]:
    """name → inline SVG."""
    ceiling = next((r for r in rows if r.strategy == "ping"), None)
    sales = [r for r in rows if r.strategy != "ping"]
    labels = [r.label for r in sales]
    out = {}
    out["throughput"] = _svg(_bars(
        labels, [r.median.throughput for r in sales], NEUTRAL_COLOR,
        "Throughput (all answers)", "requests/s",
        hline=ceiling.median.throughput if ceiling else None, hline_label="no-op ceiling"))
    out["sell_out"] = _svg(_bars(
        labels, [r.median.sell_out_seconds for r in sales], NEUTRAL_COLOR,
        "Time to sell out (first to last order)", "seconds"))
    out["oversold"] = _svg(_bars(
        labels, [r.worst_oversold for r in sales],
        [BAD_COLOR if r.worst_oversold > 0 else OK_COLOR for r in sales],
        "Oversold units (worst round)", "units"))

    out["latency"] = _grouped_bars(
        labels, [(f"p{q}", [getattr(r.median, f"ok_p{q}_ms") for r in sales]) for q in (50, 95, 99)],
        "Latency of successful purchases", "ms")
    if any(r.served_by_arrival for r in sales):
        out["fifo"] = _arrivals(sales)
    return out


def _arrivals(sales: list[Row]) -> str:
    """One line per strategy: a tick at the arrival rank of every purchase that got an
    order; first come, first served is a solid block left of the dashed line."""
    fig, ax = plt.subplots(figsize=(7.5, 0.5 + 0.35 * len(sales)))
    drawn = [r for r in sales if r.served_by_arrival]
    ax.eventplot([[rank for rank, got in enumerate(r.served_by_arrival, 1) if got] for r in drawn],
                 colors=NEUTRAL_COLOR, linelengths=0.7, linewidths=0.6)
    orders = max(sum(r.served_by_arrival) for r in drawn)
    ax.axvline(orders + 0.5, color=CEILING_COLOR, linestyle="--", linewidth=1,
               label=f"the first {orders} arrivals")
    ax.set_yticks(range(len(drawn)), [f"{r.label} ({number_text(r.median.fifo_score, 2)})" for r in drawn],
                  fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("arrival rank (at the app)")
    ax.set_title("Who got the stock: a tick per order at its buyer's arrival rank (FIFO score)",
                 fontsize=11)
    ax.legend(fontsize=8, frameon=False, loc="lower left", bbox_to_anchor=(1.0, 0.0))
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def hot_charts(hot_rows: list[HotRow]) -> dict[str, str]:
    """name → inline SVG: orders/s hot beside spread against the ping ceiling, and
    how long each purchase held the stock."""
    labels = [h.label for h in hot_rows]
    out = {}
    out["hot_throughput"] = _grouped_bars(
        labels, [("hot (one product)", [h.hot.median.orders_per_s for h in hot_rows]),
                 ("spread (one product per buyer)", [h.spread.median.orders_per_s for h in hot_rows])],
        "Orders per second when every request buys", "orders/s",
        hline=hot_rows[0].ceiling if hot_rows else None, hline_label="/api/ping (answers/s)")
    out["hot_hold"] = _grouped_bars(
        labels, [(f"p{q}", [getattr(h.hot.median, f"hold_p{q}_ms") for h in hot_rows]) for q in (50, 99)],
        "How long a purchase held the stock (lock, or row), hot product", "ms")

    counts, by_strategy = hot_sweep(hot_rows)
    if len(counts) > 1:
        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        for strategy, rows in by_strategy.items():
            xs = [n for n in counts if n in rows]
            ax.plot(xs, [rows[n].hot.median.orders_per_s for n in xs], marker="o", label=strategy)
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(n) for n in counts])
        ax.set_xlabel("segments of the hot product's stock")
        ax.set_ylabel("orders/s")
        ax.set_title("One hot product, its stock in segments", fontsize=11)
        ax.legend(fontsize=7, frameon=False, ncol=2)
        ax.spines[["top", "right"]].set_visible(False)
        out["segments"] = _svg(fig)
    return out


def opening_charts(rows: list[OpeningRow]) -> dict[str, str]:
    """name → inline SVG: requests per 100 ms around the opening (a line per strategy),
    and the first second's latency."""
    fig, (reads, buys) = plt.subplots(2, 1, figsize=(7.5, 4.8), sharex=True)
    for row in rows:
        xs = [t * 1000 for t, _, _ in row.ticks]
        reads.plot(xs, [page for _, page, _ in row.ticks], drawstyle="steps-post", label=row.label)
        buys.plot(xs, [buy for _, _, buy in row.ticks], drawstyle="steps-post", label=row.label)
    for ax, what in ((reads, "page loads"), (buys, "purchases")):
        ax.axvline(0, color=CEILING_COLOR, linestyle="--", linewidth=1)
        ax.set_ylabel(f"{what} / 100 ms")
        ax.spines[["top", "right"]].set_visible(False)
    reads.set_title("Requests sent per 100 ms around the opening (dashed: the opening)", fontsize=11)
    buys.set_xlabel("ms from the opening")
    buys.legend(fontsize=7, frameon=False, ncol=2)
    out = {"opening_ticks": _svg(fig)}
    out["opening_latency"] = _grouped_bars(
        [r.label for r in rows], [(f"p{q}", [getattr(r.opening, f"first_p{q}_ms") for r in rows])
                                  for q in (50, 99)],
        "Latency of the purchases sent in the first second", "ms")
    return out
