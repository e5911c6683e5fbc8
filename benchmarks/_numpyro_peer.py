"""NUTS on the exact GP hyperparameter posterior, in NumPyro (run by benchmarks/nuts_peer.py inside its own
venv, benchmarks/.numpyro-venv: ``pip install numpyro jax jaxlib``).

    python _numpyro_peer.py DATA.npz OUT.npz --chains 4 --warmup 1000 --samples 1000 --seed 0
    python _numpyro_peer.py DATA.npz OUT.npz --gradient-cost 5      # seconds per log-density gradient only

The model is daskgp's default: standardised X (n, d), y (n,); isotropic RBF k = s2·exp(−‖x − x'‖²/(2ℓ²))
plus noise·I; independent Gamma(2, 1) priors on s2, ℓ, noise (NumPyro samples them in log space and adds
the Jacobian, as daskgp does); the likelihood by dense Cholesky (MultivariateNormal), float64 throughout.
NUTS as its experts run it: the default diagonal mass matrix adapted in warmup, target acceptance 0.8,
chains run one after another (``chain_method='sequential'``) so every chain has the machine to itself.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gradient-cost", type=int, default=0, help="only time this many gradients")
    a = ap.parse_args()
    d = np.load(a.data)
    X, y = jnp.asarray(d["X"]), jnp.asarray(d["y"])
    if a.gradient_cost:
        params = {"variance": jnp.log(2.0), "lengthscale": jnp.log(1.0), "noise": jnp.log(0.1)}
        f = jax.jit(jax.value_and_grad(lambda p: potential_energy(model, (X, y), {}, p)))
        t0 = time.perf_counter()
        jax.block_until_ready(f(params))
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(a.gradient_cost):
            jax.block_until_ready(f(params))
        per = (time.perf_counter() - t0) / a.gradient_cost
        print(json.dumps({"seconds_per_gradient": per, "compile_seconds": compile_s, "n": int(X.shape[0]),
                          "jax": jax.__version__, "numpyro": numpyro.__version__}))
        return
    fields = ("num_steps", "diverging")
    mcmc = MCMC(NUTS(model), num_warmup=a.warmup, num_samples=a.samples, num_chains=a.chains,
                chain_method="sequential", progress_bar=False)
    # JAX dispatches asynchronously: without block_until_ready the clock stops before the chain has run.
    t0 = time.perf_counter()
    mcmc.warmup(jax.random.PRNGKey(a.seed), X, y, extra_fields=fields, collect_warmup=True)
    jax.block_until_ready(mcmc.post_warmup_state)
    warm_steps = int(np.asarray(mcmc.get_extra_fields()["num_steps"]).sum())
    t1 = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, X, y, extra_fields=fields)
    s = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    t2 = time.perf_counter()
    ex = mcmc.get_extra_fields(group_by_chain=True)
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
