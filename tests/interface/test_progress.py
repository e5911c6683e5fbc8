"""The command line's progress lines: tqdm's meter, the chains' live position, a terminal redrawn in place
(with what a longer earlier line left erased), a log one line per update."""

import io

import pytest

from daskgp.core.events import FitEvent
from daskgp.interface.progress import chain_progress, fit_progress
from daskgp.mcmc.diagnostics import RunStatus


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_chain_progress_in_a_log_and_on_a_terminal():
    log = io.StringIO()
    show = chain_progress("sgld", stream=log)
    show(RunStatus(done=100, n_iter=400, elapsed=10.0))
    show(RunStatus(done=100, n_iter=400, elapsed=12.0, running=180))  # between blocks, from the workers
    show(RunStatus(done=400, n_iter=400, elapsed=40.0, rhat=1.004, ess_bulk=380.0, ess_tail=350.0))
    lines = log.getvalue().splitlines()
    assert len(lines) == 3
    assert "| 100/400 [00:10<00:30] per chain" in lines[0] and "R-hat  n/a" in lines[0]
    assert "| 180/400 [" in lines[1]  # the running position, ahead of the committed 100
    assert "| 400/400 [00:40<00:00] per chain" in lines[2] and "ESS 350" in lines[2]
    assert "R-hat 1.004" in lines[2]

    tty = _Terminal()
    show = chain_progress("mh", stream=tty)
    show(RunStatus(done=10, n_iter=20, elapsed=1.0))
    show(RunStatus(done=20, n_iter=20, elapsed=2.0))
    out = tty.getvalue()
    assert out.count("\r") == 2 and out.count("\x1b[K") == 2 and out.endswith("\n")  # final line ends


def test_target_ess_bar_follows_the_ess():
    log = io.StringIO()
    show = chain_progress("sghmc", stream=log)
    show(RunStatus(done=300, n_iter=50_000, elapsed=30.0, ess_bulk=120.0, ess_tail=100.0, target_ess=400,
                   eta=90.0))
    line = log.getvalue()
    assert "| 100/400 [00:30] ESS, 300 iterations per chain" in line and "ETA 01:30" in line


def test_each_phase_has_its_own_line_rate_and_time_left():
    """Adaptation (the first 100 iterations) and sampling each get a line with their own bar and rate; the
    rate is the phase's (between the chains' live reports), not the run's since its set-up; a terminal
    keeps the adaptation line when sampling begins. Power: a rate from the run's start (20 iterations in
    10 s of set-up and chains) would say 2.0 it/s and 00:40 left at iteration 60."""
    log = io.StringIO()
    show = chain_progress("mh", stream=log)
    show(RunStatus(done=20, n_iter=400, elapsed=10.0, warmup_draws=100))
    show(RunStatus(done=20, n_iter=400, elapsed=14.0, warmup_draws=100, running=60))  # 10 it/s
    show(RunStatus(done=100, n_iter=400, elapsed=18.0, warmup_draws=100, running=140))
    show(RunStatus(done=300, n_iter=400, elapsed=30.0, warmup_draws=100))
    a1, a2, s1, s2 = log.getvalue().splitlines()
    assert a1.startswith("mh adaptation |") and "| 20/100 [" in a1
    assert "| 60/100 [00:14<00:04] per chain  10.0 it/s" in a2
    assert s1.startswith("mh sampling |") and "| 40/300 [" in s1 and "20.0 it/s" in s1  # (140-60)/(18-14)
    assert "| 200/300 [00:30<00:06] per chain  15.0 it/s" in s2  # (300-60)/(30-14): 100 left at 15 it/s

    tty = _Terminal()
    show = chain_progress("mh", stream=tty)
    show(RunStatus(done=50, n_iter=200, elapsed=5.0, warmup_draws=100))
    show(RunStatus(done=150, n_iter=200, elapsed=10.0, warmup_draws=100))
    show(RunStatus(done=200, n_iter=200, elapsed=12.0, warmup_draws=100))
    lines = tty.getvalue().split("\n")
    assert len(lines) == 3 and "adaptation" in lines[0] and "sampling" in lines[1] and lines[2] == ""


