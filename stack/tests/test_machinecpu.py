"""The machine's CPU by role: what each process is taken for, and a process that spins
counted under its role, or as not seen when it came and went between two looks."""

import os
import subprocess
import sys
import uuid

import psutil
import pytest

from stack.machinecpu import COMMAND_KEPT, INTERRUPTS, ROLES, STOLEN, UNSEEN, MachineCpu, _Seen, role_of

# Spins this many seconds of its own CPU, then leaves; its command line carries the marker.
SPIN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n# {marker}"


def spinner_roles(marker: str) -> tuple[tuple[str, str], ...]:
    """The roles with this test's spinner first: the looks see every process of the
    machine, another test's spinner too (the suite runs its parts at once)."""
    return (("spinner", rf"# {marker}$"), *ROLES)


@pytest.mark.parametrize(("command", "role"), [
    ("/repo/.venv/bin/python -c while True: pass", "CPU burners"),
    ("/repo/.venv/bin/python -m pytest -c /repo/pyproject.toml -m stack", "pytest"),
    ("/repo/.venv/bin/python /repo/.venv/bin/gunicorn flashsale.wsgi:application", "the app instances"),
    ("/repo/.venv/bin/python manage.py persist_orders --name=persist1", "persisters"),
    ("/repo/.venv/bin/python manage.py expire_orders --metrics-port=9398", "expirers"),
    ("/repo/.venv/bin/python manage.py migrate --noinput", "other manage.py commands"),
    ("/usr/sbin/mariadbd --no-defaults --datadir=/x", "MariaDB"),
    ("/usr/bin/java -Xmx256m -cp /usr/share/java/zookeeper.jar org.apache.zookeeper.server.quorum."
     "QuorumPeerMain /x/zoo.cfg", "ZooKeeper"),
    ("/usr/bin/prometheus --config.file=/x/prometheus.yml", "Prometheus"),
    ("/usr/bin/prometheus-mysqld-exporter --config.my-cnf=/x", "exporters"),
    ("/usr/bin/prometheus-alertmanager --config.file=/x", "Alertmanager"),
    ("nginx: worker process", "nginx"),
    ("/usr/bin/promtool test rules rules.test.yml", "promtool"),
    ("/repo/.venv/bin/python /repo/.venv/bin/mypy .", "the type checker and the docs build"),
    ("/repo/.venv/bin/python -m stack docs --site-dir /tmp/x", "the type checker and the docs build"),
    ("/repo/.venv/bin/python -m mkdocs build --strict --site-dir /x", "the type checker and the docs build"),
    ("", "?"),
])
def test_a_process_is_taken_for_the_first_role_its_command_matches(command, role):
    assert role_of(command) == role


def spin(seconds: float, marker: str) -> None:
    code = SPIN.format(seconds=seconds, marker=marker)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# Spins, says so, then waits for its stdin to close before it leaves.
SPIN_THEN_WAIT = ("import sys, time\nend = time.process_time() + {seconds}\n"
                  "while time.process_time() < end: pass\nprint(flush=True)\nsys.stdin.read()\n# {marker}")


def test_a_process_that_spins_while_looked_at_is_counted_under_its_role():
    """Seen at a look after it spun, whatever the looks every 0.05 s caught of it
    (on a loaded machine, one look may outlast its life, or find it between its fork
    and its exec)."""
    marker = f"spin-{uuid.uuid4().hex}"
    with MachineCpu(period=0.05, roles=spinner_roles(marker)) as machine:
        with subprocess.Popen([sys.executable, "-c", SPIN_THEN_WAIT.format(seconds=0.5, marker=marker)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE) as spinner:
            assert spinner.stdout is not None and spinner.stdin is not None
            spinner.stdout.readline()  # it spun
            machine.look()
            spinner.stdin.close()
    used = machine.by_role()
    assert 0.4 <= used["spinner"] <= 0.7, used
    assert machine.busy >= used["spinner"]
    [row] = [row for row in machine.by_command(top=10**6) if marker in row.command]
    assert row.role == "spinner" and row.processes == 1 and row.seconds == used["spinner"]


def test_a_process_first_seen_before_its_exec_is_taken_for_what_it_runs():
    """A fork of this pytest, looked at before its exec, runs this pytest's command line."""
    marker = f"spin-{uuid.uuid4().hex}"
    go, told = os.pipe()  # the child execs when this closes
    stdin, to_child = os.pipe()
    from_child, stdout = os.pipe()
    with MachineCpu(period=3600, roles=spinner_roles(marker)) as machine:
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            for end in (told, to_child, from_child):
                os.close(end)
            os.dup2(stdin, 0)
            os.dup2(stdout, 1)
            os.read(go, 1)
            code = SPIN_THEN_WAIT.format(seconds=0.2, marker=marker)
            os.execv(sys.executable, [sys.executable, "-c", code])
        for end in (go, stdin, stdout):
            os.close(end)
        machine.look()
        [forked] = [seen for (pid, _), seen in machine.seen.items() if pid == child]
        assert forked.command == " ".join(psutil.Process().cmdline())[:COMMAND_KEPT]
        os.close(told)
        with os.fdopen(from_child) as said, os.fdopen(to_child, "w") as leave:
            said.readline()  # it spun
            machine.look()
            leave.close()
            os.waitpid(child, 0)
    assert forked.role == "spinner" and marker in forked.command, forked
    assert 0.15 <= machine.by_role()["spinner"] <= 0.4


def test_one_that_came_and_went_between_two_looks_is_counted_as_not_seen():
    marker = f"spin-{uuid.uuid4().hex}"
    with MachineCpu(period=3600, roles=spinner_roles(marker)) as machine:
        spin(0.5, marker)  # the looks are at the start and the end only
    used = machine.by_role()
    assert "spinner" not in used and used[UNSEEN] >= 0.4, used


def test_what_no_process_holds_is_its_own_line_and_not_taken_for_unseen():
    """The kernel's interrupts and the hypervisor's steal are in the machine's busy
    time and in no process's: each its own line, the rest of the gap "not seen"."""
    machine = MachineCpu()
    machine.seen = {(1, 0.0): _Seen("pytest", "python -m pytest", 1.0, 6.0),
                    (2, 0.0): _Seen("MariaDB", "mariadbd", 0.0, 2.0)}
    machine.busy, machine.outside = 10.0, {INTERRUPTS: 0.5, STOLEN: 1.5}
    assert machine.by_role() == {"pytest": 5.0, "MariaDB": 2.0, STOLEN: 1.5, UNSEEN: 1.0, INTERRUPTS: 0.5}
    with MachineCpu(period=3600) as looked:
        pass
    assert set(looked.outside) == {INTERRUPTS, STOLEN} and min(looked.outside.values()) >= 0
