"""Bringing the local stack up, in line, and down; the CLI in ``__main__`` calls these,
and so do the demo and the end-to-end tests."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from .config import ROOT, StackConfig, owned_directory
from .servers import (
    Server,
    StackError,
    all_servers,
    app,
    infrastructure,
    mariadb,
    mariadb_bootstrap,
    mariadb_install,
    nginx,
    port_in_use,
    tail,
    watchers,
    workers,
)
from .supervisor import FAILED_STATES, Supervisor, log_file, write_conf, written_environments


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
                where = f"on 127.0.0.1:{server.port} " if server.port else ""
                _say(f"{name} ready {where}"
                     f"(pid {sup.info(name)['pid']}, {time.monotonic() - started:.1f}s)")
                del pending[name]
        time.sleep(0.1)


def _start(sup: Supervisor, config: StackConfig, servers: list[Server]) -> None:
    to_start = [s for s in servers if not sup.running(s.name)]
    for server in to_start:
        if server.port and port_in_use(server.port):
            raise StackError(f"{server.name} can't start: port {server.port} is taken by "
                             f"another process (set the port's environment variable to move it)")
        sup.start(server.name)
    _wait_ready(sup, config, to_start)


def _is_app(name: str) -> bool:
    return re.fullmatch(r"app\d+", name) is not None


# How long nginx's workers of an earlier config may take to answer what they hold:
# an admin request's minute (its proxy_read_timeout), and some.
NGINX_DRAIN_SECONDS = 65


def _nginx_send_to(sup: Supervisor, config: StackConfig, admitted: list[str]) -> None:
    """From now on nginx sends requests to the instances ``admitted`` only: its config
    rewritten and reloaded, then until every worker of the earlier config has exited.
    Such a worker exits once it has answered what it holds, closing its connections to
    the instances; an instance left out then has no request in flight and no
    connection nginx could send one on, and stops without failing any."""
    nginx(config, admitted)
    _nginx_reloaded(sup)


def _nginx_reloaded(sup: Supervisor) -> None:
    """nginx reloaded with the config on disk, once its workers of the earlier one exited."""
    earlier = _nginx_workers(sup.info("nginx")["pid"])
    sup.rpc.signalProcess("nginx", "HUP")
    _, alive = psutil.wait_procs(earlier, timeout=NGINX_DRAIN_SECONDS)
    if alive:
        raise StackError(f"nginx's workers of its earlier config still run {NGINX_DRAIN_SECONDS} s after "
                         f"its reload (pids {' '.join(str(p.pid) for p in alive)}): see its error.log")


def _nginx_workers(master: int) -> list[psutil.Process]:
    """nginx's worker processes (not its cache's manager and loader, which answer no request)."""
    workers = []
    for child in psutil.Process(master).children():
        try:
            if "worker process" in " ".join(child.cmdline()):
                workers.append(child)
        except psutil.NoSuchProcess:
            continue
    return workers


def _replace(sup: Supervisor, config: StackConfig, names: list[str], *, quick: bool = False) -> None:
    """Stop ``names`` (gracefully, all at once) and take up their new definitions;
    those no longer in ``config`` are gone. ``quick`` (gunicorn's, for a caller that
    sends them nothing): stopped at once by SIGQUIT, not after the 2 s a graceful stop
    lingers on each idle connection a client keeps to it (Prometheus's scrapes)."""
    sup.replace_all([name for name in names if name in config.app_names], quick="QUIT" if quick else None)
    for name in names:
        if name not in config.app_names:
            sup.remove(name)


def _apps_in_line(sup: Supervisor, config: StackConfig, earlier: dict[str, dict[str, str]],
                  changed: set[str], *, rolling: bool = True) -> None:
    """Replace the app instances whose definition changed (``changed``: changed, added
    or removed) while nginx sends every request to instances that stay up: with two
    instances or more, no request fails for a change. Not ``rolling``: all of them
    at once, for a caller that sends nothing meanwhile (a test between two sales).

    The changed instances go in two halves. nginx stops sending to the first half;
    once none of it has a request in flight (``_nginx_send_to``), it restarts with the
    new config, and nginx sends to it instead of the second half, which restarts in
    turn. An instance whose definition did not change serves throughout.

    A new strategy is a barrier (``orders.barrier``): its instances start held, their
    purchases waiting, until the last instance of the old strategy has stopped and,
    leaving the gate, the persisters have written what it accepted. Two strategies
    never sell at once: ``mysql-for-update`` writes what it computed from its read,
    and undoes the decrements ``atomic`` made in between.
    """
    new = config.app_names
    running = [name for name in earlier if _is_app(name) and sup.running(name)]
    _replace(sup, config, [name for name in changed if name not in running])
    replaced = [name for name in running if name in changed]
    steady = [name for name in running if name not in replaced]
    before = {earlier[name].get("FLASHSALE_STRATEGY") for name in replaced}
    switch = bool(before - {config.strategy})
    if switch:
        config.released_file.unlink(missing_ok=True)
        _say(f"strategy {' '.join(sorted(before))} -> {config.strategy}: the new instances hold "
             f"their purchases until the last of the old has stopped")
    else:
        config.released_file.touch()
    leaving = switch and "gate" in before and config.strategy != "gate"
    with _barrier(config, leaving) as barrier:
        if not rolling or not sup.running("nginx") or not running:
            # granian's workers outlive a quick stop of their master: gracefully.
            quick = not rolling and all(earlier[name].get("FLASHSALE_SERVER") == "gunicorn"
                                        for name in replaced)
            _replace(sup, config, replaced, quick=quick)
            barrier.release()
            # With the processes beside them (those replaced for the new config): all
            # boot at once, none needs another ready to start.
            _start(sup, config, [*(app(config, name) for name in new), *workers(config)])
            return
        # The second half keeps serving while the first restarts; without an unchanged
        # instance to serve meanwhile, at least one (a lone instance cannot: it restarts
        # with its requests failing).
        keep = [] if steady else replaced[(len(replaced) + 1) // 2:]
        first = [name for name in replaced if name not in keep]
        if first and len(first) < len(running):
            _nginx_send_to(sup, config, [name for name in running if name not in first])
        _replace(sup, config, first)
        starting = [name for name in new if name not in steady and name not in keep]
        _start(sup, config, [app(config, name) for name in starting])
        if keep:
            barrier.ready()  # before any purchase is held: its start is not in the hold
            _nginx_send_to(sup, config, [name for name in new if name in steady or name in starting])
            barrier.holding()
            _replace(sup, config, keep)
        barrier.release()
    _start(sup, config, [app(config, name) for name in keep if name in new])


# The lines manage.py gate_leave says once it waits for its cue, and once it has
# handed the sales over (orders/tests/test_gate_leave.py holds the command to them).
WAITING = "waiting for"
HANDED_OVER = "handed to the database:"


class _Barrier:
    """The new strategy's barrier (``orders.barrier``): ``holding()`` once nginx sends
    purchases to its held instances, ``release()`` once no instance of the old
    strategy runs. Leaving the gate, its sales of the products that follow the default
    are written and closed first (``manage.py gate_leave``), by a command started
    before the hold and ``ready()`` (waiting for its cue) before a purchase is held:
    the held purchases wait neither for Django to start nor for the process to end
    (Python's teardown, seconds on a busy machine), only for its answer."""

    def __init__(self, config: StackConfig, leave: subprocess.Popen | None, cue: Path):
        self.config, self.leave, self.cue = config, leave, cue
        self.held: float | None = None
        self.waiting = leave is None  # gate_leave, if any, said it waits for its cue
        self.answered = False  # gate_leave said it handed the sales over

    def ready(self) -> None:
        """Once gate_leave waits for its cue; StackError if it ends without."""
        if not self.waiting:
            assert self.leave is not None
            self._said(self.leave, WAITING)
            self.waiting = True

    def holding(self) -> None:
        self.held = time.monotonic()

    def release(self) -> None:
        self.ready()
        cued, said = time.monotonic(), ""
        if self.leave is not None:
            self.cue.touch()
            said = self._handed_over(self.leave)
            self.answered = True
        if not self.config.released_file.exists():
            self.config.released_file.touch()
            now, held = time.monotonic(), ""
            if self.held is not None:  # what a held purchase waited for, part by part
                held = f", held {now - self.held:.1f} s (the old instances stopping {cued - self.held:.1f} s"
                held += f", the gate's handover {now - cued:.1f} s: {said})" if self.leave else ")"
            _say(f"strategy {self.config.strategy}: purchases released{held}")

    @staticmethod
    def _handed_over(leave: subprocess.Popen) -> str:
        """Once ``leave`` says it handed the sales over: what it says of the handover
        (the count, its time and how long it waited for its cue); StackError if it
        ends without."""
        return _Barrier._said(leave, HANDED_OVER).rstrip().rpartition(" (")[2].rstrip(")")

    @staticmethod
    def _said(leave: subprocess.Popen, start: str) -> str:
        """``leave``'s next line that begins with ``start``; StackError if it ends first."""
        assert leave.stdout is not None
        said = []
        for line in leave.stdout:
            said.append(line)
            if line.startswith(start):
                return line
        leave.wait()
        raise StackError(f"gate_leave failed (status {leave.returncode}):\n{''.join(said)}")


@contextmanager
def _barrier(config: StackConfig, leaving: bool) -> Iterator[_Barrier]:
    """A switch's ``_Barrier``; ``leaving`` the gate, its ``gate_leave`` started now."""
    cue = config.dir("barrier") / "gate-stopped"
    cue.unlink(missing_ok=True)
    env = {**os.environ, **config.app_environment("migrate")}
    leave = subprocess.Popen([sys.executable, "manage.py", "gate_leave", "--after", str(cue)], cwd=ROOT,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True) if leaving else None
    barrier = _Barrier(config, leave, cue)
    try:
        yield barrier
    finally:
        if leave is not None:
            if not barrier.answered and leave.poll() is None:
                leave.kill()  # a switch that failed before the answer: the command is ours
            said, _ = leave.communicate(timeout=120)  # the rest, its teardown's, purchases released
            if leave.returncode and barrier.answered:
                _say(f"gate_leave ended with status {leave.returncode} after its answer:\n{said}")
        cue.unlink(missing_ok=True)


def _start_front(sup: Supervisor, config: StackConfig, earlier: dict[str, dict[str, str]],
                 changed: set[str], *, rolling: bool = True) -> None:
    """The app instances in line with ``config`` (``_apps_in_line``), the persisters and
    the race runner started, then nginx; a running nginx reloads, since the upstream
    list in its config may have changed."""
    _apps_in_line(sup, config, earlier, changed, rolling=rolling)
    _start(sup, config, workers(config))
    front = nginx(config)
    if sup.info(front.name)["statename"] == "RUNNING":
        _nginx_reloaded(sup)  # nginx(config) wrote its config: every instance
        _wait_ready(sup, config, [front])
    else:
        _start(sup, config, [front])


def _manage(config: StackConfig, *command: str) -> None:
    """A one-off ``manage.py`` command in the apps' environment, before they start."""
    env = {**os.environ, **config.app_environment("migrate")}
    result = subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env,
                            capture_output=True, text=True)
    if result.returncode:
        raise StackError(f"{command[0]} failed:\n{result.stdout}{result.stderr}")


def _migrate(sup: Supervisor, config: StackConfig) -> None:
    """``migrate``; a failure during which MariaDB exited (a crash of the server)
    says so, with the end of its log, where the server writes its backtrace and query."""
    try:
        _manage(config, "migrate", "--noinput")
    except StackError as failed:
        lost = any(words in failed.args[0] for words in ("Lost connection to server", "server has gone away"))
        try:
            sup.wait_stopped("mariadb", timeout=15 if lost else 0)  # a crash writes its report first
        except StackError:
            raise failed from None
        tails = "\n".join(f"--- {path}\n{tail(path, 60)}" for path in mariadb(config).logs)
        raise StackError(f"{failed.args[0]}\nMariaDB exited during migrate; its log ends:\n{tails}") from None


# Strict, and never --quiet: a warning it hides is one strict mode does not count.
DOCS_BUILD = ("-m", "mkdocs", "build", "--strict")


def docs(config: StackConfig, site_dir: Path | None = None) -> None:
    """Build the documentation site (``mkdocs.yml``, strict: a broken link or include
    fails it) where the stack's nginx serves it, at /docs/, or in ``site_dir``."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the theme's notice of its successor
    site = site_dir or config.docs_root
    result = subprocess.run([sys.executable, *DOCS_BUILD, "--site-dir", str(site)], cwd=ROOT,
                            env=env, capture_output=True, text=True)
    if result.returncode:
        raise StackError(f"mkdocs build failed:\n{result.stdout}{result.stderr}")
    _say(f"docs built in {site}" + ("" if site_dir else f": {config.base_url}/docs/ once the stack is up"))


def _conf_applied(sup: Supervisor) -> set[str]:
    """supervisord's programs in line with the config just written: every changed
    program but the app instances replaced (stopped, to be started), those added,
    taken up. Returns the app instances changed, added or removed, which
    ``_apps_in_line`` replaces while the others serve."""
    added, changed, removed = sup.reread()
    for name in removed:
        if not _is_app(name):
            sup.remove(name)
    # Stopped at once: each waits out its own graceful stop, not the others' too.
    sup.replace_all([name for name in changed if not _is_app(name)])
    for name in added:
        sup.rpc.addProcessGroup(name)
    if replaced := [name for name in changed + added if not _is_app(name)]:
        _say(f"configuration changed for: {', '.join(sorted(replaced))}")
    return {name for name in added + changed + removed if _is_app(name)}


def up(config: StackConfig, *, watched: bool = True) -> None:
    """Every server of the stack started and ready; not ``watched``: Prometheus, its
    exporters, Alertmanager and the pager left stopped (``watch`` starts them), as
    the suite's stacks are until a test asks for them: at a scrape every 2 s they
    cost CPU whether anything reads them or not."""
    servers = all_servers(config)
    earlier = written_environments(config)
    write_conf(config, servers)
    mariadb_install(config)
    sup = Supervisor(config)
    if sup.is_running():
        changed = _conf_applied(sup)
    else:
        sup.start_daemon()
        earlier, changed = {}, set()
    _start(sup, config, infrastructure(config))
    mariadb_bootstrap(config)
    _migrate(sup, config)
    _manage(config, "collectstatic", "--noinput", "--verbosity=0")  # nginx serves them
    _start_front(sup, config, earlier, changed)
    if watched:
        _start(sup, config, watchers(config))
    # Their files written again above (the rules, the routes) are read again: a running
    # stack's `make up` applies an edit of them, which supervisord's config never names.
    for name in ("prometheus", "alertmanager"):
        if sup.running(name):
            sup.rpc.signalProcess(name, "HUP")
    _say(f"up: {config.base_url}/ strategy={config.strategy} instances={config.instances} "
         f"server={config.server} section_delay_ms={config.section_delay_ms:g}")
    _say(f"admin token in {config.admin_token_file} (Authorization: Token <it>)")
    if watched:
        _say(f"Prometheus: http://127.0.0.1:{config.prometheus_port}/ (alerts: /alerts, targets: /targets)")
    else:
        _say("Prometheus, its exporters, Alertmanager and the pager: not started")


def watch(config: StackConfig) -> None:
    """Start the running stack's Prometheus, exporters, Alertmanager and pager, those
    not running, and wait until each answers."""
    _start(Supervisor(config), config, watchers(config))


def start_again(config: StackConfig, names: list[str]) -> None:
    """Start servers of the running stack that stopped (a fault killed them), and
    wait until each answers its probe."""
    by_name = {server.name: server for server in all_servers(config)}
    _start(Supervisor(config), config, [by_name[name] for name in names])


def reconfigure(config: StackConfig, *, rolling: bool = True) -> StackConfig:
    """Bring a running stack in line with ``config`` (strategy, race delay, instances,
    workers): only the app instances restart, and nginx reloads its upstream. Not
    ``rolling``: the changed instances restart all at once (nothing may be selling)."""
    sup = Supervisor(config)
    if not sup.is_running():
        raise StackError("the stack is not running: `make up` first")
    earlier = written_environments(config)
    write_conf(config, all_servers(config))
    _start_front(sup, config, earlier, _conf_applied(sup), rolling=rolling)
    _say(f"apps now: strategy={config.strategy} instances={config.instances} server={config.server} "
         f"workers={config.workers} section_delay_ms={config.section_delay_ms:g} "
         f"fast_path={'on' if config.fast_path else 'off'} metrics={'on' if config.metrics else 'off'}")
    return config


@contextmanager
def apps_as_needed(config: StackConfig, *, rolling: bool = True,
                   put_back: bool = True) -> Iterator[Callable[..., StackConfig]]:
    """Yield ``use(**changes)``, which restarts the app instances with ``config`` so
    changed, unless that is what already runs; on the way out, the instances are
    put back to ``config`` (not ``put_back``: left as the last call asked, for a
    caller whose stack stops next). ``rolling`` as in ``reconfigure``; a call may say
    otherwise (``use(rolling=True, ...)``: a switch while a sale runs)."""
    current = config

    def use(*, rolling: bool = rolling, **changes) -> StackConfig:
        nonlocal current
        wanted = config.replace(**changes)
        if wanted != current:
            current = reconfigure(wanted, rolling=rolling)
        return wanted

    try:
        yield use
    finally:
        if put_back and current != config:
            reconfigure(config, rolling=rolling)


def down(config: StackConfig) -> None:
    sup = Supervisor(config)
    if sup.daemon_pid() is None:
        _say("not running")
        return
    stopped = sup.shutdown()
    _say(f"down: stopped pids {' '.join(map(str, stopped))}")


def clean(config: StackConfig) -> None:
    """Stop the stack, then remove its run directory and its directories outside it."""
    down(config)
    records = config.outside_records
    for record in sorted(records.glob("*")) if records.is_dir() else ():
        path = Path(record.read_text().strip())
        if owned_directory(path):
            shutil.rmtree(path)
            _say(f"removed {path}")
    shutil.rmtree(config.run_dir, ignore_errors=True)
    _say(f"removed {config.run_dir}")


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
              f"{(server.port if server else '') or '':>5}  {uptime:>7}s  {health}")
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


