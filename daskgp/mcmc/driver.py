"""The driver loop of a run (Filippone & Engler 2015, section 4: parallel chains, checkpointed): every chain
advances in segments of ``checkpoint_every`` iterations, each one Dask task
(:func:`daskgp.mcmc.segments.run_segment`, a pure function of the chain's plain-data state); a chain's next
segment is submitted as soon as its last one returns, and every block of draws of all chains is written to
the run's zarr store (:class:`daskgp.runs.draws.DrawStore`) in order, with the chain states it ends at — an
interruption loses at most the block in flight.

What the run is told to do from outside travels in :class:`RunHooks`: the user's ``progress`` and
``on_block`` callbacks and the :class:`daskgp.mcmc.control.RunControl` that pauses or stops it. A segment
lost with its worker (the scheduler cancels it) runs again from the same state, to the same draws, at most
:data:`SEGMENT_RETRIES` times.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from concurrent.futures import CancelledError
from dataclasses import asdict, dataclass, field

import numpy as np

from ..runs.draws import DrawStore
from .config import SamplerConfig, fingerprint
from .control import RunControl, RunStopped
from .diagnostics import run_status
from .fidelity import fidelity_records
from .layout import chain_layout
from .progress import LiveProgress
from .segments import block_arrays, release_operators, run_segment
from .ticker import progress_topic

__all__ = ["RunHooks", "drive", "cluster_layout", "release_on_workers", "SEGMENT_RETRIES"]

log = logging.getLogger(__name__)

SEGMENT_RETRIES = 3  # a segment lost more often than this fails the run (as distributed's allowed-failures)


@dataclass(frozen=True)
class RunHooks:
    """The user's side of a run. ``progress(status)``: after every committed block, and between blocks as
    the chains move on, with a :class:`daskgp.mcmc.diagnostics.RunStatus`; ``control``: pauses, resumes or
    stops the run from another thread; ``on_block(posterior, sample_stats, first_draw)``: the block just
    committed ({name: (chains, B)} arrays) and the index of its first draw."""

    progress: Callable | None = None
    control: RunControl = field(default_factory=RunControl)
    on_block: Callable | None = None

    @classmethod
    def of(cls, progress=None, control: RunControl | None = None, on_block=None) -> RunHooks:
        """The hooks of :func:`daskgp.mcmc.chains.sample`'s keyword arguments (a control of its own when
        none is given)."""
        return cls(progress, control if control is not None else RunControl(), on_block)


def cluster_layout(client, cfg: SamplerConfig, n: int) -> list[list[str]]:
    """Each chain's workers on this cluster (:func:`daskgp.mcmc.layout.chain_layout`); ValueError (one line)
    for a ``workers_per_chain`` the cluster cannot hold."""
    from ..compute.cluster import cluster_workers

    return chain_layout(cluster_workers(client), cfg.n_chains, n, cfg.workers_per_chain)


def release_on_workers(client, run_key: str) -> None:
    """Free the run's kernel operators on every worker; a cluster already gone has nothing to free."""
    try:
        client.run(release_operators, run_key)
    except Exception:  # a lost scheduler or a closing client: the workers' memory went with them
        pass


def _near(workers: list[str]) -> dict:
    """A chain's segment runs beside its blocks (on its first worker) when they are spread over several;
    a preference, so that a lost worker does not strand it. One worker: wherever the scheduler likes."""
    return dict(workers=workers[:1], allow_other_workers=True) if len(workers) > 1 else {}


