"""The Panel dashboard: start MCMC chains of the GP hyperparameters on the Dask cluster and watch them mix,
live, until they reach their target ESS.

``create_app()`` builds one session's page around a :class:`daskgp.interface.dashboard.LiveRun`; the chains
run in a background thread on the cluster and a periodic callback (every second, on the session's event loop)
redraws the Bokeh views from the draws received so far. Serve it with ``daskgp dashboard`` (127.0.0.1 by
default) or ``panel serve apps/sgld_dashboard.py``.
"""

from __future__ import annotations

import html
import threading

import numpy as np

from ..core.kernels import KERNELS
from ..mcmc.diagnostics import DEFAULT_TARGET_ESS
from ..mcmc.samplers import get_sampler, sampler_names
from .dashboard import (
    BUILTIN,
    LIMITS,
    MAX_RUNS,
    MAX_UPLOAD_COLUMNS,
    MAX_UPLOAD_MB,
    MAX_UPLOAD_ROWS,
    DashboardSettings,
    LiveRun,
    RunCapReached,
    parse_upload,
)

__all__ = ["create_app", "shared_client"]

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"]
_CLIENT = {"client": None}
_CLIENT_LOCK = threading.Lock()
MAX_POINTS = 1500  # per chain and line: older draws are thinned in the plots, never in the run


# the health figures every run shows where it records them, after its sampler's own (Sampler.monitor)
GENERIC_MONITOR = {"cg_iterations": ("CG iterations", False), "seconds": ("seconds / iteration", False)}


def shared_client():
    """One local cluster for every session of this server (started on first use)."""
    with _CLIENT_LOCK:
        if _CLIENT["client"] is None or _CLIENT["client"].status != "running":
            from ..compute.cluster import get_client

            _CLIENT["client"] = get_client(n_workers=2)
        return _CLIENT["client"]


def _progress_text(drawn: int, st, settings) -> str:
    """'D of N draws per chain', the chains' own position between blocks and the time to go: the run's ESS
    estimate with a target, else the sampling rate so far."""
    n_iter = settings.n_iter
    text = f"{drawn} of {n_iter} draws per chain"
    if st is None:
        return text
    at = max(st.done, st.running or 0)
    if at > drawn:
        text += f" (chains at {at})"
    if st.eta and not st.converged:
        text += f", about {_duration(st.eta)} to the ESS target"
    elif at and at < n_iter and st.elapsed:
        text += f", about {_duration(st.elapsed / at * (n_iter - at))} to go"
    return text


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def _small_legend(fig) -> None:
    fig.legend.label_text_font_size = "8pt"
    fig.legend.spacing = 0
    fig.legend.padding = 2
    fig.legend.background_fill_alpha = 0.6
    fig.legend.click_policy = "hide"


def _chain_histograms(x: np.ndarray, bins: int = 30) -> dict:
    """Per-chain density histograms of x (chains, draws) on shared bins, as step outlines for multi_line."""
    edges = np.histogram_bin_edges(x, bins=bins)
    xs, ys = [], []
    for row in x:
        top, _ = np.histogram(row, bins=edges, density=True)
        xs.append(np.repeat(edges, 2)[1:-1].tolist())
        ys.append(np.repeat(top, 2).tolist())
    return {"xs": xs, "ys": ys, "color": COLORS[:len(x)], "label": [f"chain {c}" for c in range(len(x))]}


def _thin(n: int) -> np.ndarray:
    return np.unique(np.linspace(0, n - 1, min(n, MAX_POINTS)).astype(int)) if n else np.arange(0)


def _capped_dropper(pn, max_bytes: int, rejected):
    """A chunked file upload (Panel's FileDropper: the browser refuses files over ``max_bytes`` and shows why)
    that the server also caps: a client that ignores the browser's check is cut off at ``max_bytes`` received,
    its chunks dropped, and ``rejected(message)`` called."""

    class CappedDropper(pn.widgets.FileDropper):
        def _process_event(self, event):
            data = event.data
            if event.event_name != "upload_event":
                return super()._process_event(event)
            name, last = data["name"], data["chunk"] == data["total_chunks"]
            refused = self.__dict__.setdefault("_refused", set())
            if data["chunk"] == 1:
                refused.discard(name)
            if name in refused:  # the rest of a refused file: dropped as it arrives
                if last:
                    refused.discard(name)
                return None
            got = sum(len(b) for b in self._file_buffer.get(name, [])) if data["chunk"] != 1 else 0
            if got + len(data["data"] or b"") > max_bytes:
                self._file_buffer.pop(name, None)
                if not last:
                    refused.add(name)
                rejected(f"the uploaded file is over the {max_bytes / 2**20:.3g} MB limit")
                return None
            return super()._process_event(event)

    return CappedDropper


