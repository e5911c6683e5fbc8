"""The dashboard's figures: Bokeh figures and their data sources for one run, and the texts that go beside
them, computed from a run's draws and diagnostics — no Panel, no session, no browser, so every number a
figure shows can be checked against the run's stored values in a test (``tests/interface/test_figures.py``).

The state they draw is :class:`daskgp.interface.dashboard.LiveRun` (a run in the background, its snapshot and
diagnostics); the page that lays them out and wires the widgets is :mod:`daskgp.interface.page` (its views:
:mod:`daskgp.interface.liveviews`).
"""

from __future__ import annotations

import html

import numpy as np

from ..mcmc.diagnostics import DEFAULT_TARGET_ESS
from ..mcmc.samplers.sgld import SGLDSettings

__all__ = ["RunFigures", "FitFigures", "xy_figure", "COLORS", "GENERIC_MONITOR", "MAX_POINTS", "chain_lines",
           "chain_histograms", "progress_text", "convergence_html", "rhat_text", "diagnostics_table"]

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"]
MAX_POINTS = 1500  # per chain and line: older draws are thinned in the plots, never in the run
# the health figures every run shows where it records them, after its sampler's own (Sampler.monitor)
GENERIC_MONITOR = {"cg_iterations": ("CG iterations", False), "seconds": ("seconds / iteration", False)}


def thin(n: int) -> np.ndarray:
    """At most :data:`MAX_POINTS` indices spread over range(n), first and last included."""
    return np.unique(np.linspace(0, n - 1, min(n, MAX_POINTS)).astype(int)) if n else np.arange(0)


def chain_lines(values: np.ndarray) -> dict:
    """One line per chain of ``values`` (chains, draws), thinned: a multi_line source's data."""
    C = values.shape[0]
    idx = thin(values.shape[1])
    return {"xs": [idx.tolist()] * C, "ys": [values[c, idx].tolist() for c in range(C)],
            "color": COLORS[:C], "label": [f"chain {c}" for c in range(C)]}


def chain_histograms(x: np.ndarray, bins: int = 30) -> dict:
    """Per-chain density histograms of x (chains, draws) on shared bins, as step outlines for multi_line."""
    edges = np.histogram_bin_edges(x, bins=bins)
    xs, ys = [], []
    for row in x:
        top, _ = np.histogram(row, bins=edges, density=True)
        xs.append(np.repeat(edges, 2)[1:-1].tolist())
        ys.append(np.repeat(top, 2).tolist())
    return {"xs": xs, "ys": ys, "color": COLORS[:len(x)], "label": [f"chain {c}" for c in range(len(x))]}


def running_band(x: np.ndarray, start: int) -> dict:
    """The pooled running mean ± 2 sd of the kept draws x (chains, draws after ``start``), draw-major, as a
    band's source data (x in draws per chain)."""
    pooled = x.T.reshape(-1)
    k = np.arange(1, len(pooled) + 1)
    m = np.cumsum(pooled) / k
    sd = np.sqrt(np.maximum(np.cumsum(pooled**2) / k - m**2, 0))
    idx = thin(len(pooled))
    return {"x": (start + idx / len(x)).tolist(), "m": m[idx].tolist(), "lo": (m - 2 * sd)[idx].tolist(),
            "hi": (m + 2 * sd)[idx].tolist()}


def _small_legend(fig) -> None:
    fig.legend.label_text_font_size = "8pt"
    fig.legend.spacing = 0
    fig.legend.padding = 2
    fig.legend.background_fill_alpha = 0.6
    fig.legend.click_policy = "hide"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def progress_text(drawn: int, st, n_iter: int) -> str:
    """'D of N draws per chain', the chains' own position between blocks and the time to go: the run's ESS
    estimate with a target, else the sampling rate so far."""
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


def rhat_text(diag: dict) -> str:
    """The largest R-hat of a run's diagnostics (:meth:`LiveRun.diagnostics`), and whether warmup draws are
    still among the kept ones."""
    worst = max(diag["rhat"].values())
    phase = "" if diag["phase"] == "sampling" else " (a chain still warming up among kept draws)"
    return f"**R-hat (max): {worst:.3f}**{phase}"