def drive(store: DrawStore, X, y, cfg: SamplerConfig, M, ckpt: dict, names, client, hooks: RunHooks,
          history: dict | None = None):
    """Drive the chains of ``store`` to the end of the run (its length, or its ESS target) on a borrowed
    client, and release the store whatever happens. X (n, d), y (n,): the run's data; M (p, p): the
    samplers' metric; ``ckpt``: where the chains stand ({'states', 'elapsed' seconds, 'messages'});
    ``history``: the committed draws and warmup flags of a resumed run ({name: [(chains, draws)]}), for the
    running R-hat. Returns the run as an ArviZ DataTree (:func:`daskgp.mcmc.diagnostics.open_run`)."""
    from ..compute.cluster import borrowed_client

    try:
        with borrowed_client(client) as client:
            _Drive(store, X, y, cfg, M, ckpt, names, client, hooks,
                   history or {k: [] for k in [*names, "warmup"]}).run()
    finally:
        store.close()  # releases the run; a new run that committed nothing is deleted
    from .diagnostics import open_run

    return open_run(store.path)


class _Drive:
    """One drive of a run's chains: submits each chain's next segment as soon as its last one returns,
    writes every complete block in order, commits, and stops at the run's end, its target, or a stop."""

    def __init__(self, store: DrawStore, X, y, cfg: SamplerConfig, M, ckpt: dict, names, client,
                 hooks: RunHooks, history: dict):
        self.store, self.X, self.y, self.cfg, self.names = store, X, y, cfg, names
        self.client, self.hooks, self.control, self.history = client, hooks, hooks.control, history
        self.ends = cfg.block_ends(store.n_draws)  # block b holds draws starts[b] … ends[b] − 1
        self.starts = [0, *self.ends[:-1]]
        self.states = list(ckpt["states"])
        self.elapsed0 = float(ckpt["elapsed"])
        self.messages = dict(ckpt.get("messages", {}))
        self.done0 = store.n_draws
        self.t_start = time.perf_counter()
        self.paused0 = self.control.paused_seconds
        self.cfg_dict = asdict(cfg)
        self.M = np.asarray(M)
        self.run_key = f"{fingerprint(X, y)[:12]}-{secrets.token_hex(4)}"  # this drive's operators on workers
        self.pending: dict[int, dict[int, tuple]] = {}  # block index -> {chain: (records, state)}
        self.futures: dict = {}  # key -> (chain, block, future)
        self.attempts: dict[tuple[int, int], int] = {}
        # a boundary: block_ends(done0) holds it
        self.next_block = self.ends.index(self.done0) + 1 if self.done0 else 0

    def run(self) -> None:
        from distributed import as_completed

        client, progress = self.client, self.hooks.progress
        try:
            self.layout = cluster_layout(client, self.cfg, self.X.shape[0])
            self.data = client.scatter([self.X, self.y], broadcast=True, hash=False)  # placed again if lost
            self.ac = as_completed()
            self.live = LiveProgress(progress, self.cfg.n_chains, self.cfg.n_iter, self.done0, self.elapsed0,
                                     self.t_start, self.control, self.paused0, self.cfg.adapt)
            if progress is not None:
                client.subscribe_topic(progress_topic(self.run_key), self.live.on_event)
            if self.done0 < self.cfg.n_iter:
                for c in range(self.cfg.n_chains):
                    self._submit(c, self.next_block)
            for f in self.ac:
                if self._returned(f):
                    break
            if self.futures:  # chains a block ahead of a met target: released, each ends at its next gradient
                self._release_ahead()
        except BaseException:
            client.cancel([f for _, _, f in self.futures.values()])
            raise
        finally:
            if progress is not None:
                with contextlib.suppress(Exception):  # a closing client has no topics left
                    client.unsubscribe_topic(progress_topic(self.run_key))
            release_on_workers(client, self.run_key)

    def _submit(self, c: int, block: int) -> None:
        self.control.check()
        n = self.ends[block] - self.starts[block]
        again = self.attempts.get((c, block), 0)
        key = f"daskgp-chain{c}-block{block}-{self.run_key}" + (f"-{again}" if again else "")
        f = self.client.submit(run_segment, *self.data, self.cfg_dict, self.M, self.states[c], n,
                               self.run_key, c, self.layout[c], pure=False, key=key, **_near(self.layout[c]))
        self.futures[f.key] = (c, block, f)
        self.control.track(self.client, f)
        self.ac.add(f)

    def _returned(self, f) -> bool:
        """A segment came back: its chain's next one submitted, every complete block committed. True when
        the run's target is met."""
        c, block, _ = self.futures.pop(f.key)
        self.control.untrack(f)
        if self.control.stopped:
            raise RunStopped("the run was stopped; its committed draws are kept")
        try:
            records, new_state = f.result()
        except CancelledError:
            # the scheduler forgot a segment whose worker died while it held a worker client (its chain's
            # products on other workers); the segment is a pure function of the chain's state, which
            # states[c] still holds: run it again, to the same draws
            self.attempts[(c, block)] = self.attempts.get((c, block), 0) + 1
            if self.control.stopped or self.attempts[(c, block)] > SEGMENT_RETRIES:
                raise
            self._again(c, block)
            return False
        self.pending.setdefault(block, {})[c] = (records, new_state)
        if block + 1 < len(self.ends):
            self.states[c] = new_state  # this chain's next segment starts from here
            self._submit(c, block + 1)
        while self.next_block in self.pending and len(self.pending[self.next_block]) == self.cfg.n_chains:
            if self._commit(self.pending.pop(self.next_block)):
                return True
        return False

    def _again(self, c: int, block: int) -> None:
        """A lost segment submitted again, with the data scattered again (their replicas may be gone too)."""
        log.warning("daskgp: chain %d's segment %d was lost with its worker; running it again", c, block)
        self.data[:] = self.client.scatter([self.X, self.y], broadcast=True, hash=False)
        self._submit(c, block)

    def _commit(self, blk: dict) -> bool:
        """Write the block ``self.next_block`` of every chain with the states it ends at; the progress line
        and the target read after it. True when the target is met."""
        cfg, names, history = self.cfg, self.names, self.history
        n = self.ends[self.next_block] - self.starts[self.next_block]
        recs = [blk[c][0] for c in range(cfg.n_chains)]
        chain_states = [blk[c][1] for c in range(cfg.n_chains)]
        for c in range(cfg.n_chains):
            if chain_states[c].get("stopped") and str(c) not in self.messages:
                self.messages[str(c)] = chain_states[c]["stopped"]
        post, stats = block_arrays(recs, n, names, cfg.method)
        ran = time.perf_counter() - self.t_start - (self.control.paused_seconds - self.paused0)
        self.store.append(post, stats, {"states": chain_states, "elapsed": self.elapsed0 + ran,
                                        "messages": self.messages, "config": self.cfg_dict})
        for nm in names:
            history[nm].append(post[nm])
        history["warmup"].append(stats["warmup"])
        for key in fidelity_records(stats, names):
            history.setdefault("stats", {}).setdefault(key, []).append(stats[key])
        if self.hooks.on_block is not None:
            self.hooks.on_block(post, stats, self.starts[self.next_block])
        self.next_block += 1
        if self.hooks.progress is None and cfg.target_ess is None:
            return False
        status = run_status({nm: history[nm] for nm in names}, history["warmup"], warmup_draws=cfg.adapt,
                            done=self.store.n_draws, n_iter=cfg.n_iter, elapsed=self.elapsed0 + ran,
                            seconds_per_draw=ran / (self.store.n_draws - self.done0),
                            target_ess=cfg.target_ess, target_rhat=cfg.target_rhat, messages=self.messages,
                            stats_blocks=history.get("stats"))
        if self.hooks.progress is not None:
            self.live.committed(status)
        return cfg.target_ess is not None and status.converged

    def _release_ahead(self) -> None:
        """The target is met with segments still running: release their operators so that each ends at its
        next gradient (:class:`daskgp.mcmc.segments.RunReleased`), wait a minute for them, cancel the rest."""
        from distributed import wait

        release_on_workers(self.client, self.run_key)
        ahead = [f for _, _, f in self.futures.values()]
        try:
            wait(ahead, timeout=60)
        except TimeoutError:
            pass
        self.client.cancel(ahead)
