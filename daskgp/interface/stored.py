"""A run on disk opened by the dashboard: read-only, refreshed as its writer commits blocks — a run started
by ``daskgp sample`` as a batch job, on this host or another that shares the storage, finished, crashed or
still being written.

:class:`StoredRun` gives the page what a run it started itself gives (:class:`daskgp.interface.dashboard.
RunViews`): the committed draws (:func:`daskgp.mcmc.diagnostics.open_run`: only the committed prefix, every
block checked against its digest), R-hat and ESS, the PSRF evolution, and the predictive along one input from
the training rows the run holds. A run keeps no held-out rows, so its held-out predictive is not shown.
Reading never writes: downloads are written to a temporary folder of the page's own.

A run that has no committed draws yet opens too (issue 56): chosen by its pre-chain warmup's checkpoint
(``OUT.warmup``) or its staging folder (``OUT.partial-PID-HEX``), the page follows ``OUT`` — the warmup's
stage, gradients and seconds from its last commit, then "the chains have started", then the run's draws
once its first block commits and the staging folder becomes ``OUT`` (:func:`pending_run`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import fields
from types import SimpleNamespace

import numpy as np

from ..datasets.loaders import fitted_scaler
from ..mcmc.config import SamplerConfig
from ..mcmc.diagnostics import open_run, whole_chains
from ..mcmc.samplers.settings import legacy_options
from ..runs.catalog import RunEntry, commit_stamp, describe
from ..runs.layout import staged_run, staging_folders
from ..runs.lock import lock_info
from .runviews import RunViews

__all__ = ["StoredRun", "pending_run"]

CONFIG_FIELDS = frozenset(f.name for f in fields(SamplerConfig))  # a stored run's own configuration fields


def pending_run(entry: RunEntry) -> str | None:
    """The chains run that the listed ``entry`` will become — for a new run's pre-chain warmup checkpoint
    (``OUT.warmup``) or its staging folder (``OUT.partial-PID-HEX``): ``OUT`` — or None for any other
    entry."""
    from ..mcmc.warmup import warmup_path

    if entry.kind == "warmup" and entry.path.endswith(".warmup"):
        out = entry.path[: -len(".warmup")]
        return out if warmup_path(out) == entry.path else None
    return staged_run(entry.path) if entry.phase == "starting" else None


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class StoredRun(RunViews):
    """The run at ``path`` (already checked to lie in an allowed folder, :func:`daskgp.runs.catalog.
    allowed_path`) found under ``root``. ``refresh()`` rereads it when its last commit changed; ``status``
    says who writes it and where it stands; ``message`` holds the one line of a damaged run."""

    def __init__(self, path: str, root: str):
        self.out, self.root = path, root
        self.stage, self.dask_link, self.progress, self.message = "", None, None, ""
        self.status = "opening"
        self.names: list[str] = []
        self.method = ""  # set by refresh from the run's config
        self.feature_names: list[str] = []
        self.warmup_draws = 0
        self._dt = None
        self._seen = None
        self._tmp = tempfile.mkdtemp(prefix="daskgp-dashboard-open-")
        self.workdir = self._tmp
        self.entry = None
        self.refresh()

    def refresh(self) -> bool:
        """Reread the run when its checkpoint changed since the last read; True when it did."""
        if not os.path.lexists(self.out) and self._dt is None:
            pending = self._before_first_block()
            if pending is not None:
                self.entry, self.status, self.message = None, pending, ""
                return False
        self.entry = describe(self.out, self.root)
        if self.entry is None:
            self.status, self.message = "failed", f"{self.out} is no longer a daskgp run"
            return False
        stamp = commit_stamp(self.out)
        if stamp == self._seen and self._dt is not None:
            self.status = self._status()
            return False
        try:
            dt = open_run(self.out)
        except (OSError, ValueError) as e:  # damaged, or replaced under us: one line on the page
            self.status, self.message = "failed", str(e).splitlines()[0]
            return False
        self._dt, self._seen, self.message = dt, stamp, ""
        cfg = dt.attrs.get("config", {})
        self.settings = SimpleNamespace(method=cfg.get("method", "sghmc"), n_iter=int(cfg.get("n_iter", 0)),
                                        kernel=cfg.get("kernel", "rbf"), ard=bool(cfg.get("ard", False)),
                                        options=legacy_options(cfg, CONFIG_FIELDS).get("options") or {})
        self.method = self.settings.method  # a stored run's sampler is resolved ('auto' never stored)
        self.warmup_draws = int(dt.attrs.get("warmup_draws", 0))
        whole = whole_chains(dt)
        self.names = list(whole["posterior"].data_vars) if "posterior" in whole.children else []
        if "constant_data" in dt.children and not self.feature_names:
            cd = dt["constant_data"].to_dataset()
            self.X_train = np.asarray(cd["X"].values, float)
            n, d = self.X_train.shape
            # a run sampled from the library without scalers holds standardised data: identity scalers
            self.x_scaler = fitted_scaler(cd["x_center"].values if "x_center" in cd else np.zeros(d),
                                          cd["x_scale"].values if "x_scale" in cd else np.ones(d), n)
            self.y_train = np.asarray(dt["observed_data"].to_dataset()["y"].values, float)
            meta = dt.attrs.get("data_meta", {}) or {}
            self.y_scaler = fitted_scaler([meta.get("y_center", 0.0)], [meta.get("y_scale", 1.0)], n)
            self.feature_names = [str(f) for f in meta.get("feature_names",
                                                           [f"x{j}" for j in range(self.X_train.shape[1])])]
        self.status = self._status()
        return True

    def _before_first_block(self) -> str | None:
        """The status of a run not yet at ``out`` — its pre-chain warmup (stage, gradients, seconds, from the
        warmup's last commit) and whether its chains have started (a live staging folder) — or None when
        neither is there."""
        from ..mcmc.ticker import WARMUP_STAGES
        from ..mcmc.warmup import DONE, WarmupStore, warmup_path

        parts, who = [], ""
        store = WarmupStore(warmup_path(self.out))
        if store.exists():
            try:
                _, st = store.read_state(None)
                stage = int(st["stage"])
                what = "done" if stage >= DONE else WARMUP_STAGES[stage]
                parts.append(f"pre-chain warmup: {what}, {int(st['gradients'])} gradients in "
                             f"{_minutes(float(st['seconds']))}")
            except FileNotFoundError:
                parts.append("pre-chain warmup: starting")  # its folder made, nothing committed yet
            except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
                parts.append(f"pre-chain warmup: its checkpoint cannot be read ({str(e).splitlines()[0]})")
            info = lock_info(store.path)
            if info is not None and info.state in ("live", "foreign"):
                who = f"PID {info.pid} on {info.host}"
        staged = staging_folders(self.out)
        live = any(state == "live" for _, state in staged)
        if live:
            parts.append("the chains have started; their first block is not committed yet")
        elif staged:  # only a dead writer's (or one holding a user's file): no run will come of it
            parts.append(f"its writer stopped before the chains' first block ('daskgp repair {self.out}' "
                         "removes what it left)")
        if not parts:
            return None
        head = f"being written by {who}" if who else "being written" if live else "stopped"
        return f"{head} — " + "; ".join(parts)

    def _status(self) -> str:
        e = self.entry
        if e.state == "writing":
            return f"being written by {e.who} — {e.phase}"
        return f"{e.state} — {e.steps} of {e.total} draws per chain" if e.total else e.state

    def as_run(self):
        return self._dt

    def describe_settings(self) -> str:
        """The run's sampler, chains, kernel and data in a few words, for the page."""
        if self._dt is None:
            return "not read yet"
        cfg = self._dt.attrs.get("config", {})
        data = (self._dt.attrs.get("data_meta") or {}).get("name") or "its own data"
        ard = " (ARD)" if cfg.get("ard") else ""
        return (f"{cfg.get('method', '?')}, {cfg.get('n_chains', '?')} chains, kernel "
                f"{cfg.get('kernel', '?')}{ard}, {self._dt.attrs.get('n', '?')} rows of {data}")

    def snapshot(self) -> tuple[dict, dict]:
        """({param: (chains, draws)}, {stat: (chains, draws)}): the whole committed chains, warmup first."""
        if self._dt is None:
            return {}, {}
        whole = whole_chains(self._dt)
        get = {g: whole[g].to_dataset() if g in whole.children else {} for g in ("posterior", "sample_stats")}
        return ({k: np.asarray(v.values) for k, v in get["posterior"].items()},
                {k: np.asarray(v.values) for k, v in get["sample_stats"].items()})

    @property
    def n_draws(self) -> int:
        return int(self._dt.attrs.get("n_draws", 0)) if self._dt is not None else 0

    def close(self) -> None:
        """Forget the page's downloads; the run itself is never touched."""
        shutil.rmtree(self._tmp, ignore_errors=True)
