"""The Panel dashboard: start MCMC chains of the GP hyperparameters on the Dask cluster and watch them mix,
live, until they reach their target ESS.

``create_app()`` builds one session's page around a :class:`daskgp.interface.dashboard.LiveRun`; the chains
run in a background thread on the cluster and a periodic callback (every second, on the session's event loop)
redraws the Bokeh views from the draws received so far. With runs folders (``--runs``) the page also lists
and opens any run or fit under them read-only (:mod:`daskgp.runs.catalog`, :mod:`.stored`, :mod:`.fitview`)
and starts sparse fits as batch jobs there (:mod:`.fitjob`). Serve it with ``daskgp dashboard`` (127.0.0.1 by
default) or ``panel serve apps/sgld_dashboard.py``.
"""

from __future__ import annotations

import os
import threading
import time

from ..core.kernels import KERNELS
from ..mcmc.samplers import AUTO, get_sampler, sampler_names
from .arvizviews import (
    ARVIZ_EVERY,
    ARVIZ_PLOTS,
    PPC_POINTS,
    PPC_REPLICATES,
    arviz_figures,
    heldout_ppc_figure,
)
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
    default_probes,
    parse_upload,
)
from .figures import FitFigures, RunFigures, convergence_html, diagnostics_table, progress_text, rhat_text
from .fitjob import FIT_DATASETS, FIT_LIMITS, FitJobSettings

__all__ = ["create_app", "shared_client"]

_CLIENT = {"client": None}
_CLIENT_LOCK = threading.Lock()


def shared_client():
    """One local cluster for every session of this server (started on first use)."""
    with _CLIENT_LOCK:
        if _CLIENT["client"] is None or _CLIENT["client"].status != "running":
            from ..compute.cluster import get_client

            _CLIENT["client"] = get_client(n_workers=2)
        return _CLIENT["client"]


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


