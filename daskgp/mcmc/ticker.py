"""What a running chain segment and the warmup report while they compute (issue 55, item 2: a phase never
goes 30 s without a line): Dask worker events on the run's topic — a chain's iteration count at most every
:data:`PROGRESS_EVERY` seconds (:class:`ChainTicker`), the warmup's stage and gradient count, with heartbeats
every :data:`HEARTBEAT_EVERY` seconds during one long solve (:class:`WarmupTicker`). The driver and the
warmup's route read them into the progress lines. Silent outside a worker."""

from __future__ import annotations

import time

__all__ = ["progress_topic", "ChainTicker", "WarmupTicker", "WARMUP_STAGES", "PROGRESS_EVERY",
           "HEARTBEAT_EVERY"]

PROGRESS_EVERY = 1.0  # seconds between a running segment's progress events
# seconds between heartbeats during one long solve: a gradient on 22,784 rows takes 30 s and more, and the
# progress line must move at least every 30 s (a solve that ran 5 minutes once printed nothing)
HEARTBEAT_EVERY = 10.0


def progress_topic(run_key: str) -> str:
    """The Dask event topic on which a run's segments report their progress (:class:`ChainTicker`)."""
    return f"daskgp-progress-{run_key}"


class ChainTicker:
    """Reports a chain's iteration count, at most every :data:`PROGRESS_EVERY` seconds, as a Dask worker
    event ``{"chain": c, "t": iterations done}`` on :func:`progress_topic`; the driver subscribes to it, so
    the progress line moves between committed blocks. Silent outside a worker or without a chain index."""

    def __init__(self, run_key: str, chain: int | None, t: int, end: int):
        self.worker = None
        if chain is not None:
            try:
                from distributed import get_worker

                self.worker = get_worker()
            except ValueError:  # not in a worker: nobody to tell
                pass
        self.topic, self.chain, self.t, self.end = progress_topic(run_key), chain, t, end
        self.next = time.monotonic() + PROGRESS_EVERY

    def __call__(self, t: int | None = None) -> None:
        """Iteration ``t`` (0-based, absolute) begins; None: the next one."""
        self.t = min(self.end, self.t + 1 if t is None else t)
        if self.worker is not None and time.monotonic() >= self.next:
            self.worker.log_event(self.topic, {"chain": self.chain, "t": int(self.t)})
            self.next = time.monotonic() + PROGRESS_EVERY


# The warmup's stages in order, as its progress events name them (``{"stage": name, "k": gradients done in
# the stage, "k0": of which before this segment, "cap": its most, "seconds": in this segment so far,
# "total": since the warmup began}``: the stage's rate is seconds / (k − k0)).
WARMUP_STAGES = ("ascent", "curvature", "ascent in the curvature's metric", "final curvature")


class WarmupTicker:
    """Reports the warmup's progress as worker events on :func:`progress_topic` (see
    :data:`WARMUP_STAGES`): at the start of every stage at once, then at most every
    :data:`PROGRESS_EVERY` seconds. Silent outside a worker."""

    def __init__(self, run_key: str, total: float = 0.0):
        self.worker = None
        try:
            from distributed import get_worker

            self.worker = get_worker()
        except ValueError:  # not in a worker: nobody to tell
            pass
        # a resumed warmup counts its total from its committed seconds
        self.topic, self.t0 = progress_topic(run_key), time.monotonic() - total
        self.stage_name, self.cap, self.k, self.k0, self.t_stage, self.next = "", 0, 0, 0, self.t0, 0.0
        self.next_beat = time.monotonic() + HEARTBEAT_EVERY

    def stage(self, name: str, cap: int, k: int = 0) -> None:
        """Stage ``name`` of at most ``cap`` gradients begins (or resumes, ``k`` of them done)."""
        self.stage_name, self.cap, self.k, self.t_stage = name, int(cap), int(k), time.monotonic()
        self.k0 = self.k
        self._emit()

    def __call__(self, k: int) -> None:
        self.k = k + 1
        self.next_beat = time.monotonic() + HEARTBEAT_EVERY  # the next gradient's beats count from here
        if time.monotonic() >= self.next or self.k == self.cap:
            self._emit()

    def beat(self, iterations: int) -> None:
        """During a solve (``GPPosterior.on_solve``): at most every :data:`HEARTBEAT_EVERY` seconds, an
        event whose 'cg' is the current gradient's CG iterations so far."""
        now = time.monotonic()
        if now >= self.next_beat:
            self.next_beat = now + HEARTBEAT_EVERY
            self._emit(cg=int(iterations))

    def note(self, text: str) -> None:
        """A line the user must see now (the ascent stepped back, and why): sent at once, beside the
        stage's counts."""
        self._emit(note=text)

    def _emit(self, **extra) -> None:
        now = time.monotonic()
        self.next = now + PROGRESS_EVERY
        if self.worker is not None:
            self.worker.log_event(self.topic, {"stage": self.stage_name, "k": self.k, "k0": self.k0,
                                               "cap": self.cap, "seconds": now - self.t_stage,
                                               "total": now - self.t0, **extra})
