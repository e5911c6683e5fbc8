"""Progress lines on stderr for the command line: the chains' iterations (between committed blocks too, from
the workers' progress events), R-hat, ESS and time per effective sample; the sparse fit's L-BFGS-B
iterations and bound; ADVGP's updates; the classifier's EP iterations. The bars, counts and times are tqdm's
(``tqdm.format_meter``); a terminal redraws one line in place, a log file gets one line per update."""

from __future__ import annotations

import sys
import time

__all__ = ["chain_progress", "warmup_progress", "fit_progress",
           "keepalive", "QUIET_MAX"]


# A Ctrl-C whose KeyboardInterrupt is raised where Python swallows exceptions (a gc callback, a destructor:
# "Exception ignored in …") is lost, and with later presses ignored the command ran on to the end (seen in
# CI: distributed's GC diagnosis callback took it). The SIGINT handler marks the interrupt pending, the
# command's except-block clears it, and every progress update re-raises one still pending at a safe point.
_INTERRUPT = {"pending": False}


def note_interrupt(pending: bool) -> None:
    """Mark a Ctrl-C as raised (True, by the SIGINT handler) or as caught by the command (False)."""
    _INTERRUPT["pending"] = pending


def raise_pending_interrupt() -> None:
    """Raise KeyboardInterrupt if a Ctrl-C was raised and never reached the command (swallowed); only on
    the main thread, where the command runs (progress from the client's event thread passes)."""
    import threading

    if _INTERRUPT["pending"] and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt


def _meter(n: float, total: float, elapsed: float, tty: bool, remaining: bool = True,
           rate: float | None = None) -> str:
    """tqdm's bar, count and [elapsed<remaining] (``remaining`` False: elapsed only), Unicode blocks on a
    terminal, ASCII in a log; ``rate`` (per second) overrides tqdm's n / elapsed for the time remaining."""
    from tqdm import tqdm

    tail = "[{elapsed}<{remaining}]" if remaining else "[{elapsed}]"
    return tqdm.format_meter(min(n, total), total, elapsed, ascii=not tty, rate=rate,
                             bar_format="|{bar:30}| {n_fmt}/{total_fmt} " + tail)


def _show_line(stream, tty: bool, line: str, final: bool = False) -> None:
    """A terminal redraws the line in place (a newline after the final one), erasing what a longer line
    before it left to the right; a log gets one line each."""
    stream.write(("\r" + line + "\x1b[K") if tty else line + "\n")
    if tty and final:
        stream.write("\n")
    stream.flush()
    guard = _KEEPALIVE.get(id(stream))
    if guard is not None:
        guard.shown(line, final)


# The longest a phase may go without a line (seconds): a gradient on 22,784 rows takes half a minute, and a
# held-out run once sat five minutes in one solve with nothing printed.
QUIET_MAX = 30.0
_KEEPALIVE: dict = {}


class keepalive:
    """A context in which ``stream`` gets a line at least every :data:`QUIET_MAX` seconds: when no progress
    line was shown for that long, the last one is shown again with how long nothing has been reported
    (never a claim of progress). Used by the command line around a run; the progress callbacks of this
    module report each line they show to it."""

    def __init__(self, stream=None, every: float | None = None):
        import threading

        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = QUIET_MAX if every is None else float(every)
        self.line, self.final, self.t = None, False, time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="daskgp-keepalive", daemon=True)

    def shown(self, line: str, final: bool) -> None:
        with self._lock:
            self.line, self.final, self.t = line, final, time.monotonic()

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            with self._lock:
                quiet = time.monotonic() - self.t
                if self.line is None or quiet < self.every:
                    continue
                line, final = self.line, self.final
                self.t = time.monotonic()
            text = f"{line}  [no report for {_duration(quiet)}]"
            if self.tty and final:  # a finished phase keeps its line: the reminder goes below it
                self.stream.write(text + "\x1b[K\r")
                self.stream.flush()
            else:
                self.stream.write(("\r" + text + "\x1b[K") if self.tty else text + "\n")
                self.stream.flush()

    def __enter__(self):
        _KEEPALIVE[id(self.stream)] = self
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        _KEEPALIVE.pop(id(self.stream), None)


