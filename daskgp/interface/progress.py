"""Progress lines on stderr for the command line: the chains' iterations and R-hat, and the sparse fit's
L-BFGS-B iterations and bound. A terminal redraws one line in place; a log file gets one line per update."""

from __future__ import annotations

import sys
import time

__all__ = ["chain_progress", "bound_progress"]


def _bar(frac: float) -> str:
    k = int(30 * min(1.0, max(0.0, frac)))
    return "#" * k + "." * (30 - k)


def _show_line(stream, tty: bool, line: str, final: bool = False) -> None:
    """A terminal redraws the line in place (a newline after the final one); a log gets one line each."""
    stream.write(("\r" + line) if tty else line + "\n")
    if tty and final:
        stream.write("\n")
    stream.flush()


def chain_progress(method: str, stream=None):
    """``show(done (chains,), n_iter, rhat | None, messages)`` — the ``progress`` callback of
    :func:`daskgp.mcmc.chains.sample`: iterations per chain, the current R-hat, elapsed seconds and the
    chains that stopped."""
    stream = stream or sys.stderr
    tty = stream.isatty()
    t0 = time.perf_counter()

    def show(done, n_iter, rhat, messages):
        r = "  R-hat  n/a" if rhat is None else f"  R-hat {rhat:5.3f}"
        per = " ".join(str(d) for d in done)
        stopped = f"  stopped: {','.join(sorted(messages))}" if messages else ""
        line = (f"{method} [{_bar(min(done) / n_iter)}] {min(done)}/{n_iter} per chain ({per}){r}"
                f"  {time.perf_counter() - t0:.0f} s{stopped}")
        _show_line(stream, tty, line, final=min(done) >= n_iter)

    return show


def bound_progress(max_iter: int, stream=None):
    """``show(iteration, bound)`` — the ``callback`` of :meth:`daskgp.SparseGPRegressor.fit`: L-BFGS-B
    iterations and the bound (nats); ``show.done()`` ends the line."""
    stream = stream or sys.stderr
    tty = stream.isatty()
    t0 = time.perf_counter()

    def show(it, bound):
        line = (f"L-BFGS-B [{_bar(it / max_iter)}] {it}/{max_iter}  bound {bound:12.2f}"
                f"  {time.perf_counter() - t0:.0f} s")
        _show_line(stream, tty, line)

    def done():
        if tty:
            stream.write("\n")

    show.done = done
    return show
