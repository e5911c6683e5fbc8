"""Dense references for the sparse bounds, used only by the tests: Titsias' (2009) collapsed bound with the
n × n matrices, and the Titsias & Lawrence (2010) Bayesian GPLVM bound from their eq. (14) with per-point
loops. Deliberately slow and direct, an independent route to the numbers the map-reduce code computes."""

import math

import numpy as np
import scipy.linalg

from daskgp.sparse.bound import GlobalParams, kl_gauss, kmm


def dense_kernel(name: str, X1, X2, variance: float, lengthscales) -> np.ndarray:
    """k(x, x′) for the kernel ``name`` written out from its textbook formula, r the ARD-scaled distance:
    RBF σ²e^{−r²/2}; Matérn 3/2 σ²(1 + √3 r)e^{−√3 r}; Matérn 5/2 σ²(1 + √5 r + 5r²/3)e^{−√5 r}."""
    ls = np.asarray(lengthscales, float) * np.ones(np.shape(X1)[1])
    r = np.sqrt(np.sum(((np.asarray(X1)[:, None, :] - np.asarray(X2)[None, :, :]) / ls) ** 2, axis=2))
    if name == "rbf":
        return variance * np.exp(-0.5 * r**2)
    if name == "matern32":
        return variance * (1 + math.sqrt(3) * r) * np.exp(-math.sqrt(3) * r)
    if name == "matern52":
        return variance * (1 + math.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-math.sqrt(5) * r)
    raise ValueError(name)


def titsias_bound_dense(X, Y, Z, variance: float, lengthscales, beta: float, kernel: str = "rbf",
                        jitter: float = 1e-6) -> float:
    """Titsias' (2009) collapsed bound, dense and direct:
    Σ_d log N(y_d | 0, Q_nn + β⁻¹I) − β/2·tr(K_nn − Q_nn)·p
    with Q_nn = K_nm K_mm⁻¹ K_mn, K_mm with ``jitter``·σ² on its diagonal. The reference the distributed
    bound is tested against (observed inputs), for any stationary kernel (k(x, x) = σ²)."""
    X, Z = np.asarray(X, float), np.asarray(Z, float)
    Y = np.asarray(Y, float).reshape(len(X), -1)
    n, p = Y.shape
    Kmm = dense_kernel(kernel, Z, Z, variance, lengthscales) + jitter * variance * np.eye(len(Z))
    Kmn = dense_kernel(kernel, Z, X, variance, lengthscales)
    Q = Kmn.T @ np.linalg.solve(Kmm, Kmn)
    cov = Q + np.eye(n) / beta
    L = np.linalg.cholesky(cov)
    alpha = scipy.linalg.solve_triangular(L, Y, lower=True)
    loglik = -0.5 * np.sum(alpha**2) - p * np.log(np.diag(L)).sum() - 0.5 * n * p * math.log(2 * math.pi)
    return float(loglik - 0.5 * beta * p * (n * variance - np.trace(Q)))


def bgplvm_bound_dense(Y, mu, S, Z, variance: float, lengthscales, beta: float) -> float:
    """The Titsias & Lawrence (2010) Bayesian GPLVM bound written directly from its paper (their eq. 14,
    with Ψ0, Ψ1 (n, m), Ψ2 (m, m) computed per point by explicit loops), dense in n:

        F = Σ_d [log N(y_d | 0, β⁻¹I + Ψ1 K_mm⁻¹ Ψ1ᵀ)-shaped term via W = βI − β²Ψ1 (βΨ2 + K_mm)⁻¹Ψ1ᵀ]
            − βp/2·ψ0 + βp/2·tr(K_mm⁻¹Ψ2) − KL(q(X) ‖ p(X)).

    Written with the n × n matrix W of their eq. (14): an independent route to the same number."""
    Y = np.asarray(Y, float).reshape(len(mu), -1)
    n, p = Y.shape
    ls = np.asarray(lengthscales, float) * np.ones(Z.shape[1])
    _, Kmm = kmm(GlobalParams(Z, variance, ls, noise=1 / beta))
    psi0 = n * variance
    psi1 = np.empty((n, len(Z)))
    psi2 = np.zeros((len(Z), len(Z)))
    for i in range(n):  # one point at a time from the textbook formulas (independent of the vectorised code)
        for j in range(len(Z)):
            psi1[i, j] = variance * np.prod(
                np.exp(-0.5 * (mu[i] - Z[j]) ** 2 / (ls**2 + S[i])) / np.sqrt(1 + S[i] / ls**2))
        for j in range(len(Z)):
            for k in range(len(Z)):
                zb = 0.5 * (Z[j] + Z[k])
                psi2[j, k] += variance**2 * np.prod(
                    np.exp(-(Z[j] - Z[k]) ** 2 / (4 * ls**2) - (mu[i] - zb) ** 2 / (ls**2 + 2 * S[i]))
                    / np.sqrt(1 + 2 * S[i] / ls**2))
    Wm = beta * np.eye(n) - beta**2 * psi1 @ np.linalg.solve(beta * psi2 + Kmm, psi1.T)
    sign_k, logdet_k = np.linalg.slogdet(Kmm)
    sign_a, logdet_a = np.linalg.slogdet(beta * psi2 + Kmm)
    F = (-0.5 * n * p * math.log(2 * math.pi) + 0.5 * n * p * math.log(beta) + 0.5 * p * (logdet_k - logdet_a)
         - 0.5 * np.trace(Y.T @ Wm @ Y) - 0.5 * beta * p * psi0
         + 0.5 * beta * p * np.trace(np.linalg.solve(Kmm, psi2)))
    return float(F - kl_gauss(mu, S))
