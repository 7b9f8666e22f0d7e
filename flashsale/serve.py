"""The app instances' request server: ``python -m flashsale.serve`` starts gunicorn or
granian, as ``FLASHSALE_SERVER`` says, with what every deployment gives it the same
way (the local stack, the test hosts, the Docker image)::

    FLASHSALE_SERVER=granian python -m flashsale.serve --bind 127.0.0.1:8001 --workers 2 --threads 8

Either serves ``flashsale.wsgi:application`` with ``workers`` processes of
``threads`` threads each running Django (gunicorn's gthread threads, granian's
blocking threads): a purchase that waits seconds for a lock holds one thread, not
its worker. Before the server starts, the workers' metrics directory
(``PROMETHEUS_MULTIPROC_DIR``) is emptied, since a file an earlier run's worker left
would be summed into this run's counts; then this process becomes the server
(``exec``), so the PID its supervisor holds is the server's own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

SERVERS = ("gunicorn", "granian")
DEFAULT_SERVER = "gunicorn"
APPLICATION = "flashsale.wsgi:application"
# A worker stopping (a reload, the stack going down) finishes what it serves for this
# long, then is killed.
GRACE_SECONDS = 5
# nginx lets go of an idle upstream connection after 50 s (nginx/nginx.conf.template);
# a server must keep it longer, or nginx sends a purchase down a connection the server
# has just closed. granian closes an idle connection at its header-read timeout, 60 s
# at most; gunicorn at its keep-alive.
IDLE_SECONDS = 60


class ServeError(ValueError):
    """An unknown server or a malformed bind address."""


def server_name(environ: Mapping[str, str] = os.environ) -> str:
    name = environ.get("FLASHSALE_SERVER", "") or DEFAULT_SERVER
    if name not in SERVERS:
        raise ServeError(f"FLASHSALE_SERVER is {' or '.join(SERVERS)}, not {name!r}")
    return name


# Past six parameters: the server's command-line knobs, each a flag of it.
def command(server: str, *, bind: str, workers: int, threads: int, bin_dir: Path,  # noqa: PLR0913
            name: str | None = None, grace: int = GRACE_SECONDS) -> list[str]:
    """The server's command line for these knobs; ``grace``: seconds a stopping worker
    finishes what it serves before it is killed."""
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit():
        raise ServeError(f"bind is HOST:PORT, not {bind!r}")
    if server == "gunicorn":
        return [str(bin_dir / "gunicorn"), APPLICATION, "--config=python:flashsale.gunicorn",
                f"--bind={bind}", *([f"--name={name}"] if name else []),
                "--worker-class=gthread", f"--workers={workers}", f"--threads={threads}",
                # Django and the project imported once, in the master, before the
                # workers fork: a worker starts in milliseconds, not the second an
                # import costs each. What a worker must not share is made after the
                # fork by its own check of the PID (connections, clients, threads).
                "--preload",
                "--timeout=60", f"--graceful-timeout={grace}", f"--keep-alive={IDLE_SECONDS + 15}",
                "--error-logfile=-", "--log-level=warning"]
    if server == "granian":
        return [str(bin_dir / "granian"), "--interface=wsgi", APPLICATION, f"--host={host}", f"--port={port}",
                f"--workers={workers}", f"--blocking-threads={threads}", "--http=1", "--no-ws",
                # A worker that dies (killed, crashed) is replaced, as gunicorn's master does.
                "--respawn-failed-workers", "--respawn-interval=1",
                f"--workers-kill-timeout={grace}",
                f"--http1-header-read-timeout={IDLE_SECONDS * 1000}", "--log-level=warning"]
    raise ServeError(f"the server is {' or '.join(SERVERS)}, not {server!r}")


def empty_metrics_directory(environ: Mapping[str, str] = os.environ) -> None:
    directory = environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
        Path(directory).mkdir(parents=True)


def arguments() -> argparse.ArgumentParser:
    """The launcher's command line (the Docker image's and the Kubernetes manifests' command)."""
    parser = argparse.ArgumentParser(prog="python -m flashsale.serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bind", required=True, help="HOST:PORT")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--name", help="the instance's name, in gunicorn's process titles")
    parser.add_argument("--grace", type=int, default=GRACE_SECONDS,
                        help="seconds a stopping worker finishes what it serves (Kubernetes: past the "
                             "purchase deadline)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = arguments()
    args = parser.parse_args(argv)
    try:
        argv = command(server_name(), bind=args.bind, workers=args.workers, threads=args.threads,
                       bin_dir=Path(sys.executable).parent, name=args.name, grace=args.grace)
    except ServeError as e:
        parser.error(str(e))
    empty_metrics_directory()
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
