"""Pause, resume and stop a running chain driver from another thread (the dashboard's buttons, the CLI's
Ctrl-C). The driver asks :meth:`RunControl.check` before each submission and registers the segments in flight
(:meth:`RunControl.track`), so stopping cancels them on the cluster at once."""

from __future__ import annotations

import threading
import time

__all__ = ["RunControl", "RunStopped"]


class RunStopped(Exception):
    """Raised by :func:`sample` / :func:`resume` when their :class:`RunControl` was stopped; the draws
    committed so far stay in the store and the run can be resumed."""


class RunControl:
    """Pause, resume or stop a running :func:`sample` / :func:`resume` from another thread (a dashboard).

    Pausing stops submitting chain segments (those in flight finish and are written); stopping cancels the
    segments in flight at once and makes the run raise :class:`RunStopped`. ``paused_seconds`` is kept out
    of the run's wall time."""

    def __init__(self):
        self._running = threading.Event()
        self._running.set()
        self._lock = threading.Lock()
        self._stopped = False
        self._futures: set = set()
        self._client = None
        self._paused_at: float | None = None
        self.paused_seconds = 0.0

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        with self._lock:
            if self._running.is_set() and not self._stopped:
                self._paused_at = time.perf_counter()
                self._running.clear()

    def resume(self) -> None:
        with self._lock:
            if not self._running.is_set():
                self.paused_seconds += time.perf_counter() - (self._paused_at or time.perf_counter())
                self._paused_at = None
                self._running.set()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            futures, client = list(self._futures), self._client
        self._running.set()  # wake a paused driver so that it can exit
        if client is not None and futures:
            client.cancel(futures)

    def check(self) -> None:
        """Called by the driver before each submission: blocks while paused, raises :class:`RunStopped` once
        stopped."""
        self._running.wait()
        if self._stopped:
            raise RunStopped("the run was stopped; its committed draws are kept")

    def track(self, client, future) -> None:
        """A segment in flight on ``client``'s cluster: :meth:`stop` cancels it."""
        with self._lock:
            self._client = client
            self._futures.add(future)

    def untrack(self, future) -> None:
        """A segment that returned (or failed): no longer cancelled by :meth:`stop`."""
        with self._lock:
            self._futures.discard(future)

