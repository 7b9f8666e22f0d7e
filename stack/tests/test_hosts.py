"""Test hosts in network namespaces: they reach each other over real links, the
nemesis drops real packets, and nothing outlives the run, even one killed with
SIGKILL. Needs root, as `make test` runs."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from stack.hosts import Net

pytestmark = pytest.mark.server  # it starts servers of its own

REDIS_PORT = 7391


def _redis(host):
    """A Redis on ``host``'s own address (protected mode off: the bridge reaches
    nothing beyond this machine's namespaces)."""
    process = host.start(["redis-server", "--bind", host.address, "--port", str(REDIS_PORT), "--save", "",
                          "--appendonly", "no", "--protected-mode", "no"], stdout=subprocess.DEVNULL)
    for _ in range(100):
        if _ping(host, host.address):
            return process
        time.sleep(0.05)
    raise AssertionError("redis did not start on its host")


def _ping(host, address, timeout=2) -> bool:
    command = ["timeout", str(timeout), "redis-cli", "-h", address, "-p", str(REDIS_PORT), "ping"]
    done = subprocess.run(host.enter(command), capture_output=True, text=True)
    return done.stdout.strip() == "PONG"


def _local_ping(address, timeout=2) -> bool:
    command = ["timeout", str(timeout), "redis-cli", "-h", address, "-p", str(REDIS_PORT), "ping"]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.stdout.strip() == "PONG"


@pytest.fixture
def net():
    with Net() as net:
        yield net


def test_hosts_reach_each_other_and_a_partition_cuts_them_apart(net):
    db, app, other = net.host("db"), net.host("app"), net.host("other")
    _redis(db)
    assert _ping(app, db.address) and _local_ping(db.address)

    app.partition(db)  # both ways, on app's side of the link
    assert not _ping(app, db.address, timeout=1)
    assert _ping(other, db.address) and _local_ping(db.address)  # only that link is cut
    app.heal()
    assert _ping(app, db.address)

    # One way is enough to stop TCP: db's answers never reach app.
    app.partition(db, way="in")
    assert not _ping(app, db.address, timeout=1)
    app.heal()
    assert _ping(app, db.address)


def test_packet_loss_drops_a_random_share_of_the_packets(net):
    sink, source = net.host("sink"), net.host("source")
    counter = sink.start([sys.executable, "-c", textwrap.dedent(f"""
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("{sink.address}", 9999)); s.settimeout(2)
        n = 0
        try:
            while True:
                s.recv(64); n += 1
        except socket.timeout:
            print(n)
        """)], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    source.lose(sink, 50)
    source.call([sys.executable, "-c", textwrap.dedent(f"""
        import socket, time
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for i in range(400):
            try:
                s.sendto(b"x", ("{sink.address}", 9999))
            except PermissionError:  # dropped on the way out: nftables says so to the sender
                pass
            time.sleep(0.001)
        """)])
    received = int(counter.communicate(timeout=15)[0])
    assert 100 < received < 300, received  # 200 expected; 10 standard deviations either side


def test_a_killed_run_leaves_no_namespace_link_or_process_behind(tmp_path):
    run = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import subprocess, sys
        from stack.hosts import Net
        net = Net(); net.open()
        a, b = net.host("a"), net.host("b")
        sleeper = a.start(["sleep", "600"])
        a.partition(b)
        print(net.local_link, a.pid, b.pid, net.switch.pid, sleeper.pid, flush=True)
        sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    link, *pids = run.stdout.readline().split()
    assert os.path.exists(f"/sys/class/net/{link}")
    namespaces = {os.stat(f"/proc/{pid}/ns/net").st_ino for pid in pids}
    killed_at = time.time()
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (os.path.exists(f"/sys/class/net/{link}")
                                           or any(os.path.exists(f"/proc/{pid}") for pid in pids)):
        time.sleep(0.05)
    outlived = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
    assert not outlived, "a holder or host process outlived its run"
    assert not os.path.exists(f"/sys/class/net/{link}"), "this machine's end of the bridge outlived the run"
    # Held by a process that lived before the kill: the kernel gives a freed
    # namespace's number to the next one made, and the suite's other tests make
    # namespaces meanwhile, so a process started since may hold the same number.
    held = set()
    for process in psutil.process_iter():
        try:
            number = os.stat(f"/proc/{process.pid}/ns/net").st_ino
            if number in namespaces and process.create_time() <= killed_at:
                held.add(number)
        except (FileNotFoundError, PermissionError, NotADirectoryError, psutil.Error):
            pass
    assert not held, "a namespace of the run is still held by a process"
    assert not subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.strip()


def test_closing_the_net_removes_everything(tmp_path):
    with Net() as net:
        host = net.host("a")
        process = host.start(["sleep", "600"])
        link, pids = net.local_link, [host.pid, process.pid]
    assert not os.path.exists(f"/sys/class/net/{link}")
    assert not [pid for pid in pids if os.path.exists(f"/proc/{pid}")]


def test_two_nets_at_once_get_names_and_subnets_of_their_own():
    with Net() as one, Net() as two:
        assert one.local_link != two.local_link and one.prefix != two.prefix
        a, b = one.host("a"), two.host("b")
        _redis(a)
        assert _local_ping(a.address) and not _ping(b, a.address, timeout=1)  # no bridge between the nets
