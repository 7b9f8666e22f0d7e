"""The comparison report: a markdown table, and an HTML page with the same table and
the charts (``loadtest.charts``), and an index of past runs."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

from .figures import HotRow, OpeningRow, Row, hot_sweep, number_text

COLUMNS = [
    ("strategy", lambda r: r.label),
    ("attempts", lambda r: number_text(r.median.attempts)),
    ("orders", lambda r: number_text(r.median.orders) if r.strategy != "ping" else "–"),
    ("oversold", lambda r: number_text(r.worst_oversold) if r.strategy != "ping" else "–"),
    ("lost updates", lambda r: number_text(r.worst_lost_updates) if r.strategy != "ping" else "–"),
    ("ledger", lambda r: ("ok" if r.always_consistent else "BROKEN") if r.strategy != "ping" else "–"),
    ("req/s", lambda r: number_text(r.median.throughput)),
    ("× ceiling", lambda r: number_text(r.ratio_to_ceiling, 2)),
    ("sell-out s", lambda r: number_text(r.median.sell_out_seconds, 2)),
    ("orders/s", lambda r: number_text(r.median.orders_per_s)),
    ("rejections/s (× ceiling)", lambda r: "–" if math.isnan(r.median.rejections_per_s) else
     f"{number_text(r.median.rejections_per_s)} ({number_text(r.rejections_ratio_to_ceiling, 2)})"),
    ("ok p50/p95/p99 ms", lambda r: "/".join(number_text(v) for v in (
        r.median.ok_p50_ms, r.median.ok_p95_ms, r.median.ok_p99_ms))),
    ("rejected p50/p95/p99 ms", lambda r: "/".join(number_text(v) for v in (
        r.median.rejected_p50_ms, r.median.rejected_p95_ms, r.median.rejected_p99_ms))),
    ("accepted → confirmed p50/p99 ms", lambda r: _ms(r.median.confirm_p50_ms, r.median.confirm_p99_ms)),
    ("lock wait p50/p99 ms", lambda r: _ms(r.median.wait_p50_ms, r.median.wait_p99_ms)),
    ("FIFO score", lambda r: number_text(r.median.fifo_score, 2)),
    ("busy", lambda r: number_text(r.median.busy)),
    ("retries", lambda r: number_text(r.median.retries)),
    ("errors", lambda r: number_text(r.median.errors)),
]


def _ms(*values: float) -> str:
    return "/".join(number_text(v, 1 if not math.isnan(v) and v < 10 else 0) for v in values)


def _worst(h: HotRow, attribute: str) -> int:
    return max(getattr(h.hot, attribute), getattr(h.spread, attribute))


HOT_COLUMNS = [
    ("strategy", lambda h: h.label),
    ("hot orders/s", lambda h: number_text(h.hot.median.orders_per_s)),
    ("× ping", lambda h: number_text(h.hot_to_ceiling, 2)),
    ("spread orders/s", lambda h: number_text(h.spread.median.orders_per_s)),
    ("spread × ping", lambda h: number_text(h.spread_to_ceiling, 2)),
    ("hot ÷ spread", lambda h: number_text(h.hot_to_spread, 2)),
    ("ok p50/p95/p99 ms", lambda h: _ms(h.hot.median.ok_p50_ms, h.hot.median.ok_p95_ms,
                                         h.hot.median.ok_p99_ms)),
    ("hold p50/p99 ms", lambda h: _ms(h.hot.median.hold_p50_ms, h.hot.median.hold_p99_ms)),
    ("spread hold p50/p99 ms", lambda h: _ms(h.spread.median.hold_p50_ms, h.spread.median.hold_p99_ms)),
    ("lock wait p50/p99 ms", lambda h: _ms(h.hot.median.wait_p50_ms, h.hot.median.wait_p99_ms)),
    ("accepted → confirmed p50/p99 ms", lambda h: _ms(h.hot.median.confirm_p50_ms,
                                                        h.hot.median.confirm_p99_ms)),
    ("busy", lambda h: number_text(h.hot.median.busy)),
    ("errors", lambda h: number_text(h.hot.median.errors)),
    ("oversold", lambda h: number_text(_worst(h, "worst_oversold"))),
    ("lost updates", lambda h: number_text(_worst(h, "worst_lost_updates"))),
    ("ledger", lambda h: "ok" if h.hot.always_consistent and h.spread.always_consistent else "BROKEN"),
]


OPENING_COLUMNS = [
    ("strategy", lambda o: o.label),
    ("page loads/s before", lambda o: number_text(o.opening.reads_per_s)),
    ("page p50/p99 ms", lambda o: _ms(o.opening.read_p50_ms, o.opening.read_p99_ms)),
    ("page errors", lambda o: number_text(o.opening.read_errors)),
    ("1st s: purchases", lambda o: number_text(o.opening.first_second)),
    ("1st s: orders", lambda o: number_text(o.opening.first_created)),
    ("1st s: sold out", lambda o: number_text(o.opening.first_sold_out)),
    ("1st s: busy", lambda o: number_text(o.opening.first_busy)),
    ("1st s: errors", lambda o: number_text(o.opening.first_errors)),
    ("1st s p50/p99 ms", lambda o: _ms(o.opening.first_p50_ms, o.opening.first_p99_ms)),
    ("sold out after ms", lambda o: number_text(o.opening.sold_in_ms)),
    ("purchases p50/p99 ms", lambda o: _ms(o.opening.purchase_p50_ms, o.opening.purchase_p99_ms)),
    ("most in flight, first 2 s", lambda o: number_text(o.opening.in_flight)),
    ("FIFO score", lambda o: number_text(o.opening.fifo, 2)),
    ("open: client behind p99 ms", lambda o: number_text(o.opening.behind_p99_ms)),
    ("early", lambda o: number_text(o.opening.early)),
    ("orders", lambda o: number_text(o.sale.median.orders)),
    ("oversold", lambda o: number_text(o.sale.worst_oversold)),
    ("lost updates", lambda o: number_text(o.sale.worst_lost_updates)),
    ("ledger", lambda o: "ok" if o.sale.always_consistent else "BROKEN"),
    ("errors", lambda o: number_text(o.sale.median.errors)),
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


# Who got the stock: the sale's columns that the first-come page reads.
FIRST_COME_COLUMNS = [c for c in COLUMNS if c[0] in ("strategy", "orders", "FIFO score",
                                                     "lock wait p50/p99 ms", "busy", "retries")]


def markdown_table(rows: list, columns=COLUMNS) -> str:
    header = "| " + " | ".join(name for name, _ in columns) + " |"
    rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|"
    lines = [header, rule]
    for row in rows:
        lines.append("| " + " | ".join(cell(row) for _, cell in columns) + " |")
    return "\n".join(lines)


def segments_table(hot_rows: list[HotRow]) -> str:
    """Orders/s per strategy per segment count, each beside its share of the
    strategy's spread run; empty unless the run swept more than one count."""
    counts, by_strategy = hot_sweep(hot_rows)
    if len(counts) < 2:
        return ""
    lines = ["| strategy | spread orders/s | " + " | ".join(f"×{n} segments" for n in counts) + " |",
             "|---|---:|" + "---:|" * len(counts)]
    for strategy, rows in by_strategy.items():
        spread = next(iter(rows.values())).spread.median.orders_per_s
        cells = [f"{number_text(rows[n].hot.median.orders_per_s)} ({number_text(rows[n].hot_to_spread, 2)})"
                 if n in rows else "–" for n in counts]
        lines.append(f"| {strategy} | {number_text(spread)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def hot_table(hot_rows: list[HotRow], ceiling: Row) -> str:
    sweep = segments_table(hot_rows)
    return (f"Ceiling: /api/ping answered {number_text(ceiling.median.throughput)} req/s.\n\n"
            + markdown_table(hot_rows, HOT_COLUMNS)
            + (f"\n\nOrders/s by the hot product's segments (in brackets: × the strategy's spread run):"
               f"\n\n{sweep}" if sweep else ""))


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
(source article 004's 分段锁): up to N buyers of it at once. What it costs: a buyer may find its segment
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
    # Here, not at the top: matplotlib is slow to import, and every pytest process
    # collects the modules that import this one for its tables alone.
    from .charts import charts, hot_charts, opening_charts

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
        counts, by_strategy = hot_sweep(hot_rows)
        sweep = ""
        if len(counts) > 1:
            sweep_columns = [
                ("strategy", lambda item: item[0]),
                ("spread orders/s",
                 lambda item: number_text(next(iter(item[1].values())).spread.median.orders_per_s))]
            sweep_columns += [(f"×{n} segments", lambda item, n=n: (
                f"{number_text(item[1][n].hot.median.orders_per_s)} "
                f"({number_text(item[1][n].hot_to_spread, 2)})"
                if n in item[1] else "–")) for n in counts]
            sweep = ("<h2>Segments</h2><p>Orders/s of the hot product by its stock segments "
                     "(in brackets: × the strategy's spread run).</p>"
                     + html_table(list(by_strategy.items()), sweep_columns))
        ceiling = number_text(rows[0].median.throughput)
        table = (f"<p>Ceiling: <code>/api/ping</code> answered {ceiling} req/s.</p>"
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
