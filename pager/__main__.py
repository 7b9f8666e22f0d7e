"""``python -m pager``: the stand-in pager, Alertmanager's webhook receiver, until SIGTERM."""

import argparse
import logging
import signal
import threading
from pathlib import Path

from .server import Pager, serve


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m pager", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, default=None, help="also append each alert, a JSON line, here")
    parser.add_argument("--keep", type=int, default=500, help="notifications GET /alerts remembers")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pager = Pager(log=args.log, keep=args.keep)
    server = serve(pager, host=args.host, port=args.port)
    logging.getLogger("pager").info('{"pager": "serving on %s:%d"}', args.host, args.port)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.shutdown()


if __name__ == "__main__":
    main()
