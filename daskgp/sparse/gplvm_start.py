"""Where the Bayesian GPLVM's latent means start (Gal, van der Wilk & Rasmussen 2014, section 4; Titsias &
Lawrence 2010 start from PCA too): the leading q principal components of the standardised rows, each scaled
to unit variance, with S = S0. The Gram matrix is summed per chunk where the chunks are and every chunk's
projection is computed there, so the rows never gather to find the start."""

from __future__ import annotations

import numpy as np

from ..compute.rows import aligned
from .chunks import ChunkedRows, LocalRows

__all__ = ["principal_latents"]


def _gram_task(chunk) -> np.ndarray:
    """(p, p) Σ_i y_i y_iᵀ over one chunk's standardised rows."""
    Yb = aligned(chunk["Y"])
    return Yb.T @ Yb


def _with_latents(chunk, V: np.ndarray, scale: np.ndarray, S0: float) -> dict:
    """The chunk with its initial q(x_i): μ = Y V / scale (b, q), S = S0."""
    out = dict(chunk)
    out["mu"] = aligned((aligned(chunk["Y"]) @ aligned(V)) / scale)
    out["S"] = aligned(np.full(out["mu"].shape, S0))
    return out


def principal_latents(rows: list, q: int, S0: float = 0.1) -> None:
    """Give the chunks of ``rows[0]`` (ChunkedRows or LocalRows of standardised rows without latent state)
    their initial q(x_i): μ the leading q principal components, each scaled to unit variance, S = S0.
    ``rows[0]`` is replaced by the chunks with latent state, computed where the chunks are; nothing of size
    n comes here.

    The Gram matrix is summed chunk by chunk in chunk order, on the workers that hold the chunks, and every
    chunk's projection is computed there: rows split the same way give the same numbers whether they came
    from numpy or from a table read on the workers."""
    r = rows[0]
    if isinstance(r, LocalRows):
        grams = [_gram_task(c) for c in r.chunks]
    else:
        grams = r.with_replacement(lambda: r.client.gather(r.client.map(_gram_task, r.futures, pure=False)))
    G = grams[0].copy()
    for g in grams[1:]:  # a fixed order, whatever finished first
        G += g
    lam, V = np.linalg.eigh(G / r.n)
    lam, V = lam[::-1][:q], np.ascontiguousarray(V[:, ::-1][:, :q])
    V *= np.where(V[np.argmax(np.abs(V), axis=0), np.arange(q)] < 0, -1.0, 1.0)  # a deterministic sign
    # the sd of each projection (the columns are centred): √λ; a direction without variance is left as is
    scale = np.sqrt(np.where(lam > 1e-12 * max(lam[0], 0.0), lam, 1.0))
    if isinstance(r, LocalRows):
        rows[0] = LocalRows([_with_latents(c, V, scale, S0) for c in r.chunks])
        return
    futures = r.client.map(_with_latents, r.futures, V=V, scale=scale, S0=S0, pure=False)
    # latent state: placed again after a lost worker from the round's copies (daskgp.sparse.gplvm_latent)
    rows[0] = ChunkedRows(r.client, futures, r.sizes)
