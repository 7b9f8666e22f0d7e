"""The comparison report: a markdown table, and an HTML page with the same table and
charts drawn by matplotlib as inline SVG (no CDN, opens offline), and an index of
past runs."""

from __future__ import annotations

import html
import io
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from .figures import HotRow, OpeningRow, Row  # noqa: E402

OK_COLOR, BAD_COLOR, CEILING_COLOR, NEUTRAL_COLOR = "#2e7d32", "#c62828", "#9e9e9e", "#1565c0"


def _num(value: float, digits: int = 0) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "–"
    return f"{value:,.{digits}f}"


COLUMNS = [
    ("strategy", lambda r: r.label),
    ("attempts", lambda r: _num(r.median.attempts)),
    ("orders", lambda r: _num(r.median.orders) if r.strategy != "ping" else "–"),
    ("oversold", lambda r: _num(r.worst_oversold) if r.strategy != "ping" else "–"),
    ("lost updates", lambda r: _num(r.worst_lost_updates) if r.strategy != "ping" else "–"),
    ("ledger", lambda r: ("ok" if r.always_consistent else "BROKEN") if r.strategy != "ping" else "–"),
    ("req/s", lambda r: _num(r.median.throughput)),
    ("× ceiling", lambda r: _num(r.ratio_to_ceiling, 2)),
    ("sell-out s", lambda r: _num(r.median.sell_out_seconds, 2)),
    ("orders/s", lambda r: _num(r.median.orders_per_s)),
    ("rejections/s (× ceiling)", lambda r: "–" if math.isnan(r.median.rejections_per_s) else
     f"{_num(r.median.rejections_per_s)} ({_num(r.rejections_ratio_to_ceiling, 2)})"),
    ("ok p50/p95/p99 ms", lambda r: "/".join(_num(v) for v in (
        r.median.ok_p50_ms, r.median.ok_p95_ms, r.median.ok_p99_ms))),
    ("rejected p50/p95/p99 ms", lambda r: "/".join(_num(v) for v in (
        r.median.rejected_p50_ms, r.median.rejected_p95_ms, r.median.rejected_p99_ms))),
    ("accepted → confirmed p50/p99 ms", lambda r: _ms(r.median.confirm_p50_ms, r.median.confirm_p99_ms)),
    ("lock wait p50/p99 ms", lambda r: _ms(r.median.wait_p50_ms, r.median.wait_p99_ms)),
    ("FIFO score", lambda r: _num(r.median.fifo_score, 2)),
    ("busy", lambda r: _num(r.median.busy)),
    ("retries", lambda r: _num(r.median.retries)),
    ("errors", lambda r: _num(r.median.errors)),
]


def _ms(*values: float) -> str:
    return "/".join(_num(v, 1 if not math.isnan(v) and v < 10 else 0) for v in values)


def _worst(h: HotRow, attribute: str) -> int:
    return max(getattr(h.hot, attribute), getattr(h.spread, attribute))


HOT_COLUMNS = [
    ("strategy", lambda h: h.label),
    ("hot orders/s", lambda h: _num(h.hot.median.orders_per_s)),
    ("× ping", lambda h: _num(h.hot_to_ceiling, 2)),
    ("spread orders/s", lambda h: _num(h.spread.median.orders_per_s)),
    ("spread × ping", lambda h: _num(h.spread_to_ceiling, 2)),
    ("hot ÷ spread", lambda h: _num(h.hot_to_spread, 2)),
    ("ok p50/p95/p99 ms", lambda h: _ms(h.hot.median.ok_p50_ms, h.hot.median.ok_p95_ms,
                                         h.hot.median.ok_p99_ms)),
    ("hold p50/p99 ms", lambda h: _ms(h.hot.median.hold_p50_ms, h.hot.median.hold_p99_ms)),
    ("spread hold p50/p99 ms", lambda h: _ms(h.spread.median.hold_p50_ms, h.spread.median.hold_p99_ms)),
    ("lock wait p50/p99 ms", lambda h: _ms(h.hot.median.wait_p50_ms, h.hot.median.wait_p99_ms)),
    ("accepted → confirmed p50/p99 ms", lambda h: _ms(h.hot.median.confirm_p50_ms,
                                                        h.hot.median.confirm_p99_ms)),
    ("busy", lambda h: _num(h.hot.median.busy)),
    ("errors", lambda h: _num(h.hot.median.errors)),
    ("oversold", lambda h: _num(_worst(h, "worst_oversold"))),
    ("lost updates", lambda h: _num(_worst(h, "worst_lost_updates"))),
    ("ledger", lambda h: "ok" if h.hot.always_consistent and h.spread.always_consistent else "BROKEN"),
]