def test_the_ess_bar_grows_between_commits_from_the_live_position():
    """With a target, between commits the ESS shown is the committed one grown with the kept draws sampled
    since (ESS ∝ kept draws): 100 at 200 kept draws, the chains now at 400 kept ⇒ ≈ 200; at a commit it is
    the committed ESS again, unmarked."""
    log = io.StringIO()
    show = chain_progress("sghmc", stream=log)
    kw = dict(n_iter=50_000, warmup_draws=100, ess_bulk=100.0, ess_tail=120.0, target_ess=400)
    show(RunStatus(done=300, elapsed=30.0, **kw))
    show(RunStatus(done=300, elapsed=40.0, running=500, **kw))
    show(RunStatus(done=500, elapsed=50.0, **{**kw, "ess_bulk": 190.0, "ess_tail": 220.0}))
    c1, live, c2 = log.getvalue().splitlines()
    assert "sampling |" in c1 and "| 100/400 [00:30] ESS, 300 iterations" in c1
    assert "sampling ≈|" in live and "| 200/400 [00:40] ESS, 500 iterations" in live
    assert "≈" not in c2 and "| 190/400 [00:50] ESS" in c2


def _event(step: int, name: str = "log Z", **values) -> FitEvent:
    return FitEvent("sep", step, -10.0 * step, name, 0.1 * step, values=values)


def test_a_fits_progress_every_tenth_step_in_a_log():
    """One printer for every family's FitEvent: the title, the steps, the objective by its name, the shown
    values, and the held-out metric every tenth step and at the last."""
    log = io.StringIO()
    show = fit_progress(20, "SEP", metric=lambda ev: 0.05, metric_name="held-out error", stream=log)
    for it in range(1, 21):
        show(_event(it, train_error=0.1, grad_norm=3.0))
    show.done()
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "SEP |" in lines[0] and "| 20/20 [" in lines[1]
    assert "log Z      -200.00  train error 0.1000  held-out error 0.0500" in lines[1]
    assert "grad" not in lines[1]  # values outside SHOWN_VALUES stay in the event


def test_a_fits_progress_every_step_when_asked():
    log = io.StringIO()
    show = fit_progress(5, "L-BFGS-B", every=1, stream=log)
    for it in range(1, 6):
        show(_event(it, name="bound"))
    assert len(log.getvalue().splitlines()) == 5 and "bound " in log.getvalue()


