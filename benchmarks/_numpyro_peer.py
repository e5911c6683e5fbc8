"""NUTS on the exact GP hyperparameter posterior, in NumPyro (run by benchmarks/nuts_peer.py inside its own
venv, benchmarks/.numpyro-venv: ``pip install numpyro jax jaxlib``).

    python _numpyro_peer.py DATA.npz OUT.npz --chains 2 --warmup 1000 --samples 1000 --gradient hand
    python _numpyro_peer.py DATA.npz OUT.npz --gradient-cost 5      # seconds per gradient, both gradients
    python _numpyro_peer.py DATA.npz STATE.npz --chains 2 --warmup 500 --advance 100 --gradient hand

The last form runs NUTS in resumable steps (``advance``): each of the process's chains goes on by up to
``--advance`` iterations from where STATE.npz left it (a warmup step stops at the warmup's end), and the
chains' NUTS states, kept draws and step counts are written back to STATE.npz whole — so a run can stop
between steps and continue in another session, and a caller can stop it at a convergence target.

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


PARAMS = ("variance", "lengthscale", "noise")
INIT_PHI = (0.0, 0.0, -2.0)  # log(s2, ℓ, noise): every chain starts here, on both gradients


def _kernel(X, y, gradient: str, diagonal_mass: bool):
    """(NUTS kernel, its model arguments, the start of a chain in the kernel's own form)."""
    if gradient == "hand":
        return (NUTS(potential_fn=hand_potential(X, y), dense_mass=not diagonal_mass), (),
                jnp.array(INIT_PHI))
    return (NUTS(model, dense_mass=not diagonal_mass), (X, y),
            {k: jnp.asarray(v) for k, v in zip(PARAMS, INIT_PHI, strict=True)})


def _phi(z) -> np.ndarray:
    """A NUTS position as φ = log(s2, ℓ, noise): the hand potential's own; the model's unconstrained sites
    (log, for its Gamma priors)."""
    return np.asarray([z[k] for k in PARAMS] if isinstance(z, dict) else z, dtype=np.float64)


def advance(X, y, a) -> dict:
    """Each chain on by up to ``a.advance`` iterations from STATE (``a.out``; a new run when it is absent):
    NumPyro's own kernel, initialised as MCMC initialises it (same warmup length, so the same adaptation
    schedule), its state restored leaf by leaf (no pickle) and stepped by the jitted ``sample``, exactly as
    ``MCMC`` steps it. Writes STATE whole; returns the step's record (seconds apart from start-up and
    compilation, which an uninterrupted run pays once)."""
    import os
    from pathlib import Path

    t_start = time.perf_counter()
    kernel, margs, init = _kernel(X, y, a.gradient, a.diagonal_mass)
    keys = jax.random.split(jax.random.PRNGKey(a.seed), a.chains)
    states = [kernel.init(keys[c], a.warmup, init, margs, {}) for c in range(a.chains)]
    treedef = jax.tree_util.tree_structure(states[0])
    path = Path(a.out)
    saved = dict(np.load(path)) if path.exists() else {}
    if saved:
        if (int(saved["warmup"]), int(saved["chains"]), int(saved["seed"])) != (a.warmup, a.chains, a.seed):
            raise SystemExit(f"{path}: a run with another warmup, chain count or seed")
        states = [jax.tree_util.tree_unflatten(
            treedef, [jnp.asarray(saved[f"c{c}_leaf{j}"]) for j in range(treedef.num_leaves)])
            for c in range(a.chains)]
    step = jax.jit(lambda s: kernel.sample(s, margs, {}))
    t0 = time.perf_counter()
    step = step.lower(states[0]).compile()
    compile_seconds = time.perf_counter() - t0
    rec = {"startup_seconds": t0 - t_start, "compile_seconds": compile_seconds, "chains": []}
    out = {"warmup": a.warmup, "chains": a.chains, "seed": a.seed}
    compute = 0.0
    for c, st in enumerate(states):
        draws = list(saved.get(f"phi{c}", np.zeros((0, 3))))
        steps = list(saved.get(f"steps{c}", np.zeros(0, int)))
        div = list(saved.get(f"div{c}", np.zeros(0, bool)))
        i = int(st.i)
        todo = min(a.advance, a.warmup - i) if i < a.warmup else a.advance
        t0 = time.perf_counter()
        for _ in range(todo):
            st = step(st)
            if int(st.i) > a.warmup:  # a kept draw (NumPyro's MCMC keeps the draws after num_warmup)
                draws.append(_phi(st.z))
            steps.append(int(st.num_steps))
            div.append(bool(st.diverging))
        jax.block_until_ready(st)
        seconds = time.perf_counter() - t0
        compute += seconds
        for j, leaf in enumerate(jax.tree_util.tree_leaves(st)):
            out[f"c{c}_leaf{j}"] = np.asarray(leaf)
        out[f"phi{c}"] = np.asarray(draws, dtype=np.float64).reshape(-1, 3)
        out[f"steps{c}"], out[f"div{c}"] = np.asarray(steps, int), np.asarray(div, bool)
        rec["chains"].append({"iterations": int(st.i), "advanced": todo, "seconds": seconds,
                              "kept": len(draws), "step_size": float(st.adapt_state.step_size)})
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **out)
    os.replace(tmp, path)  # whole or not at all
    steps_all = [out[f"steps{c}"] for c in range(a.chains)]
    rec.update({"compute_seconds": compute, "jax": jax.__version__, "numpyro": numpyro.__version__,
                "warmup_done": all(ch["iterations"] >= a.warmup for ch in rec["chains"]),
                "warmup_gradients": int(sum(s[:a.warmup].sum() for s in steps_all)),
                "sampling_gradients": int(sum(s[a.warmup:].sum() for s in steps_all)),
                "divergences": int(sum(out[f"div{c}"][a.warmup:].sum() for c in range(a.chains)))})
    return rec


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
    ap.add_argument("--advance", type=int, default=0, help="resumable: each chain on by this many iterations")
    a = ap.parse_args()
    d = np.load(a.data)
    X, y = jnp.asarray(d["X"]), jnp.asarray(d["y"])
    if a.advance:
        print(json.dumps(advance(X, y, a)))
        return
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
