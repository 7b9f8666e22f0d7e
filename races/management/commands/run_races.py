"""``manage.py run_races``: the race runner, a process of the stack (races.runner)."""

import logging
import signal
import threading
from pathlib import Path

import redis
from django.conf import settings

from common.commands import CommandWithoutChecks
from common.liveness import heartbeat
from common.metrics import metrics_arguments, metrics_served
from races import metrics
from races.runner import RaceRun
from races.services import QUEUE, race_take

logger = logging.getLogger(__name__)


class Command(CommandWithoutChecks):
    help = "Run the races the API queues, one at a time, until SIGTERM or SIGINT."

    def add_arguments(self, parser):
        parser.add_argument("--name", default="racer",
                            help="its Redis client's name (the stack's readiness probe)")
        parser.add_argument("--alive-file", type=Path, default=None,
                            help="a file touched at every turn of its loop, and every tick of a race "
                                 "(a liveness probe reads its age: common.liveness)")
        metrics_arguments(parser)

    def handle(self, *args, name, alive_file=None, **options):
        metrics_served(metrics_port=options["metrics_port"], metrics_address=options["metrics_address"])
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())  # the buyers stop; the race reads "failed"
        # Its own connection, named, for the queue: the race documents go through the
        # cache's, like the API's.
        queue = redis.Redis.from_url(settings.CACHES["default"]["LOCATION"], client_name=name,
                                     socket_timeout=5, socket_connect_timeout=2)
        target = settings.FLASHSALE_RACE_TARGET
        logger.info("race runner %s: buyers go to %s", name, target)
        while not stop.is_set():
            heartbeat(alive_file)  # a turn that finds the queue away still turns the loop
            try:
                popped = queue.blpop([QUEUE], timeout=1)
            except redis.ConnectionError as e:
                logger.warning("race queue unreachable: %s", e)
                stop.wait(1)
                continue
            if popped is None:
                continue
            race = race_take(race_id=int(popped[1]))
            if race is not None:
                with metrics.RUNNING.track_inprogress():
                    ended = RaceRun(race, target=target, stop=stop,
                                    beat=lambda: heartbeat(alive_file)).run()
                metrics.RACES.labels(ended["status"]).inc()