def create_app(max_runs: int = MAX_RUNS, max_upload_mb: float = MAX_UPLOAD_MB, schedulers=(), runs=()):
    """One browser session's page; ``max_runs`` concurrent runs across the server's sessions, CSV uploads of
    at most ``max_upload_mb`` (and ``MAX_UPLOAD_ROWS`` rows, ``MAX_UPLOAD_COLUMNS`` columns); ``schedulers``:
    the dask-scheduler addresses a page may choose instead of the server's local cluster (none by default:
    the choice is hidden and the page cannot point the server anywhere); ``runs``: the folders whose runs
    the page lists and opens read-only (:mod:`daskgp.runs.catalog`; nothing outside them is read), the
    first of which receives the runs started from the page (kept after the page closes); none: the page's
    runs live in a temporary folder, deleted with the page."""
    import panel as pn

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
                               options={"By the data's size (the registry's measured crossovers)": AUTO,
                                        **{get_sampler(nm).label: nm for nm in sampler_names()}})
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
        probes.value = default_probes(event.new)

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
               "pred_result": None, "az_busy": False, "az_result": None, "az_drawn": (-1, 0.0),
               "az_cost": 0.0}
    az_panes = {name: pn.pane.Bokeh(None, css_classes=[f"arviz-{name}"]) for name in ARVIZ_PLOTS}
    az_note = pn.pane.Markdown("", css_classes=["arviz-note"])
    ppc_pane = pn.pane.Bokeh(None, css_classes=["arviz-ppc_interval"])

    def busy(run) -> bool:
        """Whether the page's run (chains) or fit job is still running: nothing else starts or opens."""
        return run is not None and (run.status in ("running", "paused") or getattr(run, "running", False))

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

    # ---------------------------------------------------------------------------------------- runs on disk
    runs = tuple(runs)
    run_list = pn.widgets.Select(name="Runs in " + ", ".join(map(str, runs)), options={}, size=6,
                                 visible=bool(runs), css_classes=["run-list"])
    run_path = pn.widgets.TextInput(name="…or a run's path", placeholder="a folder under the runs folders",
                                    visible=bool(runs), css_classes=["run-path"])
    open_b = pn.widgets.Button(name="Open read-only", visible=bool(runs), css_classes=["open-run"])
    # a sparse fit started from the page: the family's own command, a batch job in the first runs folder
    fit_family = pn.widgets.Select(name="Sparse fit", options={"SGPR": "sgpr", "ADVGP": "advgp",
                                                               "GPC (EP)": "gpc"}, visible=bool(runs))
    fit_data = pn.widgets.Select(name="Fit dataset", options=list(FIT_DATASETS["sgpr"]), visible=bool(runs))
    fit_m = pn.widgets.IntInput(name="Inducing points m", value=FitJobSettings.n_inducing,
                                start=FIT_LIMITS["n_inducing"][0], end=FIT_LIMITS["n_inducing"][1],
                                visible=bool(runs))
    fit_iter = pn.widgets.IntInput(name="Fit iterations", value=FitJobSettings.max_iter,
                                   start=FIT_LIMITS["max_iter"][0], end=FIT_LIMITS["max_iter"][1],
                                   visible=bool(runs))
    fit_b = pn.widgets.Button(name="Start fit", visible=bool(runs), css_classes=["start-fit"])

    def on_family(event):
        fit_data.options = list(FIT_DATASETS[event.new])

    fit_family.param.watch(on_family, "value")
    list_b = pn.widgets.Button(name="Refresh list", visible=bool(runs))
    writer_md = pn.pane.Markdown("", css_classes=["run-writer"])

    def list_runs(event=None):
        from ..runs.catalog import find_runs

        try:
            found = find_runs(runs)
        except ValueError as e:
            show_error(str(e))
            return
        run_list.options = {_run_label(r): r.path for r in found}

    def take_over(old, run):
        """The page shows ``run`` from now on: the run it showed is closed and its views and plots go."""
        if old is not None:
            old.close()
        session.update(run=run, figs=None, tick=0, last_pred=-1, az_drawn=(-1, 0.0), az_result=None)
        for pane in (*az_panes.values(), ppc_pane):
            pane.object = None
        slice_dim.options = list(run.feature_names)
        slice_dim.value = run.feature_names[0] if run.feature_names else None

    def on_open(event):
        from ..runs.catalog import allowed_path, describe
        from .fitview import FIT_KINDS, StoredFit
        from .stored import StoredRun, pending_run

        show_error("")
        old = session["run"]
        if busy(old):
            show_error("Stop the run or fit this page started before opening another")
            return
        chosen = run_path.value.strip() or run_list.value
        if not chosen:
            show_error("Choose a run from the list, or give its path")
            return
        try:
            path, root = allowed_path(runs, chosen)
            entry = describe(path, root) if os.path.exists(path) else None
            pending = pending_run(entry) if entry is not None else None
            if pending is not None:  # a new run's warmup or staging folder: the page follows the run
                run = StoredRun(pending, root)
            elif entry is None or entry.kind not in ("chains", *FIT_KINDS):
                what = "not a daskgp run" if entry is None else f"a {entry.kind} checkpoint"
                raise ValueError(f"{chosen} is {what}; chains runs (a new one from its warmup on), SGPR, "
                                 "ADVGP, GPC and GPLVM fits and their results files open here")
            else:
                run = StoredRun(path, root) if entry.kind == "chains" else StoredFit(path, root, entry.kind)
        except (ValueError, OSError) as e:
            show_error(f"Cannot open: {e}")
            return
        take_over(old, run)
        if isinstance(run, StoredFit):
            show_fit(run)
        else:
            views.objects = [pn.pane.Markdown("Waiting for the run's first draws…")]
        if not cb.running:
            cb.start()
        refresh()

    def show_fit(run):
        """The views of a fit: its objective, held-out metric and family figures."""
        session["fit_figs"], session["fit_state"] = FitFigures(run.kind, run.what), (run.kind, run.finished)
        B = pn.pane.Bokeh
        state = "finished" if run.finished else "in progress"
        views.objects = [pn.pane.Markdown(f"### {run.kind.upper()} fit {state}: {run.what}"),
                         pn.FlexBox(B(session["fit_figs"].objective),
                                    *([B(session["fit_figs"].heldout), B(session["fit_figs"].nll)]
                                      if run.kind != "gplvm" else []),
                                    *[B(f) for f in session["fit_figs"].extra.values()],
                                    sizing_mode="stretch_width")]

    def on_fit_start(event):
        from .fitjob import FitCapReached, LiveFit

        show_error("")
        old = session["run"]
        if busy(old):
            show_error("Stop the run or fit this page started before starting another")
            return
        folder = None
        try:
            settings = FitJobSettings(
                family=fit_family.value, dataset=fit_data.value, n_inducing=int(fit_m.value),
                max_iter=int(fit_iter.value), seed=int(seed.value),
                scheduler=None if scheduler.value == local else scheduler.value,
                allowed_schedulers=tuple(schedulers)).validate()
            folder = _new_run_folder(os.path.realpath(runs[0]))
            run = LiveFit(settings, folder, os.path.realpath(runs[0]), max_runs)
        except (ValueError, FitCapReached, OSError) as e:
            if folder is not None and not os.listdir(folder):
                os.rmdir(folder)
            show_error(f"Cannot start: {e}")
            return
        take_over(old, run)
        show_fit(run)
        start_b.disabled, pause_b.disabled, stop_b.disabled = True, True, False
        if not cb.running:
            cb.start()
        refresh()

    fit_b.on_click(on_fit_start)

    list_b.on_click(list_runs)
    open_b.on_click(on_open)
    if runs:
        list_runs()
        pn.state.add_periodic_callback(list_runs, period=5000)  # new runs and their progress, every 5 s

    # ---------------------------------------------------------------------------------------- views
    views = pn.Column(pn.pane.Markdown("Start a run to see its chains."), sizing_mode="stretch_width",
                      min_width=400)

    def layout_figures(figs: RunFigures, names):
        B = pn.pane.Bokeh

        def wrap(*items):  # a row that wraps to the width of the window instead of running past it
            return pn.FlexBox(*items, sizing_mode="stretch_width")

        views.objects = [
            pn.pane.Markdown("### Traces (warmup shaded: SGLD before its step froze, SGHMC / MH adapting)"),
            wrap(*[B(figs.trace[nm][0]) for nm in names]),
            pn.pane.Markdown("### Running mean ± 2 sd, and each chain's marginal after warmup"),
            wrap(*[B(figs.run[nm][0]) for nm in names]),
            wrap(*[B(figs.dens[nm][0]) for nm in names]),
            pn.pane.Markdown("### Convergence"),
            wrap(B(figs.psrf[0]), pn.Column(rhat_md, converged, table_md, width=330)),
            pn.pane.Markdown("### Sampler health"),
            wrap(*[B(f) for f, _ in figs.health.values()]),
            pn.pane.Markdown("### Posterior predictive (held-out 10 %)"),
            wrap(B(figs.pred[0]), pn.Column(slice_dim, B(figs.slice[0]))),
            pn.pane.Markdown("**ArviZ's predictive intervals at the held-out points** (plot_ppc_interval:"
                             f" {PPC_REPLICATES} replicated y per draw, {PPC_POINTS} points spread over the "
                             "predictive means; observed values as points)"),
            ppc_pane,
            pn.pane.Markdown("### ArviZ's plots of the kept draws (arviz-plots, Bokeh backend; redrawn as "
                             "blocks commit, at most every 5 s)"),
            az_note,
            *[item for name, title in ARVIZ_PLOTS.items()
              for item in (pn.pane.Markdown(f"**{title}**"), az_panes[name])],
        ]

    # ---------------------------------------------------------------------------------------- refresh
    def refresh():
        run = session["run"]
        if run is None:
            return
        session["tick"] += 1
        if hasattr(run, "trace"):  # a fit opened from disk: its trace, reread on a new commit
            changed = run.refresh()
            status.object = f"**status:** {run.status}" + (f" — {run.message}" if run.message else "")
            writer_md.object = f"**fit:** {run.out}"
            figs = session["fit_figs"]
            if session.get("fit_state") != (run.kind, run.finished):
                show_fit(run)  # a page-started fit that just finished: its results file's views
                figs, changed = session["fit_figs"], True
            live = getattr(run, "running", False)
            stop_b.disabled, start_b.disabled = not live, live
            dl_nc.disabled = dl_csv.disabled = True  # a fit's files are its own (checkpoint, results file)
            if run.trace is not None and (changed or not figs.drawn):  # the sources only when new numbers
                figs.update(run.trace, run.latent, run.staleness)
                figs.update_heldout(run.heldout, run.calibration)
                figs.drawn = True
                counter.object = (f"{len(run.trace)} points of the bound (global iterations and local steps)"
                                  if run.kind == "gplvm" else f"{len(run.trace)} steps")
            return
        if hasattr(run, "refresh"):  # a run opened from disk: reread it when its writer committed
            run.refresh()
            writer_md.object = (f"**run:** {run.out} ({run.describe_settings()}; the settings above are for "
                                f"a new run)" + (f" — written by {run.entry.who}"
                                                 if run.entry is not None and run.entry.who else ""))
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
            session["figs"] = RunFigures(names, set(stats), get_sampler(run.method),
                                         getattr(run.settings, "freeze_threshold", None))
            layout_figures(session["figs"], names)
        figs = session["figs"]
        D = next(iter(post.values())).shape[1]
        counter.object = progress_text(D, run.progress, run.settings.n_iter)
        dl_nc.disabled = dl_csv.disabled = False
        figs.update(post, stats, run.sampling_start())
        diag = run.diagnostics()
        if diag["rhat"]:
            rhat_md.object = rhat_text(diag)
            converged.object = convergence_html(run.progress) or converged.object
            table_md.object = diagnostics_table(diag, names)
            if diag["evolution"] is not None:
                figs.update_psrf(diag["evolution"])
        apply_predictive(figs)
        apply_arviz()
        drawn_at, drawn_t = session["az_drawn"]
        # at most every ARVIZ_EVERY s, and never more than a sixth of the time: drawing holds the GIL, and
        # the page's event loop (its buttons) must stay responsive on a loaded server
        wait = max(ARVIZ_EVERY, 5 * session["az_cost"])
        if D != drawn_at and not session["az_busy"] and time.monotonic() - drawn_t >= wait:
            session["az_busy"], session["az_drawn"] = True, (D, time.monotonic())
            threading.Thread(target=compute_arviz, args=(run,), daemon=True).start()
        if D != session["last_pred"] and not session["pred_busy"]:
            start_predictive(run)
            session["last_pred"] = D

    def compute_predictive(run, dim_name):
        """Background thread: the Cholesky solves of the predictive views stay off the event loop."""
        try:
            pred = run.heldout_predictive(n_draws=10)
            dim = run.feature_names.index(dim_name) if dim_name in run.feature_names else 0
            ppc = heldout_ppc_figure(pred, pred["observed"].values) if pred is not None else None
            session["pred_result"] = (pred, run.slice_predictive(dim, n_draws=10), None, ppc)
        except Exception as e:  # shown in the page; the live views go on
            session["pred_result"] = (None, None, f"{type(e).__name__}: {e}", None)
        finally:
            session["pred_busy"] = False

    def compute_arviz(run):
        """Background thread: ArviZ draws whole new layouts (about a second for three parameters)."""
        t0 = time.monotonic()
        try:
            dt = run.as_run()
            result = (arviz_figures(dt), None) if dt is not None else None
        except ValueError as e:  # too few kept draws yet: said in the page, tried again at the next block
            result = (None, str(e))
        except Exception as e:  # shown in the page; the live views go on
            result = (None, f"{type(e).__name__}: {e}")
        try:
            if session["run"] is run:  # the page may have moved on to another run meanwhile
                session["az_result"] = result
        finally:
            session["az_busy"], session["az_cost"] = False, time.monotonic() - t0
            session["az_drawn"] = (session["az_drawn"][0], time.monotonic())

    def apply_arviz():
        result, session["az_result"] = session["az_result"], None
        if result is None:
            return
        figures, why = result
        az_note.object = f"ArviZ's plots: {why}" if why else ""
        for name, fig in (figures or {}).items():
            az_panes[name].object = fig

    def start_predictive(run):
        session["pred_busy"] = True
        threading.Thread(target=compute_predictive, args=(run, slice_dim.value), daemon=True).start()

    def apply_predictive(figs: RunFigures):
        result, session["pred_result"] = session["pred_result"], None
        if result is None:
            return
        pred, sl, err, ppc = result
        if err:
            show_error(f"Predictive view: {err}")
            return
        figs.update_predictive(pred, sl)
        if ppc is not None:
            ppc_pane.object = ppc

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
        if busy(old):
            return
        folder = None
        try:
            settings = DashboardSettings(
                dataset=dataset.value, upload=session["uploaded"], target=target.value or None,
                kernel=kernel.value, ard=ard.value, method=method.value, n_chains=chains.value,
                n_iter=iterations.value, target_ess=target_ess.value, n_probes=probes.value,
                step_start=float(step_start.value), step_end=float(step_end.value),
                seed=int(seed.value), scheduler=None if scheduler.value == local else scheduler.value,
                allowed_schedulers=tuple(schedulers)).validate()
            # the shared cluster starts in the run's thread: the page answers at once ("starting …")
            folder = _new_run_folder(runs[0]) if runs else None
            run = LiveRun(settings, client=None if settings.scheduler else shared_client, workdir=folder)
            run.start(max_runs)
        except (ValueError, RunCapReached, FileNotFoundError, OSError) as e:
            if folder is not None and not os.listdir(folder):
                os.rmdir(folder)  # a run that never started leaves no folder behind
            show_error(f"Cannot start: {e}")
            return
        take_over(old, run)
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
                      run_list, run_path, pn.Row(open_b, list_b), writer_md, fit_family, fit_data, fit_m,
                      fit_iter, fit_b, width=340)
    return pn.Row(setup, views, sizing_mode="stretch_width")


def _run_label(r) -> str:
    """One line of the runs list: where, what, how far, who writes it."""
    steps = f"{r.steps} of {r.total} draws" if r.total else f"{r.steps} steps"
    who = f", {r.who}" if r.who else ""
    phase = "" if r.phase == r.state else f"{r.phase}, "  # a results file is 'finished' in both
    return f"{r.name} — {r.kind}, {phase}{r.state}, {steps}{who}"


def _new_run_folder(root) -> str:
    """A new folder under the first runs folder for a run the page starts (kept: it can be reopened)."""
    import os
    import secrets
    import time

    path = os.path.join(os.fspath(root), f"dashboard-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}")
    os.makedirs(path)
    return path