def _line_ender(stream, tty: bool):
    """``done()``: ends a line redrawn in place on a terminal (a log has its newlines already)."""
    def done():
        if tty:
            stream.write("\n")
    return done


def _duration(seconds: float) -> str:
    from tqdm import tqdm

    return tqdm.format_interval(seconds)


def chain_progress(method: str, stream=None):
    """``show(status)`` — the ``progress`` callback of :func:`daskgp.mcmc.chains.sample`, given a
    :class:`daskgp.mcmc.diagnostics.RunStatus`: one line per phase of the chains — adaptation (the warmup's
    iterations, ``status.warmup_draws``), then sampling — each with its own bar, rate (iterations per second
    in that phase, from the chains' live position between commits) and time left at that rate; a terminal
    keeps the finished phase's line. Beside the bar: R-hat, the smallest bulk/tail ESS, seconds per
    effective sample, the chains that stopped. With an ESS target the sampling bar counts effective
    samples; between commits it is the committed ESS grown in proportion to the draws sampled since
    (marked ≈), ESS growing linearly with the kept draws, and the time left is the run's own estimate."""
    stream = stream or sys.stderr
    tty = stream.isatty()
    seen = {"phase": None, "start": None, "last": None}  # the phase shown, its first and last (at, elapsed)

    def rate_in_phase(at: int, elapsed: float) -> float | None:
        a0, e0 = seen["start"]
        if at > a0 and elapsed > e0:
            return (at - a0) / (elapsed - e0)
        # the phase's first report: the whole run's rate so far (its set-up included) until a second one
        return at / elapsed if at and elapsed > 0 else None

    def show(st):
        raise_pending_interrupt()
        r = "R-hat  n/a" if st.rhat is None else f"R-hat {st.rhat:5.3f}"
        at = max(st.done, st.running or 0)
        W = min(st.warmup_draws, st.n_iter)
        phase = "adaptation" if W and at <= W and st.done < W else "sampling"
        if phase != seen["phase"]:
            if seen["phase"] is not None and tty:
                stream.write("\n")  # the finished phase keeps its line
            # the phase's clock starts where the last one ended (the first phase's at its first report)
            seen.update(phase=phase, start=seen["last"] or (at, st.elapsed))
        seen["last"] = (at, st.elapsed)
        rate = rate_in_phase(at, st.elapsed)
        stopped = f"  stopped: {','.join(sorted(st.messages))}" if st.messages else ""
        ps = f"  {rate:.1f} it/s" if rate else ""
        if phase == "adaptation":
            meter = f"{_meter(at, W, st.elapsed, tty, rate=rate)} per chain"
            line = f"{method} adaptation {meter}{ps}{stopped}"
        elif st.target_ess is not None:  # the bar follows the ESS; the time to go is the run's own estimate
            ess, approx = (0.0 if st.ess is None else st.ess), ""
            if st.ess and st.running and st.running > st.done > W:
                ess, approx = st.ess * (st.running - W) / (st.done - W), "≈"
            meter = _meter(int(ess), st.target_ess, st.elapsed, tty, remaining=False)
            eta = f"  ETA {_duration(st.eta)}" if st.eta and not st.converged else ""
            spe = f"  {st.sec_per_ess:.2f} s/ESS" if st.sec_per_ess else ""
            line = (f"{method} sampling {approx}{meter} ESS, {at} iterations per chain{ps}  {r}{spe}{eta}"
                    f"{stopped}")
        else:
            meter = f"{_meter(at - W, st.n_iter - W, st.elapsed, tty, rate=rate)} per chain"
            ess = f"  ESS {st.ess:.0f}" if st.ess is not None else ""
            spe = f"  {st.sec_per_ess:.2f} s/ESS" if st.sec_per_ess else ""
            line = f"{method} sampling {meter}{ps}{ess}  {r}{spe}{stopped}"
        final = st.running is None and (st.done >= st.n_iter or (st.target_ess is not None and st.converged))
        _show_line(stream, tty, line, final=final)

    return show


