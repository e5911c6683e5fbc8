"""The writer's lock of a run folder: at most one process appends to a run at a time.

The lock is a small JSON file inside the run folder, created with ``O_CREAT | O_EXCL`` (atomic), holding the
writer's host, PID and process start time. The start time tells a live writer from a PID the system has
since given to another process. A lock whose process is gone on this host is *stale*: a new writer may take
it over, and ``daskgp repair`` clears it; a lock from another host cannot be checked from here and is only
cleared on request (``daskgp repair --force``).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from dataclasses import dataclass

import psutil

__all__ = ["LOCK_NAME", "LockInfo", "RunLocked", "acquire", "release", "lock_info", "clear_for_repair",
           "process_alive"]

LOCK_NAME = "daskgp-writer.lock"


class RunLocked(ValueError):
    """Another writer holds the run (or may: a lock from another host, or an unreadable one)."""


@dataclass(frozen=True)
class LockInfo:
    """A run's lock: ``state`` is 'live' (its writer runs on this host), 'stale' (its process is gone),
    'foreign' (another host: cannot be checked) or 'unreadable' (the file is damaged)."""

    path: str
    state: str
    host: str = "?"
    pid: int = -1
    started: str = "?"

    def describe(self) -> str:
        if self.state == "unreadable":
            return f"its lock file {self.path} is unreadable"
        who = f"PID {self.pid} on {self.host} (since {self.started})"
        return {"live": f"it is being written by {who}",
                "stale": f"its writer {who} is no longer running",
                "foreign": f"it is locked by {who}, which cannot be checked from this host"}[self.state]


def _process_start(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, ValueError):
        return None


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (any user's)."""
    return _process_start(pid) is not None


def lock_info(run_dir) -> LockInfo | None:
    """The lock of ``run_dir``, or None when nobody holds it. Reads only."""
    path = os.path.join(os.fspath(run_dir), LOCK_NAME)
    try:
        with open(path, "rb") as f:
            raw = f.read(4096)
    except FileNotFoundError:
        return None
    except OSError:
        return LockInfo(path, "unreadable")
    try:
        doc = json.loads(raw.decode("utf-8"))
        host, pid, t0 = str(doc["host"]), int(doc["pid"]), float(doc["process_start"])
        started = str(doc.get("started", "?"))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError):
        return LockInfo(path, "unreadable")
    if host != socket.gethostname():
        return LockInfo(path, "foreign", host, pid, started)
    start = _process_start(pid)
    alive = start is not None and abs(start - t0) < 1.0
    return LockInfo(path, "live" if alive else "stale", host, pid, started)


def _write_new(path: str) -> bool:
    """Create the lock file for this process; False if one exists."""
    doc = {"host": socket.gethostname(), "pid": os.getpid(), "process_start": _process_start(os.getpid()),
           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
    return True


def acquire(run_dir, take_over_stale: bool = True) -> LockInfo | None:
    """Lock ``run_dir`` for this process. Returns the stale lock that was taken over (for the caller to
    report), else None. Raises :class:`RunLocked` when a live, foreign or unreadable lock holds it."""
    run_dir = os.fspath(run_dir)
    path = os.path.join(run_dir, LOCK_NAME)
    if _write_new(path):
        return None
    info = lock_info(run_dir)
    if info is None:  # released in between
        if _write_new(path):
            return None
        info = lock_info(run_dir)
    if info is not None and info.state == "stale" and take_over_stale:
        # move the stale lock aside first: of two processes taking it over at once, one rename wins
        aside = f"{path}.stale-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            aside = None
        if aside is not None:
            os.remove(aside)
            if _write_new(path):
                return info
        info = lock_info(run_dir)
    hint = ("wait for it to finish or stop it" if info is not None and info.state == "live" else
            f"if no process writes it any more, clear the lock with 'daskgp repair {run_dir} --force'")
    raise RunLocked(f"{run_dir} cannot be written: "
                    f"{info.describe() if info else 'another process holds it'}; {hint}")


def release(run_dir) -> None:
    """Remove this process's lock of ``run_dir`` (a lock held by another process is left alone)."""
    info = lock_info(run_dir)
    if info is not None and info.state == "live" and info.pid == os.getpid():
        try:
            os.remove(info.path)
        except FileNotFoundError:
            pass


def clear_for_repair(run_dir, force: bool = False) -> list[str]:
    """Before a repair of ``run_dir`` (a run or a fit checkpoint): refuse while a live writer holds it
    (:class:`RunLocked`); remove a stale lock, and one from another host or an unreadable one only with
    ``force``. Returns what was done (one line, or none)."""
    info = lock_info(run_dir)
    if info is None:
        return []
    if info.state == "live":
        raise RunLocked(f"{os.fspath(run_dir)} cannot be repaired now: {info.describe()}")
    if info.state != "stale" and not force:
        raise RunLocked(f"{os.fspath(run_dir)} cannot be repaired: {info.describe()}; add --force if no "
                        "process writes it any more")
    os.remove(info.path)
    return [f"cleared the lock: {info.describe()}"]
