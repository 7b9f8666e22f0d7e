"""The machine's CPU by role: what each process is taken for, and a process that spins
counted under its role, or as not seen when it came and went between two looks."""

import subprocess
import sys
import uuid

import pytest

from stack.machinecpu import ROLES, UNSEEN, MachineCpu, role_of

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
    ("", "?"),
])
def test_a_process_is_taken_for_the_first_role_its_command_matches(command, role):
    assert role_of(command) == role


def spin(seconds: float, marker: str) -> None:
    code = SPIN.format(seconds=seconds, marker=marker)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_process_that_spins_while_looked_at_is_counted_under_its_role():
    marker = f"spin-{uuid.uuid4().hex}"
    with MachineCpu(period=0.05, roles=spinner_roles(marker)) as machine:
        spin(0.5, marker)
    used = machine.by_role()
    assert 0.4 <= used["spinner"] <= 0.7, used
    assert machine.busy >= used["spinner"]
    [row] = [row for row in machine.by_command(top=10**6) if marker in row.command]
    assert row.role == "spinner" and row.processes == 1 and row.seconds == used["spinner"]


def test_one_that_came_and_went_between_two_looks_is_counted_as_not_seen():
    marker = f"spin-{uuid.uuid4().hex}"
    with MachineCpu(period=3600, roles=spinner_roles(marker)) as machine:
        spin(0.5, marker)  # the looks are at the start and the end only
    used = machine.by_role()
    assert "spinner" not in used and used[UNSEEN] >= 0.4, used