def convergence_html(st) -> str:
    """Converged or not against the run's target (R-hat, bulk/tail ESS), its rate and time to go, and the
    fidelity checks' verdict; '' before a first ESS estimate."""
    if st is None or st.ess is None:
        return ""
    target = st.target_ess or DEFAULT_TARGET_ESS
    rate = f", {st.sec_per_ess:.2f} s per effective sample" if st.sec_per_ess else ""
    eta = f", about {st.eta:.0f} s to go" if st.eta and not st.converged else ""
    want = f"every R-hat < {st.target_rhat} and bulk/tail ESS ≥ {target}"
    text = (f'<b style="color:#2ca02c">converged</b>: {want} (ESS {st.ess:.0f}{rate})' if st.converged else
            f'<b style="color:#d62728">not converged yet</b>: want {want}; ESS {st.ess:.0f}{rate}{eta}')
    fid = st.fidelity
    if fid is not None and fid.judged and not fid.trustworthy:  # R-hat cannot see a shared bias
        return '<b style="color:#d62728">not trustworthy</b>: ' + html.escape("; ".join(fid.reasons))
    if fid is not None and fid.trustworthy:
        text += "<br>fidelity checks passed (Stein, mean gradient, kinetic energy)"
    return text


def diagnostics_table(diag: dict, names) -> str:
    """A Markdown table of each parameter's R-hat and bulk ESS."""
    rows = "\n".join(f"| {k} | {diag['rhat'][k]:.3f} | {diag['ess'][k]:.0f} |" for k in names)
    return "| parameter | R-hat | bulk ESS |\n|---|---|---|\n" + rows


