"""Test hosts on this machine: Linux network namespaces joined by a bridge, each
with an address of its own, and a nemesis that breaks the links between them for
real (the kernel drops the packets), so that a sale meets partitions and packet
loss, not only signals to processes on one loopback.

The shape, for a ``Net`` with hosts ``app1`` and ``redis``::

    this machine's namespace ── fsr<id> ──┐
                                          ├─ br0 in the switch's namespace ── app1: eth0 10.x.y.2
                                          └────────────────────────────────── redis: eth0 10.x.y.3

Every namespace is held by a process of ours and by nothing else: no name under
/run/netns, no link or rule left in this machine's own namespace. Each holder is
bound to its creator's life (PR_SET_PDEATHSIG), and so is every process started on
a host; when they go, the kernel removes the namespace with its links and rules.
A run that is killed (SIGKILL included) therefore leaves nothing behind.

What this kernel offers decides the nemesis: packets dropped by nftables in the
host's own namespace (both ways or one way, all or a random share), and a slow
link by ``tbf``. It has no ``netem`` (CONFIG_NET_SCH_NETEM), so there is no added
delay or jitter per packet; ``Host.can_delay()`` says whether this machine has it.

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2, util-linux's unshare and
nsenter, and nftables.
"""

from __future__ import annotations

import ctypes
import fcntl
import itertools
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