OPENING_COLUMNS = [
    ("strategy", lambda o: o.label),
    ("page loads/s before", lambda o: _num(o.opening.reads_per_s)),
    ("page p50/p99 ms", lambda o: _ms(o.opening.read_p50_ms, o.opening.read_p99_ms)),
    ("page errors", lambda o: _num(o.opening.read_errors)),
    ("1st s: purchases", lambda o: _num(o.opening.first_second)),
    ("1st s: orders", lambda o: _num(o.opening.first_created)),
    ("1st s: sold out", lambda o: _num(o.opening.first_sold_out)),
    ("1st s: busy", lambda o: _num(o.opening.first_busy)),
    ("1st s: errors", lambda o: _num(o.opening.first_errors)),
    ("1st s p50/p99 ms", lambda o: _ms(o.opening.first_p50_ms, o.opening.first_p99_ms)),
    ("sold out after ms", lambda o: _num(o.opening.sold_in_ms)),
    ("early", lambda o: _num(o.opening.early)),
    ("orders", lambda o: _num(o.sale.median.orders)),
    ("oversold", lambda o: _num(o.sale.worst_oversold)),
    ("lost updates", lambda o: _num(o.sale.worst_lost_updates)),
    ("ledger", lambda o: "ok" if o.sale.always_consistent else "BROKEN"),
    ("errors", lambda o: _num(o.sale.median.errors)),
]


def opening_table(rows: list[OpeningRow]) -> str:
    """The opening-second table, and the requests per 100 ms around the opening."""
    ticks = rows[0].ticks if rows else []
    lines = ["| ms from the opening | " + " | ".join(f"{t * 1000:+.0f}" for t, _, _ in ticks) + " |",
             "|---|" + "---:|" * len(ticks)]
    for row in rows:
        lines.append(f"| {row.label}: page / buy | "
                     + " | ".join(f"{page} / {buy}" for _, page, buy in row.ticks) + " |")
    return (markdown_table(rows, OPENING_COLUMNS)
            + "\n\nRequests sent per 100 ms around the opening (page loads / purchases), last round:\n\n"
            + "\n".join(lines))


def markdown_table(rows: list, columns=COLUMNS) -> str:
    header = "| " + " | ".join(name for name, _ in columns) + " |"
    rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|"
    lines = [header, rule]
    for row in rows:
        lines.append("| " + " | ".join(cell(row) for _, cell in columns) + " |")
    return "\n".join(lines)


def _sweep(hot_rows: list[HotRow]) -> tuple[list[int], dict[str, dict[int, HotRow]]]:
    """Segment counts, and per strategy its hot row at each count."""
    counts = sorted({h.segments for h in hot_rows})
    by_strategy: dict[str, dict[int, HotRow]] = {}
    for h in hot_rows:
        by_strategy.setdefault(h.strategy, {})[h.segments] = h
    return counts, by_strategy


def segments_table(hot_rows: list[HotRow]) -> str:
    """Orders/s per strategy per segment count, each beside its share of the
    strategy's spread run; empty unless the run swept more than one count."""
    counts, by_strategy = _sweep(hot_rows)
    if len(counts) < 2:
        return ""
    lines = ["| strategy | spread orders/s | " + " | ".join(f"×{n} segments" for n in counts) + " |",
             "|---|---:|" + "---:|" * len(counts)]
    for strategy, rows in by_strategy.items():
        spread = next(iter(rows.values())).spread.median.orders_per_s
        cells = [f"{_num(rows[n].hot.median.orders_per_s)} ({_num(rows[n].hot_to_spread, 2)})"
                 if n in rows else "–" for n in counts]
        lines.append(f"| {strategy} | {_num(spread)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def hot_table(hot_rows: list[HotRow], ceiling: Row) -> str:
    sweep = segments_table(hot_rows)
    return (f"Ceiling: /api/ping answered {_num(ceiling.median.throughput)} req/s.\n\n"
            + markdown_table(hot_rows, HOT_COLUMNS)
            + (f"\n\nOrders/s by the hot product's segments (in brackets: × the strategy's spread run):"
               f"\n\n{sweep}" if sweep else ""))


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
    ax.set_yticks(range(len(drawn)), [f"{r.label} ({_num(r.median.fifo_score, 2)})" for r in drawn],
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

    counts, by_strategy = _sweep(hot_rows)
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


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>flashsale comparison {stamp}</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; color: #1d2330; max-width: 1100px;
        margin: 2rem auto; padding: 0 1rem; }}
