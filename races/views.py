"""The race page: every strategy's column, live, the chart of their orders, and (in a race
with a waiting room) the chart of their rooms' queues."""

from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from common.strategies import STRATEGIES

from .limits import DEFAULT_STRATEGIES, MAX_BUYERS, MAX_CONCURRENCY, MAX_ROOM_RATE, MAX_STOCK


@ensure_csrf_cookie
def race(request):
    return render(request, "races/race.html", {
        "strategies": [{"name": spec.name, "summary": spec.summary, "correct": spec.claims_correct,
                        "checked": spec.name in DEFAULT_STRATEGIES} for spec in STRATEGIES.values()],
        "max_buyers": MAX_BUYERS, "max_concurrency": MAX_CONCURRENCY, "max_stock": MAX_STOCK,
        "max_room_rate": MAX_ROOM_RATE,
    })
