"""The Panel dashboard: start MCMC chains of the GP hyperparameters on the Dask cluster and watch them mix,
live, until they reach their target ESS.

``create_app()`` builds one session's page (:class:`daskgp.interface.page.RunPage`) around a
:class:`daskgp.interface.dashboard.LiveRun`; the chains run in a background thread on the cluster and a
periodic callback (every second, on the session's event loop) redraws the Bokeh views
(:mod:`daskgp.interface.liveviews`) from the draws received so far. With runs folders (``--runs``) the page
also lists and opens any run or fit under them read-only (:mod:`daskgp.runs.catalog`, :mod:`.stored`,
:mod:`.fitview`) and starts sparse fits as batch jobs there (:mod:`.fitjob`). Serve it with
``daskgp dashboard`` (127.0.0.1 by default) or ``panel serve apps/sgld_dashboard.py``.
"""

from __future__ import annotations

import threading

from .dashboard import MAX_RUNS, MAX_UPLOAD_MB
from .page import RunPage

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
    return RunPage(pn, shared_client, max_runs, max_upload_mb, schedulers, runs).panel()
