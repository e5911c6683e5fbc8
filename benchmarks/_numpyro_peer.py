"""NUTS on the exact GP hyperparameter posterior, in NumPyro (run by benchmarks/nuts_peer.py inside its own
venv, benchmarks/.numpyro-venv: ``pip install numpyro jax jaxlib``).

    python _numpyro_peer.py DATA.npz OUT.npz --chains 2 --warmup 1000 --samples 1000 --gradient hand
    python _numpyro_peer.py DATA.npz OUT.npz --gradient-cost 5      # seconds per gradient, both gradients

The model is daskgp's default: standardised X (n, d), y (n,); isotropic RBF k = s2·exp(−‖x − x'‖²/(2ℓ²))
plus noise·I; independent Gamma(2, 1) priors on s2, ℓ, noise, sampled in log space φ with the Jacobian (as
daskgp does); float64 throughout. Two gradients of the same log density: 'autodiff', NumPyro's model with a
MultivariateNormal likelihood differentiated by JAX; 'hand', the same density as a potential function whose
gradient is written out (a custom VJP: ½ tr((ααᵀ − K⁻¹) ∂K), K⁻¹ from the Cholesky factor) — an expert
uses the cheaper, which ``--gradient-cost`` measures. NUTS as its experts run it on a 3-parameter posterior
with a variance–lengthscale ridge: a dense mass matrix adapted in warmup (``dense_mass=True``), target
acceptance 0.8. The chains of one process run one after another; nuts_peer.py runs processes side by side,
one per core, each limited to one thread.
"""

import argparse
import json
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from numpyro.infer import MCMC, NUTS  # noqa: E402
from numpyro.infer.util import potential_energy  # noqa: E402


def model(X, y):
    s2 = numpyro.sample("variance", dist.Gamma(2.0, 1.0))
    ell = numpyro.sample("lengthscale", dist.Gamma(2.0, 1.0))
    noise = numpyro.sample("noise", dist.Gamma(2.0, 1.0))
    sq = jnp.sum(X**2, axis=1)
    r2 = jnp.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0)
    K = s2 * jnp.exp(-0.5 * r2 / ell**2) + noise * jnp.eye(X.shape[0])
    numpyro.sample("y", dist.MultivariateNormal(jnp.zeros(X.shape[0]), covariance_matrix=K), obs=y)