table {{ border-collapse: collapse; font-size: 12.5px; margin: 1rem 0; }}
th, td {{ padding: .3rem .5rem; border-bottom: 1px solid #e4e7ec; text-align: right; white-space: nowrap; }}
th:first-child, td:first-child {{ text-align: left; }}
td.bad {{ color: #c62828; font-weight: 600; }}
code {{ background: #f2f4f7; padding: .1rem .3rem; border-radius: 4px; }}
.charts {{ display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }}
.charts svg {{ width: 100%; height: auto; }}
@media (max-width: 900px) {{ .charts {{ grid-template-columns: 1fr; }} }}
</style></head><body>
<h1>flashsale: strategies compared</h1>
<p>{stamp} · <code>{command}</code></p>
<p>{setup}</p>
{gate}
<div style="overflow-x: auto">{table}</div>
<div class="charts">{charts}</div>
<h2>How to read it</h2>
<ul>{hot_notes}{opening_notes}
<li><b>× ceiling</b>: throughput as a share of <code>/api/ping</code> through the same nginx and
instances (no database, no lock): what the stack can do before any purchase logic.</li>
<li><b>sell-out s</b>: first to last successful order; <b>orders/s</b>: orders while stock lasted.
Afterwards every answer is a rejection: <b>rejections/s</b>, cheap when the sold-out mark answers
them without the lock.</li>
<li><b>FIFO score</b>: with S orders, the share of them that went to the first S purchases to
reach the app (its own clock, one for every instance: the <code>arrival</code> of the
<code>Server-Timing</code> header). 1.00 is first come, first served; orders handed out at random
score about S ÷ purchases. <b>lock wait</b>: from asking for the lock to getting it, orders only.</li>
<li>Oversold and lost updates are the worst round; the rest are medians of {rounds} round(s).
The machine is shared and noisy: compare strategies as ratios within one report.</li>
</ul>
<p><a href="../index.html">All runs</a></p>
</body></html>
"""


HOT_NOTES = """
<li><b>Hot mode</b>: every request buys (the stock outlasts the window). <b>hot</b>: every buyer on
one product, so purchases queue for its lock or row; <b>spread</b>: the same users, one product
each, so nobody waits for anybody: the purchase path's own ceiling. <b>hot ÷ spread</b> is what
contention costs; <b>× ping</b> is what the purchase path costs.</li>
<li><b>hold</b>: how long a purchase held the stock, from the app's own clock (the
<code>Server-Timing</code> header): the lock from granted to released, or for a lockless strategy
the row from its first write to the commit. One product can sell at most 1000 / hold orders
per second, whatever the hardware. <b>lock wait</b>: from asking for the lock to getting it.</li>
<li><b>×N</b>: the hot product's stock split into N segments, each its own row and lock name
(seed 004's 分段锁): up to N buyers of it at once. What it costs: a buyer may find its segment
empty while others still have stock (it falls over to another), and an order larger than any one
segment takes several locks at once.</li>
"""


OPENING_NOTES = """
<li><b>Opening mode</b>: the sale opens a few seconds after its reset. Every user loads the product
page, reloads it until the opening (the refresh storm: <b>page loads/s before</b>), computes the
opening on its own clock from the server's (nginx's <code>Server-Timing: now</code>), and buys at
that moment: the herd. <b>1st s</b>: the purchases sent in the first second after the opening and
how they were answered. <b>early</b>: purchases answered <code>not_started</code>, a countdown
that ran ahead of the server. <b>sold out after</b>: from the opening to the last order.</li>
"""


def html_table(rows: list, columns=COLUMNS) -> str:
    head = "".join(f"<th>{html.escape(name)}</th>" for name, _ in columns)
    body = []
    for row in rows:
        cells = []
        for name, cell in columns:
            value = cell(row)
            bad = (name == "oversold" and value not in ("0", "–")) or \
                  (name == "lost updates" and value not in ("0", "–")) or value == "BROKEN"
            css = ' class="bad"' if bad else ""
            cells.append(f"<td{css}>{html.escape(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def write_report(directory: Path, rows: list[Row], *, stamp: str, command: str, setup: str,
                 rounds: int, broken: list[str], hot_rows: list[HotRow] = (),
                 opening_rows: list[OpeningRow] = ()) -> tuple[Path, Path]:
    """The sale mode's table of ``rows``; given ``hot_rows``, the hot mode's table
    (``rows`` then holds the ceiling); given ``opening_rows``, the opening mode's."""
    md = directory / "report.md"
    if opening_rows:
        table_md = opening_table(opening_rows)
    else:
        table_md = hot_table(hot_rows, rows[0]) if hot_rows else markdown_table(rows)
    md.write_text(f"# flashsale comparison {stamp}\n\n`{command}`\n\n{setup}\n\n{table_md}\n"
                  + (f"\n**Gate failed:** {'; '.join(broken)}\n" if broken else ""))
    gate_html = (f'<p style="color:#c62828"><b>Gate failed:</b> {html.escape("; ".join(broken))}</p>'
                 if broken else "<p>Gate: every strategy that claims correctness sold exactly what it "
                 "took off the stock, never more than it had.</p>")
    if opening_rows:
        drawn = opening_charts(opening_rows)
        table = html_table(opening_rows, OPENING_COLUMNS)
    elif hot_rows:
        drawn = hot_charts(hot_rows)
        counts, by_strategy = _sweep(hot_rows)
        sweep = ""
        if len(counts) > 1:
            sweep_columns = [("strategy", lambda item: item[0]),
                             ("spread orders/s",
                              lambda item: _num(next(iter(item[1].values())).spread.median.orders_per_s))]
            sweep_columns += [(f"×{n} segments", lambda item, n=n: (
                f"{_num(item[1][n].hot.median.orders_per_s)} ({_num(item[1][n].hot_to_spread, 2)})"
                if n in item[1] else "–")) for n in counts]
            sweep = ("<h2>Segments</h2><p>Orders/s of the hot product by its stock segments "
                     "(in brackets: × the strategy's spread run).</p>"
                     + html_table(list(by_strategy.items()), sweep_columns))
        table = (f"<p>Ceiling: <code>/api/ping</code> answered {_num(rows[0].median.throughput)} req/s.</p>"
                 + html_table(hot_rows, HOT_COLUMNS) + sweep)
    else:
        drawn = charts(rows)
        table = html_table(rows)
    for name, svg in drawn.items():  # also as files, to link or check in
        (directory / f"{name}.svg").write_text(svg)
    page = PAGE.format(stamp=html.escape(stamp), command=html.escape(command), setup=html.escape(setup),
                       gate=gate_html, table=table, rounds=rounds,
                       hot_notes=HOT_NOTES if hot_rows else "",
                       opening_notes=OPENING_NOTES if opening_rows else "",
                       charts="".join(f"<div>{svg}</div>" for svg in drawn.values()))
    report = directory / "report.html"
    report.write_text(page)
    return md, report


def write_index(reports_dir: Path) -> Path:
    """``reports/index.html``: every run, newest first, with its gate and best strategy."""
    items = []
    for summary in sorted(reports_dir.glob("*/summary.json"), reverse=True):
        data = json.loads(summary.read_text())
        verdict = "gate failed" if data.get("broken") else "gate passed"
        items.append(f'<li><a href="{summary.parent.name}/report.html">{summary.parent.name}</a> · '
                     f'{sum(len(data.get(k, [])) for k in ("rows", "hot_rows", "opening_rows"))} rows · '
                     f'{verdict} · '
                     f'<code>{html.escape(data.get("command", ""))}</code></li>')
    index = reports_dir / "index.html"
    index.write_text("<!doctype html><meta charset='utf-8'><title>flashsale runs</title>"
                     "<body style='font: 14px system-ui; max-width: 900px; margin: 2rem auto'>"
                     f"<h1>Comparison runs</h1><ul>{''.join(items)}</ul></body>")
    return index
