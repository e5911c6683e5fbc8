"""The right-hand side of a dashboard page (:mod:`daskgp.interface.page`): the views of the run or fit the
page shows, redrawn by the page's periodic callback from what the run has committed or received so far.

For chains: traces, running means and marginals, PSRF, the sampler's health records, the held-out predictive
and ArviZ's plots (:class:`daskgp.interface.figures.RunFigures`, :mod:`.arvizviews`); the predictive's
Cholesky solves and ArviZ's layouts are computed in background threads and applied on the event loop. For a
sparse fit: its objective, held-out metric and family figures (:class:`daskgp.interface.figures.FitFigures`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from ..mcmc.samplers import get_sampler
from .arvizviews import (
    ARVIZ_EVERY,
    ARVIZ_PLOTS,
    PPC_POINTS,
    PPC_REPLICATES,
    arviz_figures,
    heldout_ppc_figure,
)
from .figures import FitFigures, RunFigures, convergence_html, diagnostics_table, progress_text, rhat_text

__all__ = ["PageState", "LiveViews"]


@dataclass
class PageState:
    """What one page holds between callbacks: the run (a :class:`daskgp.interface.dashboard.LiveRun`, a
    stored run or fit, or a fit job) it shows, its figures, and the hand-over slots of the background
    computations (a result waits in ``pred_result`` / ``az_result`` until the event loop applies it)."""

    run: object = None
    tick: int = 0
    figs: RunFigures | None = None
    fit_figs: FitFigures | None = None
    fit_state: tuple | None = None  # (kind, finished) of the fit whose views are laid out
    uploaded: object = None  # the parsed CSV upload (a pandas frame)
    last_pred: int = -1  # draws per chain when the predictive was last started
    pred_busy: bool = False
    pred_result: tuple | None = None
    az_busy: bool = False
    az_result: tuple | None = None
    az_drawn: tuple = field(default_factory=lambda: (-1, 0.0))  # (draws per chain, monotonic time)
    az_cost: float = 0.0  # seconds ArviZ's last drawing took

    def show(self, run) -> None:
        """The page shows ``run`` from now on: nothing of the previous run's views is kept."""
        self.run, self.figs, self.fit_figs, self.fit_state = run, None, None, None
        self.tick, self.last_pred, self.az_drawn, self.az_result = 0, -1, (-1, 0.0), None


