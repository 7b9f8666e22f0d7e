"""``python -m payprovider``: the stand-in for Stripe's test mode, until SIGTERM."""

import argparse
import logging
import signal
import threading

from .server import Knobs, Provider, serve


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m payprovider", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", required=True, help="the secret key clients must send (sk_test_...)")
    parser.add_argument("--webhook-url", default=None, help="where events are POSTed; none: not delivered")
    parser.add_argument("--webhook-secret", required=True, help="the endpoint's signing secret (whsec_...)")
    parser.add_argument("--duplicate", type=float, default=0.0, help="share of events delivered twice")
    parser.add_argument("--copies", type=int, default=2, help="deliveries of a duplicated event: 2 to this")
    parser.add_argument("--workers", type=int, default=1, help="deliveries under way at once")
    parser.add_argument("--delay-ms", type=int, default=0, help="each delivery waits up to this long first")
    parser.add_argument("--decline", type=float, default=0.0, help="share of payments declined anyway")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    knobs = Knobs(duplicate=args.duplicate, copies=args.copies, workers=args.workers, delay_ms=args.delay_ms,
                  decline=args.decline)
    provider = Provider(api_key=args.api_key, webhook_url=args.webhook_url,
                        webhook_secret=args.webhook_secret, knobs=knobs)
    server = serve(provider, host=args.host, port=args.port)
    logging.getLogger("payprovider").info("serving on %s:%d", args.host, args.port)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    provider.stop()


if __name__ == "__main__":
    main()