class HostsError(RuntimeError):
    """A host or link could not be made (not root, a tool missing, the kernel said no)."""


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the thread that started it ends. It
    survives exec; it also applies to a child of ours that unshare or nsenter
    becomes, since both exec in place."""
    if _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(127)


def _run(argv: Sequence[str], *, stdin: str | None = None) -> str:
    done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        raise HostsError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _holder() -> subprocess.Popen:
    """A process alone in a new network namespace, living as long as we do."""
    holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"], preexec_fn=_die_with_parent,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # unshare has made the namespace once /proc shows the process in another one.
    ours = os.stat("/proc/self/ns/net").st_ino
    for _ in range(500):
        if holder.poll() is not None:
            raise HostsError(f"unshare --net: {holder.stderr.read().decode().strip() or holder.returncode}")
        try:
            if os.stat(f"/proc/{holder.pid}/ns/net").st_ino != ours:
                return holder
        except FileNotFoundError:
            pass
        threading.Event().wait(0.01)
    holder.kill()
    raise HostsError("unshare --net: no namespace after 5 s")


@dataclass
class Host:
    name: str
    address: str
    net: Net
    holder: subprocess.Popen
    processes: list[subprocess.Popen] = field(default_factory=list)
    struck: bool = False  # a rule or a shaping of the nemesis's on this host, maybe

    @property
    def pid(self) -> int:
        return self.holder.pid

    def enter(self, argv: Sequence[str]) -> list[str]:
        return ["nsenter", f"--net=/proc/{self.pid}/ns/net", "--", *argv]

    def call(self, argv: Sequence[str], *, stdin: str | None = None) -> str:
        """Run a short command on this host and return what it printed."""
        return _run(self.enter(argv), stdin=stdin)

    def start(self, argv: Sequence[str], **popen) -> subprocess.Popen:
        """Start a process on this host; it dies with us, and ``Net.close`` stops it."""
        process = subprocess.Popen(self.enter(argv), preexec_fn=_die_with_parent, **popen)
        self.processes.append(process)
        return process

    # -- the nemesis, acting on this host's side of its links ------------------------

    def partition(self, *others: Host | str, way: str = "both") -> None:
        """Drop every packet between this host and ``others`` (their addresses):
        ``way`` "both", "out" (this host cannot reach them; they still reach it) or
        "in" (the reverse). A TCP connection needs both ways, so one way is enough to
        stop it; which side notices first differs."""
        if way not in ("both", "out", "in"):
            raise ValueError("way is both, out or in")
        rules = []
        for other in others:
            address = other.address if isinstance(other, Host) else other
            if way in ("both", "out"):
                rules.append(("output", f"ip daddr {address} drop"))
            if way in ("both", "in"):
                rules.append(("input", f"ip saddr {address} drop"))
        self._rules(rules)

    def lose(self, other: Host | str, percent: int) -> None:
        """Drop a random ``percent`` of the packets each way between this host and ``other``."""
        if not 0 < percent <= 100:
            raise ValueError("percent is 1..100")
        address = other.address if isinstance(other, Host) else other
        self._rules([("output", f"ip daddr {address} numgen random mod 100 < {percent} drop"),
                     ("input", f"ip saddr {address} numgen random mod 100 < {percent} drop")])

    def slow(self, kbit: int) -> None:
        """Shape what this host sends to ``kbit`` kbit/s (tbf): a link that queues, then drops."""
        self.struck = True
        self.call(["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", f"{kbit}kbit",
                   "burst", "16kb", "latency", "500ms"])

    def heal(self) -> None:
        """Every rule and shaping gone: the links as they were made. Nothing to do,
        and no command run, on a host the nemesis never touched: a heal of many
        hosts lands on the struck ones within milliseconds."""
        if not self.struck:
            return
        if self._has_rules():
            self.call(["nft", "delete", "table", "inet", "nemesis"])
        if "tbf" in self.call(["tc", "qdisc", "show", "dev", "eth0"]):
            self.call(["tc", "qdisc", "del", "dev", "eth0", "root"])
        self.struck = False

    def can_delay(self) -> bool:
        """Whether this kernel has netem (a delay per packet, with jitter)."""
        try:
            self.call(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"])
        except HostsError:
            return False
        self.call(["tc", "qdisc", "del", "dev", "lo", "root"])
        return True

    def _has_rules(self) -> bool:
        return "nemesis" in self.call(["nft", "list", "tables"])

    def _rules(self, rules: list[tuple[str, str]]) -> None:
        """Add ``(hook, rule)``s in one nft transaction: all at once, in one call (a
        fault that must strike within milliseconds cannot wait for several)."""
        self.struck = True
        self.call(["nft", "-f", "-"], stdin=(
            "table inet nemesis {\n"  # made if missing, left as it is otherwise
            "  chain input { type filter hook input priority 0; }\n"
            "  chain output { type filter hook output priority 0; }\n"
            "}\n" + "".join(f"add rule inet nemesis {hook} {rule}\n" for hook, rule in rules)))


# Held while a Net picks its /24 and takes its address in this machine's namespace:
# two processes picking at once (the suite's lanes) would otherwise pick the same one,
# and this namespace would route it to one of their bridges only.
SUBNET_LOCK = Path("/tmp/flashsale-test-hosts.lock")


@contextmanager
def _subnets_picked_alone() -> Iterator[None]:
    with open(SUBNET_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _free_subnet(*, start: int) -> str:
    """A /24 of 10.200.0.0/14 that no address of this machine's namespace is in,
    looked for from ``start`` on; under ``_subnets_picked_alone``, with the address
    taken before it is let go."""
    taken = set()
    for line in _run(["ip", "-o", "-4", "addr", "show"]).splitlines():
        address = line.split()[3]
        taken.add(address.rsplit(".", 1)[0])
    for i in range(1000):
        n = (start + i) % 1000
        prefix = f"10.{200 + n // 250}.{n % 250}"
        if prefix not in taken:
            return prefix
    raise HostsError("no free /24 left in 10.200.0.0/14")


class Net:
    """Hosts on one bridge, and this machine's namespace on it too (``local``), so
    that processes here reach every host. Use as a context manager, from a thread
    that outlives it (the processes die with the thread that started them)."""

    _made = itertools.count()  # Nets made by this process: each gets names of its own

    def __init__(self, subnet: str | None = None):
        number = next(self._made)
        self.tag = f"{os.getpid():x}{number:x}"[-12:]
        self.subnet, self.start = subnet, os.getpid() + number
        self.prefix = self.local = ""  # once open
        self.local_link = f"fsr{self.tag}"
        self.hosts: dict[str, Host] = {}
        self.switch: subprocess.Popen | None = None

    def __enter__(self) -> Net:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _switch(self, argv: Sequence[str]) -> str:
        return _run(["nsenter", f"--net=/proc/{self.switch.pid}/ns/net", "--", *argv])

    def open(self) -> None:
        self.switch = _holder()
        try:
            self._switch(["ip", "link", "add", "br0", "type", "bridge"])
            self._switch(["ip", "link", "set", "br0", "up"])
            # This machine's end is made from inside the switch's namespace, so it is
            # never left here alone: it goes when its peer's namespace goes.
            self._switch(["ip", "link", "add", "local0", "type", "veth", "peer", "name", self.local_link,
                          "netns", str(os.getpid())])
            self._switch(["ip", "link", "set", "local0", "master", "br0", "up"])
            with _subnets_picked_alone():
                self.prefix = self.subnet or _free_subnet(start=self.start)
                self.local = f"{self.prefix}.1"
                _run(["ip", "addr", "add", f"{self.local}/24", "dev", self.local_link])
            _run(["ip", "link", "set", self.local_link, "up"])
        except BaseException:
            self.close()
            raise

    def host(self, name: str) -> Host:
        """A new host on the bridge, with the next address."""
        if name in self.hosts:
            raise HostsError(f"{name}: already a host")
        number = len(self.hosts) + 2
        holder = _holder()
        host = Host(name, f"{self.prefix}.{number}", self, holder)
        self.hosts[name] = host
        port = f"h{number}"
        self._switch(["ip", "link", "add", port, "type", "veth", "peer", "name", "eth0",
                      "netns", str(holder.pid)])
        self._switch(["ip", "link", "set", port, "master", "br0", "up"])
        host.call(["ip", "addr", "add", f"{host.address}/24", "dev", "eth0"])
        host.call(["ip", "link", "set", "eth0", "up"])
        host.call(["ip", "link", "set", "lo", "up"])
        return host

    def close(self) -> None:
        """Stop what runs on the hosts, then the holders: the kernel removes the rest."""
        for host in self.hosts.values():
            for process in host.processes:
                if process.poll() is None:
                    process.kill()
                process.wait()
        for holder in [h.holder for h in self.hosts.values()] + ([self.switch] if self.switch else []):
            if holder.poll() is None:
                holder.kill()
            holder.wait()
        self.hosts.clear()
        self.switch = None
        # The kernel takes a namespace's links down a moment after its last process:
        # wait for this machine's end, so that the next Net may use the name again.
        for _ in range(500):
            if not os.path.exists(f"/sys/class/net/{self.local_link}"):
                return
            threading.Event().wait(0.01)
        raise HostsError(f"{self.local_link} still here 5 s after its namespace's holder died")