class RunFigures:
    """The Bokeh figures of one run with parameters ``names``, its sample stats ``stat_names`` and its
    :class:`daskgp.mcmc.samplers.Sampler` (whose ``monitor`` names the health figures): traces with the
    warmup shaded, running mean ± 2 sd, per-chain marginals, sampler health, PSRF evolution, held-out
    predictions and a 1-D predictive slice. ``update*`` put a run's numbers into their sources.
    ``freeze_threshold``: the run's SGLD freeze rule (its configuration's; None: the default), drawn beside
    the ratio."""

    def __init__(self, names, stat_names, sampler, freeze_threshold: float | None = None):
        from bokeh.models import BoxAnnotation, ColumnDataSource, Whisker
        from bokeh.plotting import figure

        self.names = list(names)
        thr = SGLDSettings.freeze_threshold if freeze_threshold is None else freeze_threshold
        self.freeze_threshold = float(thr)
        self.trace, self.run, self.dens, self.health = {}, {}, {}, {}
        for nm in self.names:
            f = figure(height=180, width=330, title=f"trace: {nm}", x_axis_label="iteration")
            src = ColumnDataSource({"xs": [], "ys": [], "color": [], "label": []})
            f.multi_line("xs", "ys", color="color", legend_field="label", source=src, line_width=1)
            _small_legend(f)
            box = BoxAnnotation(left=0, right=0, fill_color="orange", fill_alpha=0.12)
            f.add_layout(box)
            self.trace[nm] = (f, src, box)
            g = figure(height=180, width=330, title=f"running mean ± 2 sd: {nm}", x_axis_label="draw")
            rs = ColumnDataSource({"x": [], "m": [], "lo": [], "hi": []})
            g.varea("x", "lo", "hi", source=rs, fill_alpha=0.2, fill_color="black")
            g.line("x", "m", source=rs, color="black")
            self.run[nm] = (g, rs)
            h = figure(height=180, width=330, title=f"marginal per chain (after warmup): {nm}")
            hs = ColumnDataSource({"xs": [], "ys": [], "color": [], "label": []})
            h.multi_line("xs", "ys", color="color", legend_field="label", source=hs, line_width=1.5)
            _small_legend(h)
            self.dens[nm] = (h, hs)
        for key, (title, log) in {**sampler.monitor, **GENERIC_MONITOR}.items():
            if key not in stat_names:
                continue
            f = figure(height=170, width=330, title=title, y_axis_type="log" if log else "linear")
            if key == "ratio":  # a value per chain and batch; the threshold as data, so the axis reaches it
                src = ColumnDataSource({"x": [], "y": [], "color": [], "thr": []})
                f.scatter("x", "y", color="color", source=src, size=6)
                f.line("x", "thr", source=src, color="black", line_dash="dashed",
                       legend_label=f"freeze at {self.freeze_threshold:g}")
                _small_legend(f)
            else:
                src = ColumnDataSource({"xs": [], "ys": [], "color": [], "label": []})
                f.multi_line("xs", "ys", color="color", source=src)
            self.health[key] = (f, src)
        p = figure(height=260, width=330, title="PSRF evolution (R-hat)", x_axis_label="draws per chain")
        ps = ColumnDataSource({"n": [], "median": [], "q975": [], "ref": []})
        p.line("n", "median", source=ps, legend_label="median", color="black")
        p.line("n", "q975", source=ps, legend_label="97.5%", color="black", line_dash="dashed")
        # the 1.01 reference as a line of the data, so the y-axis always reaches it
        p.line("n", "ref", source=ps, legend_label="1.01", color="red", line_dash="dotted")
        _small_legend(p)
        self.psrf = (p, ps)
        q = figure(height=300, width=330, title="held-out: predicted vs observed (95%)",
                   x_axis_label="observed", y_axis_label="predicted")
        qs = ColumnDataSource({"obs": [], "mean": [], "lower": [], "upper": []})
        q.scatter("obs", "mean", source=qs, size=4)
        q.add_layout(Whisker(base="obs", lower="lower", upper="upper", source=qs, line_alpha=0.4))
        diag = ColumnDataSource({"x": [], "y": []})
        q.line("x", "y", source=diag, color="gray", line_dash="dashed")
        self.pred = (q, qs, diag)
        s = figure(height=300, width=420, title="1-D slice: posterior mixture (band) vs MAP plug-in (dashed)")
        ss = ColumnDataSource({"x": [], "mean": [], "lower": [], "upper": [], "map_mean": [], "map_lower": [],
                               "map_upper": []})
        s.varea("x", "lower", "upper", source=ss, fill_alpha=0.25, legend_label="mixture 95%")
        s.line("x", "mean", source=ss, legend_label="mixture mean")
        s.line("x", "map_lower", source=ss, color="red", line_dash="dashed", legend_label="MAP 95%")
        s.line("x", "map_upper", source=ss, color="red", line_dash="dashed")
        self.slice = (s, ss)

    def update(self, post: dict, stats: dict, sampling_start: int | None) -> None:
        """The draws so far: ``post`` {name: (chains, draws)} natural units, ``stats`` {record: (chains,
        draws)}, ``sampling_start`` the first kept draw (None while every draw is warmup)."""
        C, D = next(iter(post.values())).shape
        warm = stats.get("warmup")
        warm_until = [int(np.argmin(w)) if not w.all() else D for w in warm] if warm is not None else [0] * C
        s0 = sampling_start if sampling_start is not None else 0
        for nm in self.names:
            _, src, box = self.trace[nm]
            src.data = chain_lines(post[nm])
            box.right = float(max(warm_until))
            x = post[nm][:, s0:]
            x = x[np.isfinite(x).all(axis=1)]
            if x.size:
                self.run[nm][1].data = running_band(x, s0)
                if sampling_start is not None and x.shape[1] >= 8:
                    self.dens[nm][1].data = chain_histograms(x)
        for key, (_, src) in self.health.items():
            if key not in stats:
                continue
            if key == "ratio":
                r = stats["ratio"]
                c_idx, d_idx = np.nonzero(np.isfinite(r))
                src.data = {"x": d_idx.tolist(), "y": r[c_idx, d_idx].tolist(),
                            "color": [COLORS[c % len(COLORS)] for c in c_idx],
                            "thr": [self.freeze_threshold] * len(c_idx)}
            else:
                src.data = chain_lines(stats[key])

    def update_psrf(self, evolution) -> None:
        """(draws, median R-hat, 97.5 % R-hat) over the draws so far (:func:`daskgp.mcmc.diagnostics
        .psrf_evolution` via :meth:`LiveRun.diagnostics`)."""
        n, med, q = evolution
        self.psrf[1].data = {"n": n.tolist(), "median": med.tolist(), "q975": q.tolist(),
                             "ref": [1.01] * len(n)}

    def update_predictive(self, pred=None, sl=None) -> None:
        """``pred``: the held-out predictive (observed, mean, lower, upper per point); ``sl``: a 1-D slice
        (x, the mixture's mean / lower / upper, the MAP plug-in's)."""
        if pred is not None:
            pairs = (("obs", "observed"), ("mean", "mean"), ("lower", "lower"), ("upper", "upper"))
            self.pred[1].data = {k: pred[v].values.tolist() for k, v in pairs}
            lo, hi = float(pred["observed"].min()), float(pred["observed"].max())
            self.pred[2].data = {"x": [lo, hi], "y": [lo, hi]}
        if sl is not None:
            x, mix, plug = sl
            self.slice[1].data = {"x": x.tolist(), "mean": mix["mean"].values.tolist(),
                                  "lower": mix["lower"].values.tolist(),
                                  "upper": mix["upper"].values.tolist(),
                                  "map_mean": plug["mean"].values.tolist(),
                                  "map_lower": plug["lower"].values.tolist(),
                                  "map_upper": plug["upper"].values.tolist()}