def hand_potential(X, y):
    """The negative log posterior of φ = log(s2, ℓ, noise) with its gradient written out (custom VJP)."""
    n = X.shape[0]
    sq = jnp.sum(X**2, axis=1)
    r2 = jnp.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0)

    def parts(phi):
        s2, ell, noise = jnp.exp(phi[0]), jnp.exp(phi[1]), jnp.exp(phi[2])
        Kf = s2 * jnp.exp(-0.5 * r2 / ell**2)
        L = jnp.linalg.cholesky(Kf + noise * jnp.eye(n))
        alpha = jax.scipy.linalg.cho_solve((L, True), y)
        loglik = -0.5 * y @ alpha - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * n * jnp.log(2 * jnp.pi)
        logprior = jnp.sum(2.0 * phi - jnp.exp(phi))  # Gamma(2, 1) on exp(φ), with the Jacobian
        return Kf, L, alpha, noise, -(loglik + logprior)

    @jax.custom_vjp
    def potential(phi):
        return parts(phi)[-1]

    def fwd(phi):
        Kf, L, alpha, noise, u = parts(phi)
        Kinv = jax.scipy.linalg.cho_solve((L, True), jnp.eye(n))
        W = jnp.outer(alpha, alpha) - Kinv
        ell2 = jnp.exp(2 * phi[1])
        g_lik = 0.5 * jnp.array([jnp.sum(W * Kf), jnp.sum(W * Kf * r2) / ell2, noise * jnp.trace(W)])
        g = -(g_lik + 2.0 - jnp.exp(phi))
        return u, g

    def bwd(g, ct):
        return (ct * g,)

    potential.defvjp(fwd, bwd)
    return potential


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gradient-cost", type=int, default=0, help="only time this many gradients")
    ap.add_argument("--gradient", choices=("autodiff", "hand"), default="autodiff")
    ap.add_argument("--diagonal-mass", action="store_true", help="the former diagonal mass matrix")
    a = ap.parse_args()
    d = np.load(a.data)
    X, y = jnp.asarray(d["X"]), jnp.asarray(d["y"])
    if a.gradient_cost:
        phi0 = jnp.array([jnp.log(2.0), jnp.log(1.0), jnp.log(0.1)])
        params = {"variance": phi0[0], "lengthscale": phi0[1], "noise": phi0[2]}
        auto = jax.jit(jax.value_and_grad(lambda p: potential_energy(model, (X, y), {}, p)))
        hand = jax.jit(jax.value_and_grad(hand_potential(X, y)))
        out = {"n": int(X.shape[0]), "jax": jax.__version__, "numpyro": numpyro.__version__}
        for name, f, arg in (("autodiff", auto, params), ("hand", hand, phi0)):
            t0 = time.perf_counter()
            v, g = jax.block_until_ready(f(arg))
            out[f"{name}_compile_seconds"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(a.gradient_cost):
                jax.block_until_ready(f(arg))
            out[f"{name}_seconds_per_gradient"] = (time.perf_counter() - t0) / a.gradient_cost
            out[f"{name}_value"] = float(v)
            keys = ("variance", "lengthscale", "noise")
            g = [g[k] for k in keys] if isinstance(g, dict) else g
            out[f"{name}_grad"] = [float(x) for x in g]
        out["seconds_per_gradient"] = min(out["autodiff_seconds_per_gradient"],
                                          out["hand_seconds_per_gradient"])
        print(json.dumps(out))
        return
    fields = ("num_steps", "diverging")
    if a.gradient == "hand":
        kernel = NUTS(potential_fn=hand_potential(X, y), dense_mass=not a.diagonal_mass)
        init = jnp.tile(jnp.array([0.0, 0.0, -2.0]), (a.chains, 1))
        mcmc = MCMC(kernel, num_warmup=a.warmup, num_samples=a.samples, num_chains=a.chains,
                    chain_method="sequential", progress_bar=False)
        args, kwargs = (), {"init_params": init if a.chains > 1 else init[0]}
    else:
        mcmc = MCMC(NUTS(model, dense_mass=not a.diagonal_mass), num_warmup=a.warmup, num_samples=a.samples,
                    num_chains=a.chains, chain_method="sequential", progress_bar=False)
        args, kwargs = (X, y), {}
    # JAX dispatches asynchronously: without block_until_ready the clock stops before the chain has run.
    t0 = time.perf_counter()
    mcmc.warmup(jax.random.PRNGKey(a.seed), *args, extra_fields=fields, collect_warmup=True, **kwargs)
    jax.block_until_ready(mcmc.post_warmup_state)
    warm_steps = int(np.asarray(mcmc.get_extra_fields()["num_steps"]).sum())
    t1 = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, *args, extra_fields=fields)
    s = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    t2 = time.perf_counter()
    ex = mcmc.get_extra_fields(group_by_chain=True)
    if a.gradient == "hand":
        phi = np.asarray(s)
    else:
        phi = np.stack([np.log(np.asarray(s[k])) for k in ("variance", "lengthscale", "noise")], axis=-1)
    np.savez(a.out, phi=phi, num_steps=np.asarray(ex["num_steps"]), diverging=np.asarray(ex["diverging"]))
    print(json.dumps({"wall_seconds": t2 - t0, "warmup_seconds": t1 - t0, "sampling_seconds": t2 - t1,
                      "jax": jax.__version__, "numpyro": numpyro.__version__,
                      "warmup_gradients": warm_steps, "warmup_iterations": a.warmup,
                      "sampling_iterations": a.samples,
                      "sampling_gradients": int(np.asarray(ex["num_steps"]).sum()),
                      "divergences": int(np.asarray(ex["diverging"]).sum()),
                      "step_size": float(np.asarray(mcmc.last_state.adapt_state.step_size).ravel()[0])}))

if __name__ == "__main__":
    main()
