"""Hosts as Linux network namespaces on one machine: the multi-host topology of issue 34.

Each host is a network namespace with one interface, ``eth0``, whose peer sits in a switch namespace on a
bridge; every address is private (``10.213.7.0/24``) and lives only inside namespaces this module creates, so
nothing outside this machine (nor its own root namespace) is addressed. The file system is shared, as the
shared storage of a real cluster is. A process started with :meth:`Hosts.popen` runs inside its host's
namespace (``ip netns exec``), so a ``dask scheduler`` on one host, ``dask worker`` processes on others and
the client on a fourth talk over the bridge only, and every fault is a real one:

- :meth:`Hosts.kill_host` SIGKILLs every process in a namespace (a host lost: worker, nanny and all);
- :meth:`Hosts.link` takes a host's link down and up (a partition);
- :meth:`Hosts.slow` puts a token-bucket filter (``tc qdisc … tbf``) on both directions of a host's link
  (``netem`` is not available on these machines);
- ``start_worker(..., cpu=f)`` starts a host's worker in a CPU cgroup of its own capped at ``f`` of one core
  (the CFS quota: cgroup v1's ``cpu.cfs_quota_us`` or v2's ``cpu.max``), a slow machine: every process the
  worker starts (its nanny's child included) inherits the cap.

Creating namespaces needs root (CI runs as root). :func:`check_namespaces` raises with the reason when they
cannot be made; the tests do not skip.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time

SUBNET = "10.213.7"
PORT = 8786


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def check_namespaces() -> None:
    """Raise RuntimeError saying why network namespaces cannot be made here (not root, no ``ip``)."""
    if os.geteuid() != 0:
        raise RuntimeError("the multi-host tests make network namespaces, which needs root (CI runs as root)")
    name = f"dgcheck{os.getpid()}"
    try:
        r = _ip("netns", "add", name, check=False)
    except FileNotFoundError as e:
        raise RuntimeError("the multi-host tests need iproute2's 'ip' (Debian package iproute2)") from e
    if r.returncode:
        raise RuntimeError(f"cannot make a network namespace: {r.stderr.strip()}")
    _ip("netns", "del", name, check=False)


_INSTANCES = itertools.count()


def _remove_stale() -> None:
    """Namespaces left by a test process that died before its teardown (their prefix carries its pid)."""
    r = _ip("netns", "list", check=False)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith("dgt") and "-" in name:
            pid = name[3:name.index("-")]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                _kill_all(name)
                _ip("netns", "del", name, check=False)
    for base in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup"):  # their CPU caps (Hosts.cpu_cap), now empty
        for name in os.listdir(base) if os.path.isdir(base) else ():
            pid = name[3:name.index("-")] if name.startswith("dgt") and "-" in name else ""
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                try:
                    os.rmdir(f"{base}/{name}")
                except OSError:
                    pass


def _kill_all(ns: str) -> list[int]:
    r = _ip("netns", "pids", ns, check=False)
    pids = [int(p) for p in r.stdout.split()]
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


class Hosts:
    """``names`` hosts on one bridge; host i has address ``10.213.7.(i+1)``."""

    def __init__(self, names: list[str]):
        check_namespaces()
        _remove_stale()
        # the pid (so _remove_stale knows a dead process's leftovers) and a count: a test may make its own
        # Hosts while a module fixture's are up in the same process
        self.prefix = f"dgt{os.getpid()}-{next(_INSTANCES)}"
        self.switch = f"{self.prefix}-sw"
        self.names = list(names)
        self.addr = {h: f"{SUBNET}.{i + 1}" for i, h in enumerate(self.names)}
        self.procs: dict[str, list[subprocess.Popen]] = {h: [] for h in self.names}
        self.cgroups: list[str] = []
        made = []
        try:
            _ip("netns", "add", self.switch)
            made.append(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for h in self.names:
                ns = self.ns(h)
                _ip("netns", "add", ns)
                made.append(ns)
                # the veth pair is made inside the switch namespace and one end moved into the host's: the
                # root namespace never holds either end
                _ip("-n", self.switch, "link", "add", self.port(h), "type", "veth", "peer", "name", "eth0",
                    "netns", ns)
                _ip("-n", self.switch, "link", "set", self.port(h), "master", "br0")
                _ip("-n", self.switch, "link", "set", self.port(h), "up")
                _ip("-n", ns, "addr", "add", f"{self.addr[h]}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            for ns in made:
                _ip("netns", "del", ns, check=False)
            raise

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def port(self, host: str) -> str:
        return f"v{self.names.index(host)}"

    @property
    def scheduler_address(self) -> str:
        return f"tcp://{self.addr[self.names[0]]}:{PORT}"

    def popen(self, host: str, args: list[str], env: dict | None = None, cgroup: str | None = None,
              **kw) -> subprocess.Popen:
        """Start ``args`` inside ``host``'s namespace; the process is SIGKILLed with its host. ``cgroup``: a
        ``cgroup.procs`` file the process joins first — outside the namespace, whose ``ip netns exec`` mounts
        a /sys of its own without the host's cgroup folders — so it and everything it starts run in it."""
        cmd = ["ip", "netns", "exec", self.ns(host), *args]
        if cgroup is not None:
            cmd = ["sh", "-c", f'echo $$ > {cgroup} && exec "$@"', "sh", *cmd]
        p = subprocess.Popen(cmd, env=env, **kw)
        self.procs[host].append(p)
        return p

    def run(self, host: str, args: list[str], env: dict | None = None, timeout: float = 600,
            **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.ns(host), *args], env=env, timeout=timeout,
                              capture_output=True, text=True, **kw)

    def python(self, host: str, args: list[str], env: dict | None = None, timeout: float = 600):
        """``python args`` on ``host`` (this interpreter), waited for; returns the CompletedProcess."""
        return self.run(host, [sys.executable, *args], env=env, timeout=timeout)

    def start_scheduler(self, env: dict) -> None:
        h = self.names[0]
        self.popen(h, [sys.executable, "-m", "dask", "scheduler", "--host", self.addr[h], "--port", str(PORT),
                       "--no-dashboard"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start_worker(self, host: str, env: dict, nworkers: int = 1, memory: str = "3GiB",
                     cpu: float | None = None) -> None:
        """``nworkers`` single-threaded workers on ``host``; ``cpu``: the host's CPU capped at that fraction
        of one core (a cgroup of its own, which the worker's processes join before they start)."""
        args = [sys.executable, "-m", "dask", "worker", self.scheduler_address, "--host", self.addr[host],
                "--nworkers", str(nworkers), "--nthreads", "1", "--memory-limit", memory, "--no-dashboard",
                "--name", host]
        self.popen(host, args, env=env, cgroup=None if cpu is None else self.cpu_cap(host, cpu),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cpu_cap(self, host: str, fraction: float) -> str:
        """Make ``host``'s CPU cgroup, capped at ``fraction`` of one core (quota per 100 ms period); returns
        its ``cgroup.procs`` file (a process written there, and its children, run under the cap)."""
        if not 0 < fraction:
            raise ValueError(f"a CPU cap must be > 0, got {fraction}")
        quota = max(1000, int(round(fraction * 100_000)))
        v1 = "/sys/fs/cgroup/cpu"
        if os.path.isfile(f"{v1}/cpu.cfs_quota_us"):
            path = f"{v1}/{self.ns(host)}"
            os.makedirs(path, exist_ok=True)
            with open(f"{path}/cpu.cfs_period_us", "w") as f:
                f.write("100000")
            with open(f"{path}/cpu.cfs_quota_us", "w") as f:
                f.write(str(quota))
        else:  # cgroup v2: the cpu controller enabled for the root's children, then cpu.max
            root = "/sys/fs/cgroup"
            if not os.path.isfile(f"{root}/cgroup.controllers"):
                raise RuntimeError("no cgroup CPU controller here (neither /sys/fs/cgroup/cpu nor cgroup v2)")
            with open(f"{root}/cgroup.subtree_control", "w") as f:
                f.write("+cpu")
            path = f"{root}/{self.ns(host)}"
            os.makedirs(path, exist_ok=True)
            with open(f"{path}/cpu.max", "w") as f:
                f.write(f"{quota} 100000")
        self.cgroups.append(path)
        return f"{path}/cgroup.procs"

    def kill_host(self, host: str) -> list[int]:
        """SIGKILL every process in ``host``'s namespace (no clean-up, as a host losing power); returns the
        pids killed."""
        pids = _kill_all(self.ns(host))
        for p in self.procs[host]:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs[host] = []
        return pids

    def link(self, host: str, up: bool) -> None:
        """Take ``host``'s link down (a partition: packets stop, nothing is reset) or up again."""
        _ip("-n", self.switch, "link", "set", self.port(host), "up" if up else "down")

    def slow(self, host: str, rate: str | None) -> None:
        """Rate-limit both directions of ``host``'s link to ``rate`` (tc's units, e.g. '2mbit') with a token
        bucket; None removes it."""
        for ns, dev in ((self.ns(host), "eth0"), (self.switch, self.port(host))):
            if rate is None:
                subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], capture_output=True)
            else:
                subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                                "burst", "16kb", "latency", "2s"], check=True, capture_output=True, text=True)

    def close(self) -> None:
        for h in self.names:
            self.kill_host(h)
        for h in self.names:
            _ip("netns", "del", self.ns(h), check=False)
        _ip("netns", "del", self.switch, check=False)
        for path in self.cgroups:  # empty once its processes are gone (a kernel moment after the kill)
            for _ in range(50):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        self.cgroups = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def wait_for_workers(hosts: Hosts, client_host: str, n: int, env: dict, timeout: float = 120) -> None:
    """Block until the scheduler lists ``n`` workers, asked from ``client_host`` over the bridge."""
    code = ("import sys; from distributed import Client\n"
            f"c = Client({hosts.scheduler_address!r}, timeout=60)\n"
            f"c.wait_for_workers({n}, timeout={timeout})\n"
            "c.close()\n")
    t0 = time.time()
    r = hosts.python(client_host, ["-c", code], env=env, timeout=timeout + 90)
    if r.returncode:
        raise RuntimeError(f"{n} workers did not join in {time.time() - t0:.0f} s: {r.stderr[-2000:]}")