def warmup_progress(stream=None):
    """``show(event)`` — the ``on_warmup`` callback of :func:`daskgp.mcmc.chains.sample`: one line per
    warmup stage (the subset MAP; the exact MAP of a small data set, or the ascent, the curvature, …) with
    the stage's gradients against its cap, its own rate and the time left at that rate (an ascent usually
    stops before its cap: its time left is an upper bound, marked ≤). A terminal redraws the line; a log
    gets a line per update."""
    stream = stream or sys.stderr
    tty = stream.isatty()
    shown = {"stage": None}

    def show(ev):
        stage, k, cap, sec = str(ev["stage"]), int(ev["k"]), max(int(ev["cap"]), 1), float(ev["seconds"])
        if ev.get("note"):  # something the user must read (the ascent stepped back): a line of its own
            if tty and shown["stage"] is not None:
                stream.write("\n")
            _show_line(stream, tty, f"warmup: {ev['note']}", final=True)
            shown["stage"] = None
            return
        if shown["stage"] is not None and stage != shown["stage"] and tty:
            stream.write("\n")  # the finished stage keeps its line
        shown["stage"] = stage
        if stage == "subset MAP":
            line = "warmup: MAP and Laplace covariance of a random subset"
        elif stage == "exact MAP":
            line = f"warmup: MAP and Laplace covariance of all {int(ev['n']):,} rows (Cholesky)"
        elif stage == "done":
            if ev.get("failed"):
                line = (f"warmup: {ev['failed']}; the chains start instead from the subset MAP in its "
                        f"Laplace covariance scaled by subset/n ({_duration(sec)})")
            elif ev.get("route") == "ascent":
                how = "converged" if ev.get("converged") else "stopped at its cap, not converged"
                line = (f"warmup: done in {_duration(sec)} ({k} gradients of stochastic ascent and "
                        f"curvature, {how})")
            else:
                line = f"warmup: done in {_duration(sec)} (the exact MAP and Laplace covariance, Cholesky)"
            _show_line(stream, tty, line, final=True)
            return
        else:
            rate, left = "  (its first gradient)", ""
            ran = k - int(ev.get("k0", 0))  # a resumed stage's rate counts this run's gradients only
            if ran > 0:
                at_most = "≤ " if stage.startswith("ascent") else ""
                rate = f"  {sec / ran:.2f} s/gradient"
                left = f"  {at_most}{_duration((cap - k) * sec / ran)} left"
            solving = f"  (gradient {k + 1}: {int(ev['cg'])} CG iterations so far)" if "cg" in ev else ""
            meter = _meter(k, cap, sec, tty, remaining=False)
            line = f"warmup: {stage} {meter} gradients{rate}{left}{solving}"
        _show_line(stream, tty, line)

    show.done = _line_ender(stream, tty)
    return show


# the step's values a progress line shows, with their formats (FitEvent.values holds more)
SHOWN_VALUES = {"staleness": "{:d}", "train_error": "{:.4f}"}


def fit_progress(total: int, title: str, metric=None, metric_name: str = "", metric_format: str = "{:.4f}",
                 every: int = 10, stream=None, on_metric=None):
    """``show(event)`` — the ``callback`` of every estimator's ``fit`` (a :class:`daskgp.FitEvent`): the
    title, steps against ``total``, the objective (nats) under its name and the values of
    :data:`SHOWN_VALUES` the step has; every ``every`` steps and at the last, ``metric(event)`` (a held-out
    measure of ``event.model``, named ``metric_name``), handed to ``on_metric(event, value)`` too. A
    terminal redraws one line at every step; a log gets a line every ``every`` steps and at the last.
    ``show.done()`` ends the line."""
    stream = stream or sys.stderr
    tty = stream.isatty()
    last = {"metric": None}

    def show(ev):
        raise_pending_interrupt()
        due = ev.step % every == 0 or ev.step == total
        if metric is not None and due:
            last["metric"] = metric(ev)
            if on_metric is not None:
                on_metric(ev, last["metric"])
        shown = "".join(f"  {name.replace('_', ' ')} {fmt.format(ev.values[name])}"
                        for name, fmt in SHOWN_VALUES.items() if name in ev.values)
        held = "" if last["metric"] is None else f"  {metric_name} {metric_format.format(last['metric'])}"
        line = (f"{title} {_meter(ev.step, total, ev.seconds, tty)}  {ev.objective_name} "
                f"{ev.objective:12.2f}{shown}{held}")
        if tty or due:
            _show_line(stream, tty, line)

    show.done = _line_ender(stream, tty)
    return show
