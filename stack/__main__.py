"""The local stack: MariaDB, Redis, ZooKeeper, N gunicorn instances and nginx on
loopback, without Docker, supervised by supervisord.

    python -m stack up        # start (or bring in line with the environment)
    python -m stack status
    python -m stack down      # stop exactly what `up` started, by PID
    python -m stack run -- CMD ...   # up if needed, run CMD, down if we brought it up

Switch strategy by running `up` again with another FLASHSALE_STRATEGY: only the app
instances restart.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from .config import ROOT, StackConfig
from .servers import (
    Server, StackError, all_servers, apps, infrastructure, mariadb_bootstrap, mariadb_install,
    nginx, port_in_use, tail,
)
from .supervisor import FAILED_STATES, Supervisor, log_file, write_conf


def _say(message: str) -> None:
    print(f"[stack] {message}", flush=True)


def _fail(config: StackConfig, server: Server, why: str) -> StackError:
    logs = [log_file(config, server.name), *server.logs]
    tails = "\n".join(f"--- {path}\n{tail(path)}" for path in logs)
    return StackError(f"{server.name} failed to start: {why}\n{tails}")


def _wait_ready(sup: Supervisor, config: StackConfig, servers: list[Server]) -> None:
    """Wait until every server answers its probe; fail fast if one exits."""
    pending = {s.name: s for s in servers}
    started = time.monotonic()
    last_error: dict[str, str] = {}
    while pending:
        for name, server in list(pending.items()):
            state = sup.info(name)["statename"]
            if state in FAILED_STATES:
                raise _fail(config, server, f"process is {state}")
            try:
                server.probe()
            except Exception as e:  # not ready yet: the probe's error says why
                last_error[name] = f"{type(e).__name__}: {e}"
                if time.monotonic() - started > server.ready_timeout:
                    raise _fail(config, server, f"not ready after {server.ready_timeout:.0f}s "
                                                f"({last_error[name]})") from None
            else:
                _say(f"{name} ready on 127.0.0.1:{server.port} "
                     f"(pid {sup.info(name)['pid']}, {time.monotonic() - started:.1f}s)")
                del pending[name]
        time.sleep(0.1)


def _start(sup: Supervisor, config: StackConfig, servers: list[Server]) -> None:
    to_start = [s for s in servers if sup.info(s.name)["statename"] not in ("RUNNING", "STARTING")]
    for server in to_start:
        if port_in_use(server.port):
            raise StackError(f"{server.name} can't start: port {server.port} is taken by "
                             f"another process (set the port's environment variable to move it)")
        sup.start(server.name)
    _wait_ready(sup, config, to_start)


def _migrate(config: StackConfig) -> None:
    env = {**os.environ, **config.app_environment("migrate")}
    result = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode:
        raise StackError(f"migrate failed:\n{result.stdout}{result.stderr}")


def up(config: StackConfig) -> None:
    servers = all_servers(config)
    write_conf(config, servers)
    mariadb_install(config)
    sup = Supervisor(config)
    if sup.is_running():
        replaced = sup.reload()
        if replaced:
            _say(f"configuration changed for: {', '.join(sorted(replaced))}")
    else:
        sup.start_daemon()
    _start(sup, config, infrastructure(config))
    mariadb_bootstrap(config)
    _migrate(config)
    _start(sup, config, apps(config))
    _start(sup, config, [nginx(config)])
    _say(f"up: {config.base_url}/ strategy={config.strategy} instances={config.instances} "
         f"race_delay_ms={config.race_delay_ms:g}")
    _say(f"admin token in {config.admin_token_file} (Authorization: Token <it>)")


def switch(config: StackConfig, *, strategy: str, race_delay_ms: float | None = None) -> StackConfig:
    """Restart the app instances with another strategy (and race delay); the rest stays."""
    changed = config.replace(
        strategy=strategy,
        race_delay_ms=config.race_delay_ms if race_delay_ms is None else race_delay_ms,
    )
    servers = all_servers(changed)
    write_conf(changed, servers)
    sup = Supervisor(changed)
    if not sup.is_running():
        raise StackError("the stack is not running: `make up` first")
    sup.reload()
    _start(sup, changed, apps(changed))
    return changed


def down(config: StackConfig) -> None:
    sup = Supervisor(config)
    if sup.daemon_pid() is None:
        _say("not running")
        return
    stopped = sup.shutdown()
    _say(f"down: stopped pids {' '.join(map(str, stopped))}")


def status(config: StackConfig) -> int:
    sup = Supervisor(config)
    if not sup.is_running():
        _say("not running")
        return 3
    print(f"{'server':<11} {'state':<9} {'pid':>7}  {'port':>5}  {'uptime':>8}  health")
    servers = {s.name: s for s in all_servers(config)}
    healthy = True
    for proc in sup.processes():
        server = servers.get(proc["name"])
        health = "-"
        if server is not None and proc["statename"] == "RUNNING":
            try:
                server.probe()
                health = "ok"
            except Exception as e:
                health, healthy = f"{type(e).__name__}: {e}", False
        uptime = proc["now"] - proc["start"] if proc["statename"] == "RUNNING" else 0
        print(f"{proc['name']:<11} {proc['statename']:<9} {proc['pid'] or '-':>7}  "
              f"{server.port if server else '':>5}  {uptime:>7}s  {health}")
    print(f"\n{config.base_url}/   admin token: {config.admin_token_file}")
    return 0 if healthy else 1


def run(config: StackConfig, command: list[str]) -> int:
    """Run ``command`` against the stack, bringing it up and down around it if needed."""
    ours = not Supervisor(config).is_running()
    try:
        up(config)
        return subprocess.call(command)
    finally:
        if ours:
            down(config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start the stack (or apply a changed environment)")
    sub.add_parser("down", help="stop every process the stack started")
    sub.add_parser("status", help="state, PID and health of every server")
    p_run = sub.add_parser("run", help="run a command with the stack up")
    p_run.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    config = StackConfig.from_env()
    try:
        if args.command == "up":
            up(config)
        elif args.command == "down":
            down(config)
        elif args.command == "status":
            return status(config)
        elif args.command == "run":
            cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            return run(config, cmd)
    except StackError as e:
        print(f"[stack] error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