# the swallowed raise is the point of the test
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_swallowed_ctrl_c_is_raised_again_by_the_next_progress_update():
    """The SIGINT handler's KeyboardInterrupt can land where Python swallows exceptions (CI saw it inside
    distributed's gc callback: "Exception ignored in …", and the fit ran on to exit 0). The handler marks
    the interrupt pending; the next progress update on the main thread raises it again, and a command that
    caught it (ignore_further_interrupts) or ended (interrupt_once's restore) clears it. The swallowed
    KeyboardInterrupt is not printed ("Exception ignored in …" and a traceback, which failed a CI run of the
    double Ctrl-C test); any other unraisable exception still is."""
    import gc
    import os
    import signal
    import sys

    from daskgp.interface.cli.common import ignore_further_interrupts, interrupt_once

    def in_gc_raising(make):
        def callback(phase, info):
            if phase == "start":
                make()

        gc.callbacks.append(callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(callback)

    def bad():
        raise ValueError("a real bug")

    printed = []
    show = fit_progress(10, "L-BFGS-B", every=1, stream=io.StringIO())
    previous, previous_hook = signal.getsignal(signal.SIGINT), sys.unraisablehook
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.unraisablehook = lambda info: printed.append(info.exc_type)
    restore = interrupt_once()
    try:
        # the signal arrives while a gc callback runs: Python swallows the raise
        in_gc_raising(lambda: os.kill(os.getpid(), signal.SIGINT))
        assert printed == []
        with pytest.raises(KeyboardInterrupt):
            show(_event(1, name="bound"))
        ignore_further_interrupts()  # the command caught it
        show(_event(2, name="bound"))  # nothing pending any more
        in_gc_raising(bad)
        assert printed == [ValueError]
    finally:
        restore()
        signal.signal(signal.SIGINT, previous)
        hook_after, sys.unraisablehook = sys.unraisablehook, previous_hook
    assert hook_after is not previous_hook and hook_after.__name__ == "<lambda>"  # the caller's hook is back
    show(_event(3, name="bound"))


def test_the_warmup_lines_of_the_exact_map_and_of_the_ascent():
    """The CLI's warmup lines in a log (one per event): a small data set's exact MAP, and a large one's
    ascent with its own rate and an upper bound on the time left (the ascent stops early as a rule)."""
    from daskgp.interface.progress import warmup_progress

    def lines(events):
        log = io.StringIO()
        show = warmup_progress(stream=log)
        for ev in events:
            show({"cap": 1, "seconds": 0.0, "total": 0.0, **ev})
        return log.getvalue().splitlines()

    assert lines([{"stage": "subset MAP", "k": 0}, {"stage": "exact MAP", "k": 0, "n": 1030},
                  {"stage": "done", "k": 0, "seconds": 4.2, "route": "exact"}]) == [
        "warmup: MAP and Laplace covariance of a random subset",
        "warmup: MAP and Laplace covariance of all 1,030 rows (Cholesky)",
        "warmup: done in 00:04 (the exact MAP and Laplace covariance, Cholesky)"]
    got = lines([{"stage": "ascent", "k": 0, "cap": 400},
                 {"stage": "ascent", "k": 100, "cap": 400, "seconds": 50},
                 {"stage": "curvature", "k": 7, "cap": 14, "seconds": 7},
                 {"stage": "done", "k": 180, "seconds": 200, "route": "ascent", "converged": True}])
    assert got[0].startswith("warmup: ascent |") and got[0].endswith("(its first gradient)"), got
    assert "0.50 s/gradient  ≤ " in got[1] and got[1].endswith("left"), got
    assert "1.00 s/gradient" in got[2] and "≤" not in got[2], got
    assert got[3].endswith("(180 gradients of stochastic ascent and curvature, converged)"), got


def test_a_failed_or_unconverged_warmup_says_so_and_never_claims_an_exact_map():
    """Issue 55: the held-out 8,192-row run's ascent diverged and the line said 'done (the exact MAP)'. A
    failed ascent's line gives the reason and what the chains start from instead; one stopped at its cap
    says it did not converge; the ascent's retreats each get a line of their own; no ascent line mentions
    an exact MAP."""
    from daskgp.interface.progress import warmup_progress

    log = io.StringIO()
    show = warmup_progress(stream=log)
    for ev in [{"stage": "ascent", "k": 3, "cap": 400, "seconds": 30},
               {"stage": "ascent", "k": 4, "cap": 400, "seconds": 40,
                "note": "the ascent stepped back: gradient 4 failed at φ=[9.0, 1.0, -9.0] (...)"},
               {"stage": "done", "k": 5, "seconds": 50, "route": "ascent",
                "failed": "the ascent failed after 5 gradients: FloatingPointError: ..."}]:
        show({"cap": 1, "total": 0.0, **ev})
    got = log.getvalue().splitlines()
    assert got[1] == "warmup: the ascent stepped back: gradient 4 failed at φ=[9.0, 1.0, -9.0] (...)", got
    assert got[2].startswith("warmup: the ascent failed after 5 gradients: FloatingPointError"), got
    assert "the chains start instead from the subset MAP" in got[2], got
    log = io.StringIO()
    show = warmup_progress(stream=log)
    show({"stage": "done", "k": 400, "cap": 1, "seconds": 9.0, "total": 9.0, "route": "ascent",
          "converged": False})
    assert log.getvalue().strip().endswith("stopped at its cap, not converged)"), log.getvalue()
    assert "exact" not in log.getvalue()


def test_the_held_out_metric_is_handed_on_when_it_is_computed():
    """fit_progress calls on_metric(event, value) exactly when it computes the held-out metric (every 10th
    step and the last), which the command line logs beside the checkpoint."""
    seen = []
    show = fit_progress(25, "ADVGP", metric=lambda ev: 3.0, metric_name="test RMSE", stream=io.StringIO(),
                        on_metric=lambda ev, v: seen.append((ev.step, v)))
    for v in range(1, 26):
        show(_event(v, "-ELBO", staleness=1))
    assert seen == [(10, 3.0), (20, 3.0), (25, 3.0)]
    seen.clear()
    show = fit_progress(12, "EP", metric=lambda ev: 0.25, stream=io.StringIO(),
                        on_metric=lambda ev, v: seen.append((ev.step, v)))
    for it in range(1, 13):
        show(_event(it, train_error=0.3))
    assert seen == [(10, 0.25), (12, 0.25)]


def test_a_quiet_phase_gets_a_line_at_least_every_quiet_max_seconds():
    """Issue 55, item 2: every phase prints a line at least every 30 s. Under ``keepalive`` a progress line
    not followed by another within the interval (0.3 s here, 30 s in use) is shown again with how long
    nothing was reported — a reminder, never a claim of progress — and nothing is written once the context
    has closed. Power: a stream outside the context gets no reminder."""
    import time

    from daskgp.interface.progress import keepalive, warmup_progress

    log = io.StringIO()
    with keepalive(log, every=0.3):
        show = warmup_progress(stream=log)
        show({"stage": "ascent", "k": 3, "cap": 400, "seconds": 90.0, "total": 90.0})
        time.sleep(1.2)
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("warmup: ascent |"), lines
    reminders = lines[1:]
    assert len(reminders) >= 2 and all(r.startswith(lines[0] + "  [no report for 00:0") for r in reminders)
    n = len(lines)
    time.sleep(0.6)
    assert len(log.getvalue().splitlines()) == n  # closed: silent
    other = io.StringIO()
    show = warmup_progress(stream=other)
    show({"stage": "ascent", "k": 3, "cap": 400, "seconds": 90.0, "total": 90.0})
    time.sleep(0.6)
    assert len(other.getvalue().splitlines()) == 1


def test_a_slow_solve_beats_with_its_cg_iterations_during_one_gradient(concrete, monkeypatch):
    """Issue 55, item 2, with a slowed product: one gradient whose every operator pass takes 30 ms (a long
    solve in miniature) sends the warmup's progress events while it runs, each with the CG iterations so
    far ('cg', increasing), at the heartbeat interval (0.1 s here, 10 s in use); the warmup line shows them.
    Power: with the heartbeat unset (``on_solve`` None) the same gradient sends nothing."""
    import time

    import numpy as np

    import daskgp.mcmc.ticker as ticker
    from daskgp import KernelOperator, make_kernel
    from daskgp.exact.posterior import GPPosterior
    from daskgp.interface.progress import warmup_progress

    class Slow(KernelOperator):
        def matmul(self, V):
            time.sleep(0.03)
            return super().matmul(V)

        def with_log_params(self, lp):
            new = super().with_log_params(lp)
            new.__class__ = Slow
            return new

    events = []

    class Worker:
        def log_event(self, topic, msg):
            events.append(msg)

    monkeypatch.setattr(ticker, "HEARTBEAT_EVERY", 0.1)
    X, y = concrete.X_std[:300], concrete.y_std[:300]

    def gradient(beat: bool):
        events.clear()
        tick = ticker.WarmupTicker("t")
        tick.worker = Worker()
        tick.stage("ascent", 400)
        post = GPPosterior(Slow(X, make_kernel("rbf"), 0.3, mode="local"), y, n_probes=4, redraw_every=1,
                           rng=0, solver="cg", tol=1e-10)
        post.on_solve = tick.beat if beat else None
        post.stochastic_grad(np.array([0.0, 0.0, -1.0]), 0)
        return [e for e in events if "cg" in e]

    beats = gradient(beat=True)
    assert len(beats) >= 3 and [e["cg"] for e in beats] == sorted({e["cg"] for e in beats}), beats
    log = io.StringIO()
    warmup_progress(stream=log)({**beats[-1], "seconds": 1.0, "total": 1.0})
    assert log.getvalue().strip().endswith(f"(gradient 1: {beats[-1]['cg']} CG iterations so far)")
    assert gradient(beat=False) == []
