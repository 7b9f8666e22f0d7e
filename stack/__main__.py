"""The local stack: MariaDB, Redis, ZooKeeper, N gunicorn instances and nginx on
loopback, without Docker, supervised by supervisord.

    python -m stack up        # start (or bring in line with the environment)
    python -m stack status
    python -m stack down      # stop exactly what `up` started, by PID
    python -m stack run -- CMD ...   # up if needed, run CMD, down if we brought it up
    python -m stack test [--lanes N] -- [PYTEST ARGS]   # the whole suite, in lanes (stack.suite)
    python -m stack check -- [PYTEST ARGS]   # what starts nothing, its parts at once (stack.check)
    python -m stack docs      # build the documentation site that nginx serves at /docs/
    python -m stack commands  # write the commands reference from the Makefile and the management commands
    python -m stack clean     # down, then remove the run directory and what it made outside
    python -m stack restore-drill [--database NAME]  # dump, restore into a scratch server, compare
    python -m stack prometheusrule  # write the cluster's PrometheusRule from the rule files

Switch strategy by running `up` again with another FLASHSALE_STRATEGY: only the app
instances restart (``reconfigure`` does the same from Python).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from . import check, commands, prometheusrule, results, suite
from .config import StackConfig
from .control import clean, docs, down, run, status, up
from .drill import restore_drill
from .servers import APP_DATABASE, StackError

# What acts on the stack and says nothing back, given its command line; what writes a
# file from another.
ACTIONS: dict[str, Callable[[StackConfig, argparse.Namespace], None]] = {
    "down": lambda config, _: down(config),
    "docs": lambda config, args: docs(config, site_dir=args.site_dir),
    "clean": lambda config, _: clean(config),
}
WRITERS: dict[str, tuple[Path, Callable[[], bool], str]] = {
    "commands": (commands.PAGE, commands.write, "the Makefile and the management commands"),
    "prometheusrule": (prometheusrule.TARGET, prometheusrule.write, "the rule files"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start the stack (or apply a changed environment)")
    p_up.add_argument("--unwatched", action="store_true",
                      help="leave Prometheus, its exporters, Alertmanager and the pager stopped, as the "
                           "suite's stacks do until a test reads them")
    sub.add_parser("down", help="stop every process the stack started")
    sub.add_parser("status", help="state, PID and health of every server")
    p_docs = sub.add_parser("docs", help="build the documentation site nginx serves at /docs/")
    p_docs.add_argument("--site-dir", type=Path, help="build it here instead (a check of the build)")
    sub.add_parser("commands", help="write the commands reference (the Makefile, manage.py)")
    sub.add_parser("prometheusrule", help="write deploy/k8s/monitoring's PrometheusRule from the rule files")
    sub.add_parser("clean", help="stop, then remove the run directory and the stack's temp directories")
    p_drill = sub.add_parser("restore-drill", help="dump the database as the nightly backup does, restore it "
                             "into a scratch MariaDB and compare the copy with the source (stack.drill)")
    p_drill.add_argument("--database", default=APP_DATABASE)
    p_run = sub.add_parser("run", help="run a command with the stack up")
    p_run.add_argument("cmd", nargs=argparse.REMAINDER)
    p_test = sub.add_parser("test", help="the whole suite, in lanes at once, each on a stack of its own")
    p_test.add_argument("--lanes", type=int, default=2,
                        help="stacks, each running a share of the tests (make test LANES=n; 2)")
    p_test.add_argument("--store-durations", action="store_true",
                        help="write this run's durations into .test_durations, which splits the tests")
    p_test.add_argument("--burn", type=int, default=0, metavar="N",
                        help="N processes spinning beside the suite")
    p_test.add_argument("--cpu", type=float, metavar="SHARE",
                        help="the suite and its stacks under a CPU quota of this share of the machine's "
                             "cores, as root (make test-slow: 0.5, a machine half as fast)")
    p_test.add_argument("--checks", action="store_true",
                        help="ruff first, then the type checker and the docs build beside the suite "
                             "(make test)")
    p_test.add_argument("pytest_args", nargs=argparse.REMAINDER)
    p_results = sub.add_parser("results", help="every measured file's command again, at HEAD on a clean "
                               "tree (stack.results)")
    p_results.add_argument("--list", action="store_true", help="print the commands and what each writes")
    p_results.add_argument("--only", default="", help="run only the commands containing this text")
    p_results.add_argument("--from", dest="start", type=int, default=1, metavar="N",
                           help="start at the N-th command (--list numbers them): a run continued later")
    p_results.add_argument("--check", action="store_true",
                           help="say which measured files the code's commit did not write (exit 1 if any)")
    p_check = sub.add_parser("check", help="lint, types, docs and the tests that start nothing, at once")
    p_check.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    config = StackConfig.from_env()
    try:
        if args.command == "up":
            up(config, watched=not args.unwatched)
        elif args.command in ACTIONS:
            ACTIONS[args.command](config, args)
        elif args.command in WRITERS:
            target, write, source = WRITERS[args.command]
            print(f"[stack] {target.relative_to(commands.ROOT)}: "
                  + (f"written from {source}" if write() else f"already up to date with {source}"))
        elif args.command == "status":
            return status(config)
        elif args.command == "restore-drill":
            drill = restore_drill(config, args.database)
            print(drill.report())
            return 1 if drill.differences else 0
        elif args.command == "run":
            cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            return run(config, cmd)
        elif args.command == "results":
            return results.main(list_only=args.list, only=args.only, start=args.start, check=args.check)
        elif args.command == "check":
            return check.main(args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args)
        elif args.command == "test":
            pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
            if args.lanes < 1:
                parser.error("--lanes must be at least 1")
            return suite.main(pytest_args, lanes=args.lanes, store_durations=args.store_durations,
                              burn=args.burn, checks=args.checks, cpu=args.cpu)
    except StackError as e:
        print(f"[stack] error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
