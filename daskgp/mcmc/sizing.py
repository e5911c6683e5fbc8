"""What a run of chains needs of this machine, checked before any work: the draws the driver holds in memory
(:func:`check_run_size`) and the rows its sampler can take (:func:`check_method_fits`: MH's and HMC's dense
Cholesky must fit in memory).
"""

from __future__ import annotations

__all__ = ["MAX_CHAINS", "check_run_size", "check_method_fits"]

MAX_CHAINS = 256  # R-hat and ESS need a few chains; beyond the workers more only queue


def check_run_size(cfg, n_params: int, memory_bytes: float | None = None) -> None:
    """Refuse, before any work, a run whose draws would not fit: the driver keeps every chain's draws in
    memory for its diagnostics, (p + 8) float64 numbers per draw (the parameters and the sample stats), so
    n_chains × n_iter draws must fit in half the available memory; and at most :data:`MAX_CHAINS` chains."""
    if cfg.n_chains > MAX_CHAINS:
        raise ValueError(f"{cfg.n_chains} chains is more than {MAX_CHAINS}: R-hat and ESS need only a few "
                         f"(4 by default), and chains beyond the workers only queue")
    if memory_bytes is None:
        import psutil

        memory_bytes = psutil.virtual_memory().available
    need = float(cfg.n_chains) * cfg.n_iter * (n_params + 8) * 8
    if need > 0.5 * memory_bytes:
        raise MemoryError(f"{cfg.n_chains} chains × {cfg.n_iter} iterations would hold "
                          f"{need / 2**30:.1f} GiB of draws in memory; this machine has "
                          f"{memory_bytes / 2**30:.1f} GiB available (fewer iterations, or a target ESS "
                          "with a smaller cap)")


def check_method_fits(cfg, n: int, memory_bytes: float | None = None,
                      n_params: int | None = None) -> None:
    """Refuse, before any work, n rows the sampler cannot take on this machine (MH: a dense Cholesky per
    iteration must fit in memory, :meth:`daskgp.mcmc.samplers.Sampler.check_size`); and (given ``n_params``)
    a run too big to hold (:func:`check_run_size`)."""
    if n_params is not None:
        check_run_size(cfg, n_params, memory_bytes)
    cfg.sampler.check_size(cfg, n, memory_bytes)