class LiveViews:
    """The views of the page's run or fit, and the widgets they update (``counter``, the download buttons
    and the predictive's slice choice sit in the page's left column). ``show_error(message)``: the page's
    error line."""

    def __init__(self, pn, state: PageState, show_error):
        self.pn, self.state, self.show_error = pn, state, show_error
        self.column = pn.Column(pn.pane.Markdown("Start a run to see its chains."),
                                sizing_mode="stretch_width", min_width=400)
        self.counter = pn.pane.Markdown("draws per chain: 0", css_classes=["draw-count"])
        self.rhat_md = pn.pane.Markdown("R-hat: n/a", css_classes=["rhat-value"])
        self.converged = pn.pane.Markdown("", css_classes=["converged"])
        self.table_md = pn.pane.Markdown("")
        self.dl_nc = pn.widgets.FileDownload(label="Download posterior (netCDF)", filename="posterior.nc",
                                             disabled=True, button_type="success")
        self.dl_csv = pn.widgets.FileDownload(label="Download summary (CSV)", filename="summary.csv",
                                              disabled=True)
        self.dl_nc.callback = lambda: self.state.run.export_netcdf()
        self.dl_csv.callback = lambda: self.state.run.export_summary_csv()
        self.slice_dim = pn.widgets.Select(name="Slice along input", options=[])
        self.slice_dim.param.watch(self._on_slice, "value")
        self.az_panes = {name: pn.pane.Bokeh(None, css_classes=[f"arviz-{name}"]) for name in ARVIZ_PLOTS}
        self.az_note = pn.pane.Markdown("", css_classes=["arviz-note"])
        self.ppc_pane = pn.pane.Bokeh(None, css_classes=["arviz-ppc_interval"])

    def message(self, text: str) -> None:
        """The views replaced by one line (waiting for a run's first draws)."""
        self.column.objects = [self.pn.pane.Markdown(text)]

    def reset(self, run) -> None:
        """A new run or fit shown: the previous one's ArviZ and predictive plots go, the slice choice is
        the new run's inputs."""
        for pane in (*self.az_panes.values(), self.ppc_pane):
            pane.object = None
        self.slice_dim.options = list(run.feature_names)
        self.slice_dim.value = run.feature_names[0] if run.feature_names else None

    # ------------------------------------------------------------------------------------------ a fit
    def show_fit(self, run) -> None:
        """The views of a fit: its objective, held-out metric and family figures."""
        B = self.pn.pane.Bokeh
        figs = self.state.fit_figs = FitFigures(run.view)
        self.state.fit_state = (run.kind, run.finished)
        state = "finished" if run.finished else "in progress"
        shown = [B(figs.objective), *([B(figs.heldout), B(figs.nll)] if figs.heldout is not None else []),
                 *[B(f) for f in figs.extra.values()]]
        self.column.objects = [self.pn.pane.Markdown(f"### {run.kind.upper()} fit {state}: {run.what}"),
                               self.pn.FlexBox(*shown, sizing_mode="stretch_width")]

    def update_fit(self, run, changed: bool) -> None:
        """A fit's views after its ``refresh`` (``changed``: it read a new commit)."""
        figs = self.state.fit_figs
        if self.state.fit_state != (run.kind, run.finished):
            self.show_fit(run)  # a page-started fit that just finished: its results file's views
            figs, changed = self.state.fit_figs, True
        self.dl_nc.disabled = self.dl_csv.disabled = True  # a fit's files are its own (checkpoint, results)
        if run.trace is not None and (changed or not figs.drawn):  # the sources only when new numbers
            figs.update(run.trace, run.latent, run.staleness)
            figs.update_heldout(run.heldout, run.calibration)
            figs.drawn = True
            note = run.view.trace_note or "{n} steps"
            self.counter.object = note.format(n=len(run.trace))

    # ------------------------------------------------------------------------------------------ chains
    def _layout(self, figs: RunFigures, names) -> None:
        pn, B = self.pn, self.pn.pane.Bokeh

        def wrap(*items):  # a row that wraps to the width of the window instead of running past it
            return pn.FlexBox(*items, sizing_mode="stretch_width")

        self.column.objects = [
            pn.pane.Markdown("### Traces (warmup shaded: SGLD before its step froze, SGHMC / MH adapting)"),
            wrap(*[B(figs.trace[nm][0]) for nm in names]),
            pn.pane.Markdown("### Running mean ± 2 sd, and each chain's marginal after warmup"),
            wrap(*[B(figs.run[nm][0]) for nm in names]),
            wrap(*[B(figs.dens[nm][0]) for nm in names]),
            pn.pane.Markdown("### Convergence"),
            wrap(B(figs.psrf[0]), pn.Column(self.rhat_md, self.converged, self.table_md, width=330)),
            pn.pane.Markdown("### Sampler health"),
            wrap(*[B(f) for f, _ in figs.health.values()]),
            pn.pane.Markdown("### Posterior predictive (held-out 10 %)"),
            wrap(B(figs.pred[0]), pn.Column(self.slice_dim, B(figs.slice[0]))),
            pn.pane.Markdown("**ArviZ's predictive intervals at the held-out points** (plot_ppc_interval:"
                             f" {PPC_REPLICATES} replicated y per draw, {PPC_POINTS} points spread over the "
                             "predictive means; observed values as points)"),
            self.ppc_pane,
            pn.pane.Markdown("### ArviZ's plots of the kept draws (arviz-plots, Bokeh backend; redrawn as "
                             "blocks commit, at most every 5 s)"),
            self.az_note,
            *[item for name, title in ARVIZ_PLOTS.items()
              for item in (pn.pane.Markdown(f"**{title}**"), self.az_panes[name])],
        ]

    def update_chains(self, run) -> None:
        """The chains' views from the draws received so far; the predictive and ArviZ's plots started in
        the background when there are new draws (ArviZ at most every ARVIZ_EVERY s)."""
        st = self.state
        post, stats = run.snapshot()
        if not post:
            return
        names = run.names
        if st.figs is None:
            st.figs = RunFigures(names, set(stats), get_sampler(run.method),
                                 (getattr(run.settings, "options", None) or {}).get("freeze_threshold"))
            self._layout(st.figs, names)
        figs = st.figs
        D = next(iter(post.values())).shape[1]
        self.counter.object = progress_text(D, run.progress, run.settings.n_iter)
        self.dl_nc.disabled = self.dl_csv.disabled = False
        figs.update(post, stats, run.sampling_start())
        diag = run.diagnostics()
        if diag["rhat"]:
            self.rhat_md.object = rhat_text(diag)
            self.converged.object = convergence_html(run.progress) or self.converged.object
            self.table_md.object = diagnostics_table(diag, names)
            if diag["evolution"] is not None:
                figs.update_psrf(diag["evolution"])
        self._apply_predictive(figs)
        self._apply_arviz()
        drawn_at, drawn_t = st.az_drawn
        # at most every ARVIZ_EVERY s, and never more than a sixth of the time: drawing holds the GIL, and
        # the page's event loop (its buttons) must stay responsive on a loaded server
        wait = max(ARVIZ_EVERY, 5 * st.az_cost)
        if D != drawn_at and not st.az_busy and time.monotonic() - drawn_t >= wait:
            st.az_busy, st.az_drawn = True, (D, time.monotonic())
            threading.Thread(target=self._compute_arviz, args=(run,), daemon=True).start()
        if D != st.last_pred and not st.pred_busy:
            self._start_predictive(run)
            st.last_pred = D

    # ------------------------------------------------------------------------------------------ background
    def _compute_predictive(self, run, dim_name) -> None:
        """Background thread: the Cholesky solves of the predictive views stay off the event loop."""
        try:
            pred = run.heldout_predictive(n_draws=10)
            dim = run.feature_names.index(dim_name) if dim_name in run.feature_names else 0
            ppc = heldout_ppc_figure(pred, pred["observed"].values) if pred is not None else None
            self.state.pred_result = (pred, run.slice_predictive(dim, n_draws=10), None, ppc)
        except Exception as e:  # shown in the page; the live views go on
            self.state.pred_result = (None, None, f"{type(e).__name__}: {e}", None)
        finally:
            self.state.pred_busy = False

    def _compute_arviz(self, run) -> None:
        """Background thread: ArviZ draws whole new layouts (about a second for three parameters)."""
        st = self.state
        t0 = time.monotonic()
        try:
            dt = run.as_run()
            result = (arviz_figures(dt), None) if dt is not None else None
        except ValueError as e:  # too few kept draws yet: said in the page, tried again at the next block
            result = (None, str(e))
        except Exception as e:  # shown in the page; the live views go on
            result = (None, f"{type(e).__name__}: {e}")
        try:
            if st.run is run:  # the page may have moved on to another run meanwhile
                st.az_result = result
        finally:
            st.az_busy, st.az_cost = False, time.monotonic() - t0
            st.az_drawn = (st.az_drawn[0], time.monotonic())

    def _apply_arviz(self) -> None:
        result, self.state.az_result = self.state.az_result, None
        if result is None:
            return
        figures, why = result
        self.az_note.object = f"ArviZ's plots: {why}" if why else ""
        for name, fig in (figures or {}).items():
            self.az_panes[name].object = fig

    def _start_predictive(self, run) -> None:
        self.state.pred_busy = True
        threading.Thread(target=self._compute_predictive, args=(run, self.slice_dim.value),
                         daemon=True).start()

    def _apply_predictive(self, figs: RunFigures) -> None:
        result, self.state.pred_result = self.state.pred_result, None
        if result is None:
            return
        pred, sl, err, ppc = result
        if err:
            self.show_error(f"Predictive view: {err}")
            return
        figs.update_predictive(pred, sl)
        if ppc is not None:
            self.ppc_pane.object = ppc

    def _on_slice(self, event) -> None:
        st = self.state
        if st.run is not None and st.figs is not None and not st.pred_busy:
            self._start_predictive(st.run)
