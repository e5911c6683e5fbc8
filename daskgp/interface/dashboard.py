"""The state behind the chains dashboard, without any Panel: one :class:`LiveRun` per browser session.

A run validates its settings, splits the data into a training set and a held-out test set, and runs the chains
of :func:`daskgp.mcmc.chains.sample` on the Dask cluster in a background thread, checkpointing to a zarr store
in its own folder. Draws arrive block by block (``on_block``); the page reads consistent snapshots and the
summaries computed from them (ArviZ R-hat, ESS and PSRF evolution; the mixture predictive on the held-out set
and along one input dimension, beside the MAP plug-in). Start, pause, resume and stop go through a
:class:`daskgp.mcmc.control.RunControl`. A process-wide cap limits concurrent runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..datasets import check_numeric_frame, read_csv_frame, split_indices
from ..mcmc.config import SamplerConfig
from ..mcmc.control import RunControl, RunStopped
from ..mcmc.samplers import AUTO, default_method, get_sampler
from .runviews import RunViews

__all__ = ["DashboardSettings", "default_probes", "LIMITS", "LiveRun", "parse_upload", "RunCapReached",
           "BUILTIN", "MAX_RUNS", "MAX_UPLOAD_MB", "MAX_UPLOAD_ROWS", "MAX_UPLOAD_COLUMNS"]

BUILTIN = ("concrete", "house_8L", "power_plant")


MAX_RUNS = 2  # concurrent runs across a server's sessions (daskgp dashboard --max-runs)
MAX_UPLOAD_MB = 50.0  # largest CSV upload accepted (daskgp dashboard --max-upload-mb)
# Counted on the raw bytes before parsing: a 48 MB CSV of 10^6 columns used to freeze the server in pandas.
MAX_UPLOAD_ROWS = 200_000  # an exact GP posterior on more rows is a batch job (daskgp sample), not a page
MAX_UPLOAD_COLUMNS = 500


_ACTIVE: set = set()
_ACTIVE_LOCK = threading.Lock()


class RunCapReached(RuntimeError):
    pass


def parse_upload(content: bytes | str | None, max_bytes: int = int(MAX_UPLOAD_MB * 2**20),
                 max_rows: int = MAX_UPLOAD_ROWS, max_columns: int = MAX_UPLOAD_COLUMNS) -> pd.DataFrame:
    """A user's CSV upload → numeric DataFrame, or ValueError with a message meant for the page. The size in
    bytes, rows (newlines) and columns (the header's fields) is checked on the raw bytes before pandas
    parses anything."""
    if isinstance(content, str):  # Panel decodes text/* uploads
        content = content.encode("utf-8")
    if not content:
        raise ValueError("the uploaded file is empty")
    if len(content) > max_bytes:
        raise ValueError(f"the uploaded file is {len(content) / 2**20:.1f} MB; the limit is "
                         f"{max_bytes / 2**20:.0f} MB")
    header = content[:content.find(b"\n")] if b"\n" in content else content
    n_columns = header.count(b",") + 1
    if n_columns > max_columns:
        raise ValueError(f"the uploaded file has {n_columns} columns; the limit is {max_columns}")
    n_rows = content.count(b"\n") + (not content.endswith(b"\n")) - 1
    if n_rows > max_rows:
        raise ValueError(f"the uploaded file has {n_rows} rows; the limit is {max_rows} (sample larger data "
                         "with the daskgp sample command)")
    df = read_csv_frame(content, "the uploaded file")
    if df.shape[1] < 2:
        raise ValueError(f"the CSV needs a header row and at least two columns, got {df.shape[1]}")
    if len(df) < 20:
        raise ValueError(f"the CSV has {len(df)} rows; at least 20 are needed")
    check_numeric_frame(df, "the uploaded file")
    if not np.isfinite(df.to_numpy(np.float64)).all():
        raise ValueError("the CSV has infinite values")
    return df


# the integer settings' ranges: checked by validate() and given to the page's input widgets
LIMITS = {"n_chains": (2, 16), "n_iter": (100, 1_000_000), "n_probes": (1, 256), "block": (1, 10_000),
          "target_ess": (0, 100_000)}


def default_probes(method: str) -> int:
    """The probes field's default for ``method``: the sampler's own ('auto': the sampler it runs on large
    data, where the probes matter)."""
    return get_sampler(default_method(10**12) if method == AUTO else method).default_probes


@dataclass
class DashboardSettings:
    """What the setup panel chooses. ``dataset``: a built-in name or 'upload' (then ``upload`` holds the
    parsed DataFrame and ``target`` its target column)."""

    dataset: str = "concrete"
    upload: pd.DataFrame | None = field(default=None, repr=False)
    target: str | None = None
    kernel: str = SamplerConfig.kernel  # the sampler's defaults, so the two never drift apart
    ard: bool = SamplerConfig.ard
    method: str = SamplerConfig.method  # 'auto': chosen by the data's size when the run starts
    n_chains: int = 2
    n_iter: int = 2000  # with a target ESS: the cap
    target_ess: int = 400  # 0: run the full n_iter
    n_probes: int = default_probes(SamplerConfig.method)
    options: dict = field(default_factory=dict)  # the chosen sampler's own settings (SamplerConfig.options)
    seed: int = SamplerConfig.seed
    scheduler: str | None = None  # None: the server's local cluster; else one of allowed_schedulers
    allowed_schedulers: tuple[str, ...] = ()  # daskgp dashboard --allow-scheduler
    block: int = 20
    test_fraction: float = 0.1

    def sampler_options(self) -> dict:
        """The run's :class:`daskgp.mcmc.config.SamplerConfig` fields these settings choose."""
        return dict(method=self.method, n_chains=self.n_chains, n_iter=self.n_iter,
                    target_ess=self.target_ess or None, kernel=self.kernel, ard=self.ard,
                    n_probes=self.n_probes, options=dict(self.options), seed=self.seed,
                    checkpoint_every=self.block)

    def sampler_config(self) -> SamplerConfig:
        """The run's configuration, validated by :class:`SamplerConfig` itself (ValueError in one line)."""
        return SamplerConfig.from_dict(self.sampler_options())

    def validate(self) -> DashboardSettings:
        if self.dataset not in BUILTIN + ("upload",):
            raise ValueError(f"unknown dataset {self.dataset!r}")
        if self.dataset == "upload":
            if self.upload is None:
                raise ValueError("upload a CSV file first")
            if self.target not in self.upload.columns:
                raise ValueError("choose the target column of the uploaded CSV")
        for name, (lo, hi) in LIMITS.items():  # the page's ranges; the model's rules are the sampler's
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise ValueError(f"{name.replace('n_', '').replace('_', ' ')} must be an integer in "
                                 f"[{lo}, {hi}], got {v!r}")
        self.sampler_config()  # kernel, sampler, step sizes, probes: checked by SamplerConfig, not a copy
        if self.scheduler is not None and self.scheduler not in self.allowed_schedulers:
            raise ValueError("this server may only use its local cluster" if not self.allowed_schedulers else
                             f"scheduler {self.scheduler!r} is not one this server allows")
        return self


class LiveRun(RunViews):
    """One session's run: ``start()`` → background chains; ``pause()``/``resume()``/``stop()``;
    ``snapshot()`` and the summaries below for the views. ``status``: idle, running, paused, stopped,
    finished or failed (then ``message`` says why); ``progress``: the run's last
    :class:`daskgp.mcmc.diagnostics.RunStatus` (R-hat, ESS, seconds per effective sample, time to the
    target), None before the first block."""

    def __init__(self, settings: DashboardSettings, *, client=None, workdir: str | None = None):
        self.settings = settings.validate()
        self.method = settings.method  # the sampler that runs ('auto' resolved by the data's size on start)
        self.client = client  # a Client, a zero-argument function returning one (called in the run's thread)
        self.stage = ""  # what the run is doing before its first draws, for the page
        self.dask_link = None
        self._tmp = None if workdir else tempfile.mkdtemp(prefix="daskgp-dashboard-")
        self.workdir = workdir or self._tmp
        self.out = os.path.join(self.workdir, "run.zarr")
        self.control = RunControl()
        self.status, self.message = "idle", ""
        self._lock = threading.Lock()
        self._post: dict[str, list] = {}
        self._stats: dict[str, list] = {}
        self._thread: threading.Thread | None = None
        self.t_start = None
        self.progress = None
        self.names: list[str] = []
        self.warmup_draws = 0  # set when the run starts
        self._prepare_data()

    # --- data -----------------------------------------------------------------------------------------
    def _prepare_data(self) -> None:
        from sklearn.preprocessing import StandardScaler

        from ..datasets import load

        s = self.settings
        if s.dataset == "upload":
            df = s.upload
            X = df.drop(columns=[s.target]).to_numpy(np.float64)
            y = df[s.target].to_numpy(np.float64)
            self.feature_names = [str(c) for c in df.columns if c != s.target]
        else:
            ds = load(s.dataset)
            X, y = ds.X, ds.y
            self.feature_names = list(ds.feature_names)
        train, test = split_indices(len(y), s.test_fraction, seed=s.seed)
        self.x_scaler = StandardScaler().fit(X[train])
        self.y_scaler = StandardScaler().fit(y[train, None])
        self.X_train = self.x_scaler.transform(X[train])
        self.y_train = self.y_scaler.transform(y[train, None])[:, 0]
        self.X_test = self.x_scaler.transform(X[test])
        self.y_test = y[test]  # original units
        self.X_raw_train = X[train]

    # --- control --------------------------------------------------------------------------------------
    def start(self, max_runs: int = MAX_RUNS) -> None:
        """Start the chains in the background, unless ``max_runs`` runs of this server are active."""
        with _ACTIVE_LOCK:
            cap = max_runs
            if len(_ACTIVE) >= cap:
                raise RunCapReached(f"{len(_ACTIVE)} runs are active on this server (the limit is {cap}); "
                                    "stop one or try later")
            _ACTIVE.add(id(self))
        self.status, self.t_start = "running", time.perf_counter()
        self._thread = threading.Thread(target=self._work, name="daskgp-dashboard-run", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        from ..compute.cluster import borrowed_client
        from ..datasets import scaler_meta
        from ..mcmc.chains import sample

        s = self.settings
        try:
            # 'auto': the sampler the data's size calls for
            cfg = s.sampler_config().for_rows(len(self.y_train))
            kw = {**s.sampler_options(), "method": cfg.method}
            self.method = cfg.method
            self.warmup_draws = min(cfg.adapt, cfg.n_iter)  # where the run's kept draws begin
            given = self.client
            if callable(given):  # the server's local cluster, started here so the page stays responsive
                self.stage = "starting the local Dask cluster"
                given = given()
            self.stage = "warmup: finding the posterior mode"
            with borrowed_client(given, s.scheduler, timeout=10) as client:
                self.dask_link = getattr(client, "dashboard_link", None)
                meta = {"feature_names": list(self.feature_names), "target_name": str(s.target or "y"),
                        **scaler_meta(self.x_scaler, self.y_scaler)}
                sample(self.X_train, self.y_train, out=self.out, client=client, overwrite=True,
                       control=self.control, on_block=self._on_block, progress=self._on_progress,
                       data_meta=meta, **kw)
            self.status = "finished"
        except RunStopped:
            self.status = "stopped"
        except Exception as e:  # shown in the page: the server and other sessions carry on
            first = str(e).splitlines()[0] if str(e) else ""
            self.status, self.message = "failed", f"{type(e).__name__}: {first}"
        finally:
            self.stage = ""
            with _ACTIVE_LOCK:
                _ACTIVE.discard(id(self))

    def _on_block(self, post: dict, stats: dict, start: int) -> None:
        self.stage = ""
        with self._lock:
            if not self.names:
                self.names = list(post)
            for k, v in post.items():
                self._post.setdefault(k, []).append(np.asarray(v))
            for k, v in stats.items():
                self._stats.setdefault(k, []).append(np.asarray(v))

    def _on_progress(self, status) -> None:
        self.progress = status

    def pause(self) -> None:
        if self.status == "running":
            self.control.pause()
            self.status = "paused"

    def resume(self) -> None:
        if self.status == "paused":
            self.control.resume()
            self.status = "running"

    def stop(self, wait: float = 30.0) -> None:
        """Stop the chains (their tasks are cancelled on the cluster) and wait for the thread to end."""
        if self.status in ("running", "paused"):
            self.control.stop()
        if self._thread is not None:
            self._thread.join(timeout=wait)

    def close(self) -> None:
        """Stop and delete the run's files (closing the browser tab)."""
        self.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # --- views ----------------------------------------------------------------------------------------
    def snapshot(self) -> tuple[dict, dict]:
        """({param: (chains, draws)} natural units, {stat: (chains, draws)}) of everything received."""
        with self._lock:
            post = {k: np.concatenate(v, axis=1) for k, v in self._post.items()}
            stats = {k: np.concatenate(v, axis=1) for k, v in self._stats.items()}
        return post, stats

    @property
    def n_draws(self) -> int:
        post, _ = self.snapshot()
        return next(iter(post.values())).shape[1] if post else 0

    def as_run(self):
        """The draws received so far as a run DataTree (the layout :func:`daskgp.mcmc.diagnostics.open_run`
        gives), or None before the first block."""
        from ..mcmc.diagnostics import split_at_warmup

        post, stats = self.snapshot()
        if not post:
            return None
        dt = split_at_warmup(post, stats, self.warmup_draws)
        dt.attrs["param_names"] = list(self.names)
        return dt