def xy_figure(title: str, x_label: str, points: bool = False, **size):
    """(a figure with one line — and its points — of a source's x and y, the source)."""
    from bokeh.models import ColumnDataSource
    from bokeh.plotting import figure

    src = ColumnDataSource({"x": [], "y": []})
    f = figure(title=title, x_axis_label=x_label, **({"height": 260, "width": 420} | size))
    f.line("x", "y", source=src)
    if points:
        f.scatter("x", "y", source=src, size=4)
    return f, src


class FitFigures:
    """The Bokeh figures of a sparse fit, running or finished (:class:`daskgp.interface.fitview.StoredFit`):
    its objective against wall seconds (where the family records them) or steps; the held-out metrics the
    family logs, against seconds (:attr:`FitKind.heldout <daskgp.interface.fitkinds.FitKind.heldout>`); and
    the family's own figures (:meth:`FitKind.extra_figures`: ADVGP's staleness histogram and updates per
    partition, GPC's training error and calibration, the GPLVM's latent means). ``update(trace, latent,
    staleness)`` and ``update_heldout(heldout, calibration)`` put their numbers into the sources."""

    def __init__(self, view):
        self.view, self.kind, self.drawn = view, view.name, False
        self.objective, self.src = xy_figure(view.what, "step")
        extra = view.extra_figures()
        self.sources = extra.pop("_sources", {})
        self.extra = extra
        self.heldout = self.nll = None
        if view.heldout is not None:  # against seconds: the metric (RMSE, error rate) and a log density
            _, _, metric_label, nll_label = view.heldout
            self.heldout, self.held_src = xy_figure(f"held-out {metric_label}", "seconds", points=True)
            self.nll, self.nll_src = xy_figure(f"held-out {nll_label}", "seconds", points=True)

    def update_heldout(self, heldout, calibration=None) -> None:
        """The command line's held-out log (:func:`daskgp.interface.fitview.fit_heldout`) into the sources,
        against seconds where it has them (else steps); the family's reliability bins (GPC): ``calibration``
        (a finished fit's, from its stored test predictions) or the log's latest."""
        if self.view.heldout is None:
            return
        metric, nll = self.view.heldout[:2]
        if len(heldout) and metric in heldout:
            timed = "seconds" in heldout and bool(np.isfinite(heldout["seconds"].astype(float)).all())
            x = np.asarray(heldout["seconds" if timed else "step"], float)
            for fig, src, col in ((self.heldout, self.held_src, metric), (self.nll, self.nll_src, nll)):
                fig.xaxis.axis_label = "seconds" if timed else "step"
                y = np.asarray(heldout[col], float) if col in heldout else np.full(len(x), np.nan)
                ok = np.isfinite(y)  # a point without this metric (the regressions' final one, old logs)
                src.data = {"x": x[ok].tolist(), "y": y[ok].tolist()}
        self.view.update_calibration(self.sources, heldout, calibration)

    def update(self, trace, latent=None, staleness=None) -> None:
        timed = "seconds" in trace  # an SGPR checkpoint of daskgp <= 0.5 has steps only
        x = trace["seconds"] if timed else trace["step"]
        self.objective.xaxis.axis_label = "seconds" if timed else "step"
        self.src.data = {"x": list(map(float, x)), "y": list(map(float, trace["objective"]))}
        self.view.update_extra(self.sources, trace, latent, staleness)