def create_app(max_runs: int = MAX_RUNS, max_upload_mb: float = MAX_UPLOAD_MB, schedulers=()):
    """One browser session's page; ``max_runs`` concurrent runs across the server's sessions, CSV uploads of
    at most ``max_upload_mb`` (and ``MAX_UPLOAD_ROWS`` rows, ``MAX_UPLOAD_COLUMNS`` columns); ``schedulers``:
    the dask-scheduler addresses a page may choose instead of the server's local cluster (none by default:
    the choice is hidden and the page cannot point the server anywhere)."""
    import panel as pn
    from bokeh.models import BoxAnnotation, ColumnDataSource, Whisker
    from bokeh.plotting import figure

    pn.extension()
    # ---------------------------------------------------------------------------------------- setup
    d = DashboardSettings  # every widget starts at the settings' default (themselves the sampler's)
    dataset = pn.widgets.Select(name="Dataset", options=list(BUILTIN) + ["upload"], value=d.dataset)
    max_bytes = int(max_upload_mb * 2**20)
    upload = _capped_dropper(pn, max_bytes, lambda msg: reject_upload(msg))(
        name="CSV upload", accepted_filetypes=[".csv", "text/csv"], multiple=False,
        max_file_size=f"{max(1, int(max_upload_mb * 1024))}KB", css_classes=["csv-upload"])
    target = pn.widgets.Select(name="Target column", options=[], disabled=True)
    kernel = pn.widgets.Select(name="Kernel", options={cls.title: name for name, cls in KERNELS.items()},
                               value=d.kernel)
    ard = pn.widgets.Checkbox(name="ARD (one lengthscale per input)", value=d.ard)
    method = pn.widgets.Select(name="Sampler", value=d.method,
                               options={get_sampler(nm).label: nm for nm in sampler_names()})
    lim = LIMITS
    target_ess = pn.widgets.IntInput(name="Target ESS (0: run every iteration)", value=d.target_ess,
                                     start=lim["target_ess"][0], end=lim["target_ess"][1], step=100)
    chains = pn.widgets.IntInput(name="Chains", value=d.n_chains, start=lim["n_chains"][0],
                                 end=lim["n_chains"][1])
    iterations = pn.widgets.IntInput(name="Iterations per chain (a cap with a target)", value=d.n_iter,
                                     start=lim["n_iter"][0], end=lim["n_iter"][1], step=100)
    probes = pn.widgets.IntInput(name="Probes N_r", value=d.n_probes, start=lim["n_probes"][0],
                                 end=lim["n_probes"][1])
    step_start = pn.widgets.FloatInput(name="SGLD step size start", value=d.step_start, step=0.01)
    step_end = pn.widgets.FloatInput(name="SGLD step size end", value=d.step_end, step=1e-4)

    def on_method(event):  # each sampler's own default number of probes
        probes.value = get_sampler(event.new).default_probes

    method.param.watch(on_method, "value")
    seed = pn.widgets.IntInput(name="Seed", value=d.seed)
    local = "this server's local cluster"
    scheduler = pn.widgets.Select(name="Dask cluster", options=[local, *schedulers], value=local,
                                  visible=bool(schedulers))
    start_b = pn.widgets.Button(name="Start", button_type="primary")
    pause_b = pn.widgets.Button(name="Pause", button_type="warning", disabled=True)
    stop_b = pn.widgets.Button(name="Stop", button_type="danger", disabled=True)
    error = pn.pane.Alert("", alert_type="danger", visible=False, css_classes=["run-error"])
    status = pn.pane.Markdown("**status:** idle", css_classes=["run-status"])
    counter = pn.pane.Markdown("draws per chain: 0", css_classes=["draw-count"])
    rhat_md = pn.pane.Markdown("R-hat: n/a", css_classes=["rhat-value"])
    converged = pn.pane.Markdown("", css_classes=["converged"])
    table_md = pn.pane.Markdown("")
    dask_md = pn.pane.Markdown("")
    dl_nc = pn.widgets.FileDownload(label="Download posterior (netCDF)", filename="posterior.nc",
                                    disabled=True, button_type="success")
    dl_csv = pn.widgets.FileDownload(label="Download summary (CSV)", filename="summary.csv", disabled=True)
    slice_dim = pn.widgets.Select(name="Slice along input", options=[])
    session = {"run": None, "tick": 0, "last_pred": -1, "figs": None, "uploaded": None, "pred_busy": False,
               "pred_result": None}

    def show_error(msg: str) -> None:
        error.object, error.visible = msg, bool(msg)

    def reject_upload(msg: str) -> None:
        session["uploaded"] = None
        target.options, target.disabled = [], True
        show_error(f"Upload rejected: {msg}")

    def on_upload(event):
        if not upload.value:
            return
        content = next(iter(upload.value.values()))
        upload.value.clear()  # the page keeps the parsed frame only: the raw bytes go now
        try:
            df = parse_upload(content, max_bytes, MAX_UPLOAD_ROWS, MAX_UPLOAD_COLUMNS)
        except ValueError as e:
            reject_upload(str(e))
            return
        finally:
            del content
        session["uploaded"] = df
        target.options = [str(c) for c in df.columns]
        target.value = str(df.columns[-1])
        target.disabled = False
        dataset.value = "upload"
        show_error("")

    upload.param.watch(on_upload, "value")

    # ---------------------------------------------------------------------------------------- figures
    def build_figures(names, stat_names, sampler):
        figs = {"trace": {}, "run": {}, "dens": {}, "src": {}}
        for nm in names:
            f = figure(height=180, width=330, title=f"trace: {nm}", x_axis_label="iteration")
            src = ColumnDataSource({"xs": [], "ys": [], "color": [], "label": []})
            f.multi_line("xs", "ys", color="color", legend_field="label", source=src, line_width=1)
            _small_legend(f)
            box = BoxAnnotation(left=0, right=0, fill_color="orange", fill_alpha=0.12)
            f.add_layout(box)
            figs["trace"][nm] = (f, src, box)
            g = figure(height=180, width=330, title=f"running mean ± 2 sd: {nm}", x_axis_label="draw")
            rs = ColumnDataSource({"x": [], "m": [], "lo": [], "hi": []})
            g.varea("x", "lo", "hi", source=rs, fill_alpha=0.2, fill_color="black")
            g.line("x", "m", source=rs, color="black")
            figs["run"][nm] = (g, rs)
            h = figure(height=180, width=330, title=f"marginal per chain (after warmup): {nm}")
            hs = ColumnDataSource({"xs": [], "ys": [], "color": [], "label": []})
            h.multi_line("xs", "ys", color="color", legend_field="label", source=hs, line_width=1.5)
            _small_legend(h)
            figs["dens"][nm] = (h, hs)
        health = {}
        for key, (title, log) in {**sampler.monitor, **GENERIC_MONITOR}.items():
            if key not in stat_names:
                continue
            f = figure(height=170, width=330, title=title, y_axis_type="log" if log else "linear")
            src = ColumnDataSource({"xs": [], "ys": [], "color": [], "label": []})
            if key == "ratio":  # a value per chain and batch; the threshold as data, so the axis reaches it
                src = ColumnDataSource({"x": [], "y": [], "color": [], "thr": []})
                f.scatter("x", "y", color="color", source=src, size=6)
                f.line("x", "thr", source=src, color="black", line_dash="dashed",
                       legend_label="freeze at 0.01")
                _small_legend(f)
            else:
                f.multi_line("xs", "ys", color="color", source=src)
            health[key] = (f, src)
        figs["health"] = health
        p = figure(height=260, width=330, title="PSRF evolution (R-hat)", x_axis_label="draws per chain")
        ps = ColumnDataSource({"n": [], "median": [], "q975": [], "ref": []})
        p.line("n", "median", source=ps, legend_label="median", color="black")
        p.line("n", "q975", source=ps, legend_label="97.5%", color="black", line_dash="dashed")
        # the 1.01 reference as a line of the data, so the y-axis always reaches it
        p.line("n", "ref", source=ps, legend_label="1.01", color="red", line_dash="dotted")
        _small_legend(p)
        figs["psrf"] = (p, ps)
        q = figure(height=300, width=330, title="held-out: predicted vs observed (95%)",
                   x_axis_label="observed", y_axis_label="predicted")
        qs = ColumnDataSource({"obs": [], "mean": [], "lower": [], "upper": []})
        q.scatter("obs", "mean", source=qs, size=4)
        q.add_layout(Whisker(base="obs", lower="lower", upper="upper", source=qs, line_alpha=0.4))
        diag = ColumnDataSource({"x": [], "y": []})
        q.line("x", "y", source=diag, color="gray", line_dash="dashed")
        figs["pred"] = (q, qs, diag)
        s = figure(height=300, width=420, title="1-D slice: posterior mixture (band) vs MAP plug-in (dashed)")
        ss = ColumnDataSource({"x": [], "mean": [], "lower": [], "upper": [], "map_mean": [], "map_lower": [],
                               "map_upper": []})
        s.varea("x", "lower", "upper", source=ss, fill_alpha=0.25, legend_label="mixture 95%")
        s.line("x", "mean", source=ss, legend_label="mixture mean")
        s.line("x", "map_lower", source=ss, color="red", line_dash="dashed", legend_label="MAP 95%")
        s.line("x", "map_upper", source=ss, color="red", line_dash="dashed")
        figs["slice"] = (s, ss)
        return figs

    views = pn.Column(pn.pane.Markdown("Start a run to see its chains."), sizing_mode="stretch_width",
                      min_width=400)

    def layout_figures(figs, names):
        B = pn.pane.Bokeh

        def wrap(*items):  # a row that wraps to the width of the window instead of running past it
            return pn.FlexBox(*items, sizing_mode="stretch_width")

        views.objects = [
            pn.pane.Markdown("### Traces (warmup shaded: SGLD before its step froze, SGHMC / MH adapting)"),
            wrap(*[B(figs["trace"][nm][0]) for nm in names]),
            pn.pane.Markdown("### Running mean ± 2 sd, and each chain's marginal after warmup"),
            wrap(*[B(figs["run"][nm][0]) for nm in names]),
            wrap(*[B(figs["dens"][nm][0]) for nm in names]),
            pn.pane.Markdown("### Convergence"),
            wrap(B(figs["psrf"][0]), pn.Column(rhat_md, converged, table_md, width=330)),
            pn.pane.Markdown("### Sampler health"),
            wrap(*[B(f) for f, _ in figs["health"].values()]),
            pn.pane.Markdown("### Posterior predictive (held-out 10 %)"),
            wrap(B(figs["pred"][0]), pn.Column(slice_dim, B(figs["slice"][0]))),
        ]

    # ---------------------------------------------------------------------------------------- refresh
    def multi(stats_arr, C):
        idx = _thin(stats_arr.shape[1])
        return {"xs": [idx.tolist()] * C, "ys": [stats_arr[c, idx].tolist() for c in range(C)],
                "color": COLORS[:C], "label": [f"chain {c}" for c in range(C)]}

    def refresh():
        run = session["run"]
        if run is None:
            return
        session["tick"] += 1
        stage = f" — {run.stage}…" if run.stage and run.status == "running" else ""
        status.object = (f"**status:** {run.status}{stage}" + (f" — {run.message}" if run.message else ""))
        if run.dask_link:
            dask_md.object = f"[Dask dashboard]({run.dask_link})"
        if run.status == "failed":
            show_error(f"The run failed: {run.message}")
        if run.status not in ("running", "paused"):
            start_b.disabled, pause_b.disabled, stop_b.disabled = False, True, True
            pause_b.name = "Pause"
        post, stats = run.snapshot()
        if not post:
            return
        names = run.names
        if session["figs"] is None:
            session["figs"] = build_figures(names, set(stats), get_sampler(run.settings.method))
            layout_figures(session["figs"], names)
        figs = session["figs"]
        C, D = next(iter(post.values())).shape
        counter.object = _progress_text(D, run.progress, run.settings)
        dl_nc.disabled = dl_csv.disabled = False
        warm = stats.get("warmup")
        warm_until = [int(np.argmin(w)) if not w.all() else D for w in warm] if warm is not None else [0] * C
        start = run.sampling_start()
        for nm in names:
            f, src, box = figs["trace"][nm]
            src.data = multi(post[nm], C)
            box.right = float(max(warm_until))
            s0 = start if start is not None else 0
            x = post[nm][:, s0:]
            x = x[np.isfinite(x).all(axis=1)]
            if x.size:
                pooled = x.T.reshape(-1)  # draw-major: running statistics over time
                k = np.arange(1, len(pooled) + 1)
                m = np.cumsum(pooled) / k
                sd = np.sqrt(np.maximum(np.cumsum(pooled**2) / k - m**2, 0))
                idx = _thin(len(pooled))
                figs["run"][nm][1].data = {"x": (s0 + idx / len(x)).tolist(), "m": m[idx].tolist(),
                                           "lo": (m - 2 * sd)[idx].tolist(), "hi": (m + 2 * sd)[idx].tolist()}
                if start is not None and x.shape[1] >= 8:
                    figs["dens"][nm][1].data = _chain_histograms(x)
        for key, (_, src) in figs["health"].items():
            if key not in stats:
                continue
            if key == "ratio":
                r = stats["ratio"]
                c_idx, d_idx = np.nonzero(np.isfinite(r))
                src.data = {"x": d_idx.tolist(), "y": r[c_idx, d_idx].tolist(),
                            "color": [COLORS[c % len(COLORS)] for c in c_idx], "thr": [0.01] * len(c_idx)}
            else:
                src.data = multi(stats[key], C)
        diag = run.diagnostics()
        if diag["rhat"]:
            worst = max(diag["rhat"].values())
            phase = "" if diag["phase"] == "sampling" else " (a chain still warming up among kept draws)"
            rhat_md.object = f"**R-hat (max): {worst:.3f}**{phase}"
            st = run.progress
            if st is not None and st.ess is not None:
                target = st.target_ess or DEFAULT_TARGET_ESS
                rate = f", {st.sec_per_ess:.2f} s per effective sample" if st.sec_per_ess else ""
                eta = f", about {st.eta:.0f} s to go" if st.eta and not st.converged else ""
                want = f"every R-hat < {st.target_rhat} and bulk/tail ESS ≥ {target}"
                converged.object = (f'<b style="color:#2ca02c">converged</b>: {want} (ESS {st.ess:.0f}{rate})'
                                    if st.converged else
                                    f'<b style="color:#d62728">not converged yet</b>: want {want}; ESS '
                                    f'{st.ess:.0f}{rate}{eta}')
                fid = st.fidelity
                if fid is not None and fid.judged and not fid.trustworthy:  # R-hat cannot see a shared bias
                    converged.object = ('<b style="color:#d62728">not trustworthy</b>: '
                                        + html.escape("; ".join(fid.reasons)))
                elif fid is not None and fid.trustworthy:
                    converged.object += "<br>fidelity checks passed (Stein, mean gradient, kinetic energy)"
            rows = "\n".join(f"| {k} | {diag['rhat'][k]:.3f} | {diag['ess'][k]:.0f} |" for k in names)
            table_md.object = "| parameter | R-hat | bulk ESS |\n|---|---|---|\n" + rows
            if diag["evolution"] is not None:
                n, med, q = diag["evolution"]
                figs["psrf"][1].data = {"n": n.tolist(), "median": med.tolist(), "q975": q.tolist(),
                                        "ref": [1.01] * len(n)}
        apply_predictive(figs)
        if D != session["last_pred"] and not session["pred_busy"]:
            start_predictive(run)
            session["last_pred"] = D

    def compute_predictive(run, dim_name):
        """Background thread: the Cholesky solves of the predictive views stay off the event loop."""
        try:
            pred = run.heldout_predictive(n_draws=10)
            dim = run.feature_names.index(dim_name) if dim_name in run.feature_names else 0
            session["pred_result"] = (pred, run.slice_predictive(dim, n_draws=10), None)
        except Exception as e:  # shown in the page; the live views go on
            session["pred_result"] = (None, None, f"{type(e).__name__}: {e}")
        finally:
            session["pred_busy"] = False

    def start_predictive(run):
        session["pred_busy"] = True
        threading.Thread(target=compute_predictive, args=(run, slice_dim.value), daemon=True).start()

    def apply_predictive(figs):
        result, session["pred_result"] = session["pred_result"], None
        if result is None:
            return
        pred, sl, err = result
        if err:
            show_error(f"Predictive view: {err}")
            return
        if pred is not None:
            figs["pred"][1].data = {k: pred[v].values.tolist() for k, v in
                                    (("obs", "observed"), ("mean", "mean"), ("lower", "lower"),
                                     ("upper", "upper"))}
            lo, hi = float(pred["observed"].min()), float(pred["observed"].max())
            figs["pred"][2].data = {"x": [lo, hi], "y": [lo, hi]}
        if sl is not None:
            x, mix, plug = sl
            figs["slice"][1].data = {"x": x.tolist(), "mean": mix["mean"].values.tolist(),
                                     "lower": mix["lower"].values.tolist(),
                                     "upper": mix["upper"].values.tolist(),
                                     "map_mean": plug["mean"].values.tolist(),
                                     "map_lower": plug["lower"].values.tolist(),
                                     "map_upper": plug["upper"].values.tolist()}

    def on_slice(event):
        run = session["run"]
        if run is not None and session["figs"] is not None and not session["pred_busy"]:
            start_predictive(run)

    slice_dim.param.watch(on_slice, "value")
    cb = pn.state.add_periodic_callback(refresh, period=1000, start=False)

    # ---------------------------------------------------------------------------------------- control
    def on_start(event):
        show_error("")
        old = session["run"]
        if old is not None and old.status in ("running", "paused"):
            return
        try:
            settings = DashboardSettings(
                dataset=dataset.value, upload=session["uploaded"], target=target.value or None,
                kernel=kernel.value, ard=ard.value, method=method.value, n_chains=chains.value,
                n_iter=iterations.value, target_ess=target_ess.value, n_probes=probes.value,
                step_start=float(step_start.value), step_end=float(step_end.value),
                seed=int(seed.value), scheduler=None if scheduler.value == local else scheduler.value,
                allowed_schedulers=tuple(schedulers)).validate()
            # the shared cluster starts in the run's thread: the page answers at once ("starting …")
            run = LiveRun(settings, client=None if settings.scheduler else shared_client)
            run.start(max_runs)
        except (ValueError, RunCapReached, FileNotFoundError, OSError) as e:
            show_error(f"Cannot start: {e}")
            return
        if old is not None:
            old.close()
        session.update(run=run, figs=None, tick=0, last_pred=-1)
        slice_dim.options = list(run.feature_names)
        slice_dim.value = run.feature_names[0]
        dask_md.object = "Dask dashboard: link shown once the cluster is up"
        status.object = f"**status:** running — {run.stage or 'starting'}…"
        counter.object = f"0 of {settings.n_iter} draws per chain"
        views.objects = [pn.pane.Markdown("Waiting for the first draws…")]
        start_b.disabled, pause_b.disabled, stop_b.disabled = True, False, False
        if not cb.running:
            cb.start()

    def on_pause(event):
        run = session["run"]
        if run is None:
            return
        if run.status == "running":
            run.pause()
            pause_b.name = "Resume"
        elif run.status == "paused":
            run.resume()
            pause_b.name = "Pause"
        status.object = f"**status:** {run.status}"

    def on_stop(event):
        run = session["run"]
        if run is None:
            return
        stop_b.disabled = pause_b.disabled = True
        run.stop()
        refresh()

    start_b.on_click(on_start)
    pause_b.on_click(on_pause)
    stop_b.on_click(on_stop)
    dl_nc.callback = lambda: session["run"].export_netcdf()
    dl_csv.callback = lambda: session["run"].export_summary_csv()

    def on_destroyed(ctx):
        run = session["run"]
        if run is not None:
            threading.Thread(target=run.close, daemon=True).start()  # stop its chains, free its workers

    pn.state.on_session_destroyed(on_destroyed)

    setup = pn.Column("## daskgp — GP hyperparameter posterior", dataset, upload, target, kernel, ard,
                      method, chains, target_ess, iterations, probes, step_start, step_end, seed, scheduler,
                      pn.Row(start_b, pause_b, stop_b), error, status, counter, dask_md, dl_nc, dl_csv,
                      width=340)
    return pn.Row(setup, views, sizing_mode="stretch_width")
