"""The window a verdict names, drawn as Porcupine and Knossos draw theirs: one row per
client, one bar per operation from its invocation to its completion, the operation
no order gets past in red, unknown outcomes open-ended (hatched)."""

from __future__ import annotations

from html import escape

from common.history import FAILED, OK, UNKNOWN, Final

from .checker import Operation, Window, client_of

ROW, LEFT, WIDTH, TOP = 26, 110, 900, 40
COLOURS = {OK: "#4c9a2a", FAILED: "#8a8a8a", UNKNOWN: "#d9a400"}


def _label(op: Operation) -> str:
    if isinstance(op, Final):
        return f"final read: {op.remaining} left, {len(op.orders)} orders"
    return op.describe().split(": ", 1)[1]


def svg(window: Window, *, title: str = "") -> str:
    ops = window.ops if window.stuck in window.ops else [*window.ops, window.stuck]
    first: dict[str, int] = {}  # rows in the order the clients first appear
    for op in sorted(ops, key=lambda op: op.at if isinstance(op, Final) else op.invoke):
        first.setdefault(client_of(op), len(first))
    row, clients = first, list(first)
    span = max(window.end - window.start, 1)

    def x(t: int) -> float:
        return LEFT + WIDTH * (min(max(t, window.start), window.end) - window.start) / span

    height = TOP + ROW * len(clients) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" height="{height}" '
             'font-family="sans-serif" font-size="11">',
             '<defs><pattern id="open" width="6" height="6" patternUnits="userSpaceOnUse">'
             '<path d="M0,6 L6,0" stroke="#d9a400" stroke-width="2"/></pattern></defs>',
             f'<text x="4" y="16" font-size="13">{escape(title)}</text>',
             f'<text x="4" y="32" fill="#555">{span / 1e6:.3f} ms from the first invocation shown; '
             'red: the answer no order explains</text>']
    for client, i in row.items():
        parts.append(f'<text x="4" y="{TOP + ROW * i + 15}">{escape(client)}</text>')
    for op in ops:
        client = client_of(op)
        invoked = op.at if isinstance(op, Final) else op.invoke
        completed = op.at if isinstance(op, Final) else (op.complete if op.outcome != UNKNOWN else window.end)
        x0, x1 = x(invoked), max(x(completed), x(invoked) + 3)
        y = TOP + ROW * row[client]
        stuck = op is window.stuck
        fill = ("#c62828" if stuck else "#1565c0" if isinstance(op, Final)
                else "url(#open)" if op.outcome == UNKNOWN else COLOURS[op.outcome])
        parts.append(f'<rect x="{x0:.1f}" y="{y + 3}" width="{x1 - x0:.1f}" height="{ROW - 8}" rx="3" '
                     f'fill="{fill}" opacity="0.85"><title>{escape(_label(op))}</title></rect>')
        weight = ' font-weight="bold"' if stuck else ""
        parts.append(f'<text x="{x0 + 3:.1f}" y="{y + 15}"{weight}>'
                     f'{escape(_label(op))}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
