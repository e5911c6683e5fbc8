"""A run's progress as the user sees it between committed blocks: the chains' segments report their
iterations as worker events (:func:`daskgp.mcmc.ticker.progress_topic`), and :class:`LiveProgress` turns
them, with each committed block's :class:`daskgp.mcmc.diagnostics.RunStatus`, into calls of the user's
``progress(status)``; :func:`tell` hands a warmup's events to its ``on_warmup``. Both run on the client's
event loop, where a failing display must not touch the run."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

from .control import RunControl
from .diagnostics import RunStatus

__all__ = ["LiveProgress", "tell"]

log = logging.getLogger(__name__)


def tell(callback, msg) -> None:
    """A progress event to a user's callback, on the client's event loop: a failing display must not touch
    the run."""
    try:
        callback(msg)
    except Exception:
        log.debug("daskgp: the warmup progress callback failed", exc_info=True)


class LiveProgress:
    """Calls ``progress`` after every committed block and, between blocks, whenever the chains' segments
    report more iterations: then with the last committed :class:`RunStatus` whose ``running`` is the least
    iteration count over the chains. The events arrive on the client's event loop; a lock keeps the two
    callers' lines whole.

    ``done0`` draws per chain and ``elapsed0`` seconds were committed before this drive began at
    ``t_start`` (``time.perf_counter()``); the time ``control`` spent paused since then (beyond
    ``paused0``) is not counted."""

    def __init__(self, progress, n_chains: int, n_iter: int, done0: int, elapsed0: float, t_start: float,
                 control: RunControl, paused0: float, warmup_draws: int = 0):
        self.progress, self.n_iter = progress, n_iter
        self.latest = [done0] * n_chains
        self.status = RunStatus(done=done0, n_iter=n_iter, elapsed=elapsed0,
                                warmup_draws=min(int(warmup_draws), n_iter))
        self.clock = (elapsed0, t_start, control, paused0)
        self.shown = done0
        self.lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds of the run so far: the earlier drives' and this one's, pauses left out."""
        elapsed0, t_start, control, paused0 = self.clock
        return elapsed0 + time.perf_counter() - t_start - (control.paused_seconds - paused0)

    def committed(self, status: RunStatus) -> None:
        """A block was committed: ``status`` as of it, with the chains' running iteration beside it."""
        with self.lock:
            self.status = status
            running = max(min(self.latest), status.done)
            self.shown = max(self.shown, running)
            self.progress(replace(status, running=running) if running > status.done else status)

    def on_event(self, event) -> None:
        """A segment's worker event (topic, {'chain', 't'}): a line when every chain has moved on."""
        _, msg = event
        with self.lock:
            c, t = int(msg["chain"]), int(msg["t"])
            if 0 <= c < len(self.latest):
                self.latest[c] = max(self.latest[c], t)
            running = min(self.latest)
            if running <= self.shown:
                return
            self.shown = running
            try:
                self.progress(replace(self.status, running=running, elapsed=self.elapsed()))
            except Exception:  # on the client's event loop: a failing display must not touch the run
                log.debug("daskgp: the progress callback failed between blocks", exc_info=True)
