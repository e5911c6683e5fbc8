"""The psi-statistics of the RBF-ARD kernel under latent inputs q(x_i) = N(μ_i, diag S_i), and their
derivatives: the expectations the Bayesian GPLVM's collapsed bound sums over rows (Titsias & Lawrence 2010,
eqs. (14)–(15); Gal, van der Wilk & Rasmussen 2014, section 3, which splits those sums over chunks).

    ψ1_ij  = σ² Π_q (1 + S_iq/l_q²)^(−1/2) exp(−½ Σ_q (μ_iq − z_jq)² / (l_q² + S_iq)),
    ψ2_ijk = σ⁴ Π_q (1 + 2S_iq/l_q²)^(−1/2) exp(−Σ_q (z_jq − z_kq)² / (4 l_q²)
                                                  − Σ_q (μ_iq − z̄_jkq)² / (l_q² + 2 S_iq)),
    z̄_jk = (z_j + z_k)/2.

ψ2 is m² numbers a row, the cost of a latent row. With a_ijq = μ_iq − z_jq (ψ1's differences), μ − z̄ = (a_ij
+ a_ik)/2, so ψ2's exponent is −¼ s_ij − ¼ s_ik − ½ X_ijk with s_ij = Σ_q a_ijq²/d_iq and X_i = ã_i ã_iᵀ, ã =
a/√d (d = l² + 2S): an (m, m) product a row and (r, m, m) temporaries, where the direct form made (r, m, m, q)
ones and summed them over q; ψ1 and ψ2 go over the same blocks of rows. Its derivatives reduce the same way,
through R_ij = Σ_k W_ijk and T_i = W_i a_i for the weights W_ijk = ∂F/∂D_jk · ψ2_ijk (symmetric in j, k):
every sum over j, k of W times (μ − z̄) or (μ − z̄)² is a row sum or an (m, m)·(m, q) product. Both are exact
rewritings (the same sums in another order; measured in ``benchmarks/psi_cost.py``):
``tests/sparse/test_bound.py`` checks them against the dense bound, finite differences and Monte Carlo.

Units: the caller's (the estimators standardise first); numpy float64 only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["psi1_terms", "psi_blocks", "latent_grads", "PSI2_BLOCK_NUMBERS"]

# numbers in one block's ψ2 (r, m, m): a block's temporaries stay near a few times this (16 MB each)
PSI2_BLOCK_NUMBERS = 2_000_000


def psi1_terms(mu, S, Z, variance: float, ls):
    """ψ1 (b, m) for μ, S (b, q) and Z (m, q), with the differences a = μ − z (b, m, q) and d1 = l² + S
    (b, q) its gradient reuses."""
    t = ls**2
    d1 = t[None, :] + S
    diff = mu[:, None, :] - Z[None, :, :]
    psi1 = variance * np.exp(-0.5 * np.sum(diff**2 / d1[:, None, :], axis=2)
                             - 0.5 * np.sum(np.log1p(S / t[None, :]), axis=1)[:, None])
    return psi1, diff, d1


def psi_blocks(mu, S, Z, variance: float, ls):
    """Yield (rows, ψ1 (r, m), a = μ − z (r, m, q), d1 = l² + S (r, q), ψ2 (r, m, m), d2 = l² + 2S (r, q))
    over blocks of r rows, r·m² near :data:`PSI2_BLOCK_NUMBERS` whatever the chunk's size: every temporary
    of a chunk's pass is a block's (ψ1's (rows, m, q) terms of a whole chunk were 480 MB each at 10⁶ rows
    and m = 30, and a gradient made several)."""
    m = Z.shape[0]
    t = ls**2
    base = -np.sum((Z[:, None, :] - Z[None, :, :]) ** 2 / (4 * t), axis=2)  # (m, m)
    step = max(1, int(PSI2_BLOCK_NUMBERS // (m * m)))
    for start in range(0, mu.shape[0], step):
        rows = slice(start, start + step)
        mu_b, S_b = mu[rows], S[rows]
        psi1, a, d1 = psi1_terms(mu_b, S_b, Z, variance, ls)
        d2 = t[None, :] + 2 * S_b
        at = a / np.sqrt(d2)[:, None, :]
        s = np.sum(at * at, axis=2)  # (r, m)
        E = np.matmul(at, at.transpose(0, 2, 1))  # X (r, m, m)
        E *= -0.5
        E -= 0.25 * s[:, :, None]
        E -= 0.25 * s[:, None, :]
        E += base[None]
        E += (2 * np.log(variance) - 0.5 * np.sum(np.log1p(2 * S_b / t), axis=1))[:, None, None]
        yield rows, psi1, a, d1, np.exp(E, out=E), d2


def latent_grads(Y, Z, variance: float, ls, GC, GD, mu, S):
    """∂(Σ GC⊙C + Σ GD⊙D)/∂(Z (m, q), σ², l (q,), μ (b, q), S (b, q)) for latent rows Y (b, p), where C = ψ1ᵀY
    and D = Σ_i ψ2_i are the chunk's statistics and GC (m, p), GD (m, m, symmetric) their weights."""
    t = ls**2
    m, q = Z.shape
    dmu, dS = np.zeros_like(mu), np.zeros_like(S)
    dZ, dt, dvar = np.zeros((m, q)), np.zeros(q), 0.0
    Wjk = np.zeros_like(GD)
    for rows, psi1, a, d1, psi2, d2 in psi_blocks(mu, S, Z, variance, ls):
        # ψ1's share, through C
        W1 = (Y[rows] @ GC.T) * psi1  # (r, m)
        w1 = W1.sum(axis=1)  # (r,)
        r1 = a / d1[:, None, :]  # (μ − z)/d1 (r, m, q)
        dmu[rows] -= np.einsum("rm,rmq->rq", W1, r1)
        dZ += np.einsum("rm,rmq->mq", W1, r1)
        half_sq1 = np.einsum("rm,rmq->rq", W1, 0.5 * r1 * r1)  # Σ_j W1 (μ − z)²/(2 d1²)
        dS[rows] += half_sq1 - 0.5 * w1[:, None] / d1
        dt += half_sq1.sum(axis=0) - 0.5 * np.sum(w1[:, None] / d1, axis=0) + 0.5 * w1.sum() / t
        dvar += w1.sum() / variance
        # ψ2's share, through D
        W2 = np.multiply(psi2, GD[None], out=psi2)  # (r, m, m), symmetric in j, k
        R = W2.sum(axis=2)  # (r, m)
        w = R.sum(axis=1)  # (r,)
        T = np.matmul(W2, a)  # Σ_k W_ijk a_ikq (r, m, q)
        # Σ_jk W (μ − z̄) = Σ_j R_ij a_ij, and Σ_jk W (μ − z̄)² = ½ (Σ_j R_ij a_ij² + Σ_j a_ij T_ij)
        P1 = np.einsum("rm,rmq->rq", R, a)
        Q = 0.5 * (np.einsum("rm,rmq->rq", R, a * a) + np.einsum("rmq,rmq->rq", a, T))
        dmu[rows] += -2 * P1 / d2
        dS[rows] += 2 * Q / d2**2 - w[:, None] / d2
        dt += np.sum(Q / d2**2, axis=0) - 0.5 * np.sum(w[:, None] / d2, axis=0) + 0.5 * w.sum() / t
        # Σ_ik W_ijk (μ_iq − z̄_jkq)/d2_iq = ½ Σ_i (R_ij a_ijq + T_ijq)/d2_iq
        dZ += np.einsum("rmq,rq->mq", R[:, :, None] * a + T, 1 / d2)
        dvar += 2 * w.sum() / variance
        Wjk += W2.sum(axis=0)
    zdiff = Z[:, None, :] - Z[None, :, :]  # (m, m, q): the base term's share, once for all blocks
    dt += np.einsum("jk,jkq->q", Wjk, zdiff**2) / (4 * t**2)
    dZ -= np.einsum("jk,jkq->jq", Wjk, zdiff) / t
    return dZ, float(dvar), dt * 2 * ls, dmu, dS
