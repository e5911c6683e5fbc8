"""One browser session's dashboard page (:func:`daskgp.interface.app.create_app` builds it): the left column's
settings and controls — start, pause and stop MCMC chains of the GP hyperparameters on the Dask cluster
(:class:`daskgp.interface.dashboard.LiveRun`), open any run or fit under the runs folders read-only
(:mod:`daskgp.runs.catalog`, :mod:`.stored`, :mod:`.fitview`), start a sparse fit as a batch job there
(:mod:`.fitjob`) — and, on the right, the views of what it shows (:class:`.liveviews.LiveViews`), redrawn by
a periodic callback every second on the session's event loop.
"""

from __future__ import annotations

import os
import threading

from ..mcmc.samplers import AUTO, get_sampler, sampler_names
from ..model.kernels import KERNELS
from .dashboard import (
    BUILTIN,
    LIMITS,
    MAX_UPLOAD_COLUMNS,
    MAX_UPLOAD_ROWS,
    DashboardSettings,
    LiveRun,
    RunCapReached,
    default_probes,
    parse_upload,
)
from .fitform import FitForm
from .liveviews import LiveViews, PageState
from .widgets import capped_dropper, setting_inputs

__all__ = ["RunPage"]

LOCAL = "this server's local cluster"


class RunPage:
    """The page: ``max_runs`` concurrent runs across the server's sessions, CSV uploads of at most
    ``max_upload_mb``; ``schedulers`` the dask-scheduler addresses it may choose besides ``local_client``
    (a callable giving the server's shared local cluster); ``runs`` the folders it lists and opens
    read-only, the first receiving the runs and fits it starts (none: its runs live in a temporary folder).
    :meth:`panel` is what Panel serves."""

    def __init__(self, pn, local_client, max_runs: int, max_upload_mb: float, schedulers=(), runs=()):
        self.pn, self.local_client, self.max_runs = pn, local_client, max_runs
        self.schedulers, self.runs = tuple(schedulers), tuple(runs)
        self.state = PageState()
        self.error = pn.pane.Alert("", alert_type="danger", visible=False, css_classes=["run-error"])
        self.views = LiveViews(pn, self.state, self.show_error)
        self._settings_widgets(max_upload_mb)
        self._control_widgets()
        self._disk_widgets()
        self.cb = pn.state.add_periodic_callback(self.refresh, period=1000, start=False)
        pn.state.on_session_destroyed(self.on_destroyed)
        if self.runs:
            self.list_runs()
            pn.state.add_periodic_callback(self.list_runs, period=5000)  # new runs and their progress

    # ------------------------------------------------------------------------------------------ widgets
    def _settings_widgets(self, max_upload_mb: float) -> None:
        pn, d, lim = self.pn, DashboardSettings, LIMITS  # every widget at the settings' default
        self.dataset = pn.widgets.Select(name="Dataset", options=list(BUILTIN) + ["upload"], value=d.dataset)
        self.max_bytes = int(max_upload_mb * 2**20)
        self.upload = capped_dropper(pn, self.max_bytes, self.reject_upload)(
            name="CSV upload", accepted_filetypes=[".csv", "text/csv"], multiple=False,
            max_file_size=f"{max(1, int(max_upload_mb * 1024))}KB", css_classes=["csv-upload"])
        self.upload.param.watch(self.on_upload, "value")
        self.target = pn.widgets.Select(name="Target column", options=[], disabled=True)
        self.kernel = pn.widgets.Select(name="Kernel", options={c.title: nm for nm, c in KERNELS.items()},
                                        value=d.kernel)
        self.ard = pn.widgets.Checkbox(name="ARD (one lengthscale per input)", value=d.ard)
        methods = {"By the data's size (the registry's measured crossovers)": AUTO,
                   **{get_sampler(nm).label: nm for nm in sampler_names()}}
        self.method = pn.widgets.Select(name="Sampler", value=d.method, options=methods)
        self.target_ess = pn.widgets.IntInput(name="Target ESS (0: run every iteration)", value=d.target_ess,
                                              start=lim["target_ess"][0], end=lim["target_ess"][1], step=100)
        self.chains = pn.widgets.IntInput(name="Chains", value=d.n_chains, start=lim["n_chains"][0],
                                          end=lim["n_chains"][1])
        self.iterations = pn.widgets.IntInput(name="Iterations per chain (a cap with a target)",
                                              value=d.n_iter, start=lim["n_iter"][0], end=lim["n_iter"][1],
                                              step=100)
        self.probes = pn.widgets.IntInput(name="Probes N_r", value=d.n_probes, start=lim["n_probes"][0],
                                          end=lim["n_probes"][1])
        # each sampler's own settings, generated from its declaration, shown while it is the chosen method
        self.setting_inputs = setting_inputs(pn, d.method)
        self.method.param.watch(self._on_method, "value")
        self.seed = pn.widgets.IntInput(name="Seed", value=d.seed)
        self.scheduler = pn.widgets.Select(name="Dask cluster", options=[LOCAL, *self.schedulers],
                                           value=LOCAL, visible=bool(self.schedulers))

    def _on_method(self, event) -> None:
        self.probes.value = default_probes(event.new)  # each sampler's own default number of probes
        for nm, inputs in self.setting_inputs.items():
            for w in inputs.values():
                w.visible = nm == event.new

    def _options(self) -> dict:
        """The chosen sampler's settings as the page's inputs hold them (one left empty: the run's)."""
        return {k: w.value for k, w in self.setting_inputs.get(self.method.value, {}).items()
                if w.value is not None}

    def _control_widgets(self) -> None:
        pn = self.pn
        self.start_b = pn.widgets.Button(name="Start", button_type="primary")
        self.pause_b = pn.widgets.Button(name="Pause", button_type="warning", disabled=True)
        self.stop_b = pn.widgets.Button(name="Stop", button_type="danger", disabled=True)
        self.start_b.on_click(self.on_start)
        self.pause_b.on_click(self.on_pause)
        self.stop_b.on_click(self.on_stop)
        self.status = pn.pane.Markdown("**status:** idle", css_classes=["run-status"])
        self.dask_md = pn.pane.Markdown("")

    def _disk_widgets(self) -> None:
        pn, shown = self.pn, bool(self.runs)
        self.run_list = pn.widgets.Select(name="Runs in " + ", ".join(map(str, self.runs)), options={},
                                          size=6, visible=shown, css_classes=["run-list"])
        self.run_path = pn.widgets.TextInput(name="…or a run's path", placeholder="a folder under the runs "
                                             "folders", visible=shown, css_classes=["run-path"])
        self.open_b = pn.widgets.Button(name="Open read-only", visible=shown, css_classes=["open-run"])
        self.list_b = pn.widgets.Button(name="Refresh list", visible=shown)
        self.writer_md = pn.pane.Markdown("", css_classes=["run-writer"])
        # a sparse fit started from the page: the family's own command, a batch job in the first runs folder
        self.fit = FitForm(pn, shown, self.on_fit_start)
        self.list_b.on_click(self.list_runs)
        self.open_b.on_click(self.on_open)

    def panel(self):
        """The page's layout: settings and controls on the left, the views on the right."""
        pn, v = self.pn, self.views
        setup = pn.Column("## daskgp — GP hyperparameter posterior", self.dataset, self.upload, self.target,
                          self.kernel, self.ard, self.method, self.chains, self.target_ess, self.iterations,
                          self.probes, *[w for ws in self.setting_inputs.values() for w in ws.values()],
                          self.seed, self.scheduler,
                          pn.Row(self.start_b, self.pause_b, self.stop_b), self.error, self.status, v.counter,
                          self.dask_md, v.dl_nc, v.dl_csv, self.run_list, self.run_path,
                          pn.Row(self.open_b, self.list_b), self.writer_md, *self.fit.widgets(), width=340)
        return pn.Row(setup, v.column, sizing_mode="stretch_width")

    # ------------------------------------------------------------------------------------------ messages
    def show_error(self, msg: str) -> None:
        self.error.object, self.error.visible = msg, bool(msg)

    def reject_upload(self, msg: str) -> None:
        self.state.uploaded = None
        self.target.options, self.target.disabled = [], True
        self.show_error(f"Upload rejected: {msg}")

    def on_upload(self, event) -> None:
        if not self.upload.value:
            return
        content = next(iter(self.upload.value.values()))
        self.upload.value.clear()  # the page keeps the parsed frame only: the raw bytes go now
        try:
            df = parse_upload(content, self.max_bytes, MAX_UPLOAD_ROWS, MAX_UPLOAD_COLUMNS)
        except ValueError as e:
            self.reject_upload(str(e))
            return
        finally:
            del content
        self.state.uploaded = df
        self.target.options = [str(c) for c in df.columns]
        self.target.value = str(df.columns[-1])
        self.target.disabled = False
        self.dataset.value = "upload"
        self.show_error("")

    # ------------------------------------------------------------------------------------------ what it shows
    def busy(self) -> bool:
        """Whether the page's run (chains) or fit job is still running: nothing else starts or opens."""
        run = self.state.run
        return run is not None and (run.status in ("running", "paused") or getattr(run, "running", False))

    def take_over(self, run) -> None:
        """The page shows ``run`` from now on: the run it showed is closed and its views and plots go."""
        if self.state.run is not None:
            self.state.run.close()
        self.state.show(run)
        self.views.reset(run)

    def _follow(self) -> None:
        if not self.cb.running:
            self.cb.start()

    def list_runs(self, event=None) -> None:
        from ..runs.catalog import find_runs

        try:
            found = find_runs(self.runs)
        except ValueError as e:
            self.show_error(str(e))
            return
        self.run_list.options = {_run_label(r): r.path for r in found}

    def on_open(self, event) -> None:
        from ..runs.catalog import allowed_path, describe
        from .fitview import FIT_KINDS, StoredFit
        from .stored import StoredRun, pending_run

        self.show_error("")
        if self.busy():
            self.show_error("Stop the run or fit this page started before opening another")
            return
        chosen = self.run_path.value.strip() or self.run_list.value
        if not chosen:
            self.show_error("Choose a run from the list, or give its path")
            return
        try:
            path, root = allowed_path(self.runs, chosen)
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
            self.show_error(f"Cannot open: {e}")
            return
        self.take_over(run)
        if isinstance(run, StoredFit):
            self.views.show_fit(run)
        else:
            self.views.message("Waiting for the run's first draws…")
        self._follow()
        self.refresh()

    # ------------------------------------------------------------------------------------------ control
    def _scheduler(self):
        return None if self.scheduler.value == LOCAL else self.scheduler.value

    def on_fit_start(self, event) -> None:
        from .fitjob import FitCapReached, LiveFit

        self.show_error("")
        if self.busy():
            self.show_error("Stop the run or fit this page started before starting another")
            return
        folder = None
        try:
            settings = self.fit.settings(int(self.seed.value), self._scheduler(), self.schedulers)
            folder = _new_run_folder(os.path.realpath(self.runs[0]))
            run = LiveFit(settings, folder, os.path.realpath(self.runs[0]), self.max_runs)
        except (ValueError, FitCapReached, OSError) as e:
            if folder is not None and not os.listdir(folder):
                os.rmdir(folder)
            self.show_error(f"Cannot start: {e}")
            return
        self.take_over(run)
        self.views.show_fit(run)
        self.start_b.disabled, self.pause_b.disabled, self.stop_b.disabled = True, True, False
        self._follow()
        self.refresh()

    def on_start(self, event) -> None:
        self.show_error("")
        if self.busy():
            return
        folder = None
        try:
            settings = DashboardSettings(
                dataset=self.dataset.value, upload=self.state.uploaded, target=self.target.value or None,
                kernel=self.kernel.value, ard=self.ard.value, method=self.method.value,
                n_chains=self.chains.value, n_iter=self.iterations.value, target_ess=self.target_ess.value,
                n_probes=self.probes.value, options=self._options(), seed=int(self.seed.value),
                scheduler=self._scheduler(),
                allowed_schedulers=self.schedulers).validate()
            # the shared cluster starts in the run's thread: the page answers at once ("starting …")
            folder = _new_run_folder(self.runs[0]) if self.runs else None
            run = LiveRun(settings, client=None if settings.scheduler else self.local_client, workdir=folder)
            run.start(self.max_runs)
        except (ValueError, RunCapReached, FileNotFoundError, OSError) as e:
            if folder is not None and not os.listdir(folder):
                os.rmdir(folder)  # a run that never started leaves no folder behind
            self.show_error(f"Cannot start: {e}")
            return
        self.take_over(run)
        self.dask_md.object = "Dask dashboard: link shown once the cluster is up"
        self.status.object = f"**status:** running — {run.stage or 'starting'}…"
        self.views.counter.object = f"0 of {settings.n_iter} draws per chain"
        self.views.message("Waiting for the first draws…")
        self.start_b.disabled, self.pause_b.disabled, self.stop_b.disabled = True, False, False
        self._follow()

    def on_pause(self, event) -> None:
        run = self.state.run
        if run is None:
            return
        if run.status == "running":
            run.pause()
            self.pause_b.name = "Resume"
        elif run.status == "paused":
            run.resume()
            self.pause_b.name = "Pause"
        self.status.object = f"**status:** {run.status}"

    def on_stop(self, event) -> None:
        run = self.state.run
        if run is None:
            return
        self.stop_b.disabled = self.pause_b.disabled = True
        run.stop()
        self.refresh()

    def on_destroyed(self, ctx) -> None:
        run = self.state.run
        if run is not None:
            threading.Thread(target=run.close, daemon=True).start()  # stop its chains, free its workers

    # ------------------------------------------------------------------------------------------ refresh
    def refresh(self) -> None:
        """The periodic callback: the status line and controls, then the views, of what the page shows."""
        run = self.state.run
        if run is None:
            return
        self.state.tick += 1
        if hasattr(run, "trace"):  # a fit: its trace, reread on a new commit
            changed = run.refresh()
            self.status.object = f"**status:** {run.status}" + (f" — {run.message}" if run.message else "")
            self.writer_md.object = f"**fit:** {run.out}"
            live = getattr(run, "running", False)
            self.stop_b.disabled, self.start_b.disabled = not live, live
            self.views.update_fit(run, changed)
            return
        if hasattr(run, "refresh"):  # a run opened from disk: reread it when its writer committed
            run.refresh()
            self.writer_md.object = (f"**run:** {run.out} ({run.describe_settings()}; the settings above are "
                                     f"for a new run)" + (f" — written by {run.entry.who}"
                                                          if run.entry is not None and run.entry.who else ""))
        stage = f" — {run.stage}…" if run.stage and run.status == "running" else ""
        self.status.object = f"**status:** {run.status}{stage}" + (f" — {run.message}" if run.message else "")
        if run.dask_link:
            self.dask_md.object = f"[Dask dashboard]({run.dask_link})"
        if run.status == "failed":
            self.show_error(f"The run failed: {run.message}")
        if run.status not in ("running", "paused"):
            self.start_b.disabled, self.pause_b.disabled, self.stop_b.disabled = False, True, True
            self.pause_b.name = "Pause"
        self.views.update_chains(run)


def _run_label(r) -> str:
    """One line of the runs list: where, what, how far, who writes it."""
    steps = f"{r.steps} of {r.total} draws" if r.total else f"{r.steps} steps"
    who = f", {r.who}" if r.who else ""
    phase = "" if r.phase == r.state else f"{r.phase}, "  # a results file is 'finished' in both
    return f"{r.name} — {r.kind}, {phase}{r.state}, {steps}{who}"


def _new_run_folder(root) -> str:
    """A new folder under the first runs folder for a run the page starts (kept: it can be reopened)."""
    import secrets
    import time

    path = os.path.join(os.fspath(root), f"dashboard-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}")
    os.makedirs(path)
    return path
