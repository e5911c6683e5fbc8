"""A sparse fit started from the dashboard (issue 35, item 3): the page runs the family's own command —
``daskgp sgpr``, ``daskgp advgp`` or ``daskgp gpc`` — as a batch job in a process group of its own, writing
into a new folder under the first runs folder, and shows it through the same read-only view as any fit on
disk (:class:`daskgp.interface.fitview.StoredFit`): its checkpoint while it runs, its results file once it
has finished. So a fit started from the page is exactly a fit started in a terminal: the same files, the same
checkpoints (Stop is Ctrl-C: the fit stays resumable with ``--resume``), reopened after the page closes.

Nothing the page sends reaches a shell: the command is an argument list built from validated settings — a
family and a built-in dataset from fixed lists, bounded integers, a scheduler address only from those the
server was started with. The job's terminal output goes to ``fit.log`` beside its files; the page shows its
last line (the command's own progress line).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass

from ..datasets.classification import CLASSIFICATION
from ..inference.settings import checked_settings, flag_name
from ..runs.commit import CHECKPOINT
from .fitkinds import fit_kind
from .fitview import StoredFit

__all__ = ["FIT_DATASETS", "FIT_LIMITS", "FitJobSettings", "LiveFit", "FitCapReached"]

# what each family can fit from the page: the built-in sets its command reads (the GPLVM has no command)
FIT_DATASETS = {"sgpr": ("concrete", "house_8L", "power_plant", "flights"),
                "advgp": ("concrete", "house_8L", "power_plant", "flights"),
                "gpc": CLASSIFICATION}
FIT_LIMITS = {"n_inducing": (5, 2000), "max_iter": (1, 100_000), "seed": (0, 2**31 - 1)}
LOG = "fit.log"
RESULTS = "fit.nc"


class FitCapReached(RuntimeError):
    """As many page-started fits are running as the server allows."""


@dataclass(frozen=True)
class FitJobSettings:
    """A fit the page may start: ``family`` (sgpr, advgp, gpc), ``dataset`` (one of
    :data:`FIT_DATASETS`' for it), ``n_inducing`` m, ``max_iter`` (L-BFGS-B iterations, server updates or
    EP iterations), ``seed``, ``scheduler`` (None: the job's own local cluster of one worker; else one of
    ``allowed_schedulers``), ``method`` (one of the family's registered methods —
    :meth:`daskgp.interface.fitkinds.FitKind.methods`: GPC's classifier updates, ADVGP's server updates —
    passed by the family's flag; None: the command's default) and ``options`` (that method's own
    settings, (name, value) pairs checked against its declarations and passed as the command's flags)."""

    family: str = "sgpr"
    dataset: str = "concrete"
    n_inducing: int = 50
    max_iter: int = 100
    seed: int = 0
    scheduler: str | None = None
    allowed_schedulers: tuple = ()
    method: str | None = None
    options: tuple = ()

    def validate(self) -> FitJobSettings:
        """Self, or ValueError in one line naming the setting."""
        if self.family not in FIT_DATASETS:
            raise ValueError(f"no fit of family {self.family!r} starts from the page (one of "
                             f"{', '.join(FIT_DATASETS)})")
        if self.dataset not in FIT_DATASETS[self.family]:
            raise ValueError(f"{self.family} fits one of {', '.join(FIT_DATASETS[self.family])}, not "
                             f"{self.dataset!r}")
        for name, (lo, hi) in FIT_LIMITS.items():
            v = getattr(self, name)
            if type(v) is not int or not lo <= v <= hi:
                raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
        if self.method is not None:
            methods = fit_kind(self.family).methods()
            if methods is None:
                offered = [k for k in FIT_DATASETS if fit_kind(k).methods() is not None]
                raise ValueError(f"a {self.family} fit takes no method (only {' and '.join(offered)} do)")
            if self.method not in methods.names():
                raise ValueError(f"method {self.method!r} is not a registered {methods.what} (one of "
                                 f"{', '.join(methods.names())})")
            checked_settings(methods.get(self.method).settings, dict(self.options),
                             f"the {self.method!r} {methods.what}")
        elif self.options:
            raise ValueError("a method's settings need the method they belong to")
        if self.scheduler is not None and self.scheduler not in self.allowed_schedulers:
            raise ValueError(f"scheduler {self.scheduler!r} is not one this server may use")
        return self

    def argv(self, out: str) -> list[str]:
        """The command's arguments (no shell), results to ``out``."""
        cluster = ["--scheduler", self.scheduler] if self.scheduler else ["--workers", "1"]
        return [sys.executable, "-m", "daskgp", self.family, "--data", self.dataset, "--inducing",
                str(self.n_inducing), "--max-iter", str(self.max_iter), "--seed", str(self.seed), *cluster,
                *([fit_kind(self.family).method_flag, self.method] if self.method is not None else []),
                *[a for k, v in self.options for a in (flag_name(k), str(v))], "--out", out]


_live: set = set()  # the fit jobs running now, across the server's sessions
_live_lock = threading.Lock()


class LiveFit(StoredFit):
    """A fit job the page started in ``folder`` (new, under ``root``), shown as its checkpoint while it runs
    and its results file once it finished. ``stop()`` interrupts it as Ctrl-C does (the checkpoint stays;
    the command with ``--resume`` continues it); ``close()`` stops it too."""

    def __init__(self, settings: FitJobSettings, folder: str, root: str, max_jobs: int):
        self.settings, self.folder = settings.validate(), folder
        self.results = os.path.join(folder, RESULTS)
        with _live_lock:
            for job in list(_live):
                if job.proc.poll() is not None:
                    _live.discard(job)
            if len(_live) >= max_jobs:
                raise FitCapReached(f"{max_jobs} fits started from pages are running; stop one first")
            with open(os.path.join(folder, LOG), "wb") as log:
                self.proc = subprocess.Popen(settings.argv(self.results), stdout=log,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True, env=os.environ.copy())
            _live.add(self)
        super().__init__(self.results + ".checkpoint", root, settings.family)

    @property
    def running(self) -> bool:
        """Whether the job's process is still running."""
        return self.proc.poll() is None

    def last_line(self) -> str:
        """The job's last line of output (its progress line, redrawn with carriage returns), ≤ 300 chars."""
        try:
            with open(os.path.join(self.folder, LOG), "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
                tail = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        parts = [p.strip() for p in tail.replace("\r", "\n").split("\n") if p.strip()]
        return parts[-1][:300] if parts else ""

    def refresh(self) -> bool:
        rc = self.proc.poll()
        if rc == 0 and os.path.isfile(self.results) and not self.finished:  # done: its results file now
            self.out, self.finished, self.trace, self._seen = self.results, True, None, None
        committed = os.path.exists(self.out if self.finished else os.path.join(self.out, CHECKPOINT))
        if not committed:  # the cluster starting, the data loading: no step committed yet
            self.trace = None
            if rc is None:
                self.status = f"{self.kind} fit running (PID {self.proc.pid}) — starting: {self.last_line()}"
            else:
                self.status, self.message = "failed", self.last_line() or f"the fit ended with status {rc}"
            return False
        changed = super().refresh()
        if rc is None:
            self.status = f"{self.kind} fit running (PID {self.proc.pid}) — {self.last_line()}"
        elif rc == 130:
            self.status = (f"{self.kind} fit stopped: its checkpoint {self.out} continues with "
                           f"`daskgp {self.kind} … --resume`")
        elif rc != 0:
            self.status, self.message = "failed", self.last_line() or f"the fit ended with status {rc}"
        return changed

    def stop(self, wait: float = 30.0) -> None:
        """Interrupt the job as Ctrl-C would (its checkpoint stays), and wait up to ``wait`` s for it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        with _live_lock:
            _live.discard(self)

    def close(self) -> None:
        self.stop()
        super().close()

