"""Claims on the prose of the benchmark pages: sentences whose numbers are read from a results JSON (the
tables' value functions are ``claim_tables.py``'s). Each entry is (name, results JSON, page, template,
value function), made a :class:`claims.Claim` there; a value function takes the JSON (a dict) and returns
the template's blanks as strings, rounded as the page prints them."""

from __future__ import annotations

from _common import nearest_at  # benchmarks/ is on the path: scripts run from it, tests and docs add it
from claim_tables import signed


def _range(lo: float, hi: float, fmt: str) -> str:
    a, b = format(lo, fmt), format(hi, fmt)
    return a if a == b else f"{a}–{b}"


def _sci(x: float) -> str:
    """x in the docs' scientific notation, two significant digits: 9.4·10⁻⁷."""
    mant, exp = f"{x:.1e}".split("e")
    return f"{mant}·10" + str(int(exp)).replace("-", "⁻").translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


def sweep_notes(d: dict) -> dict:
    """The house_8L sweep's notes: GPyTorch's most accurate point, its float32 peak memory."""
    g = d["gpytorch"]
    best = min(c["summary"]["rel_error_mean"] for c in g.values())
    peaks = [c["peak_rss_gb"] for k, c in g.items() if k.startswith("f32")]
    return {"best": f"{100 * best:.1f} %", "peak": _range(min(peaks), max(peaks), ".1f")}


PROSE = [
    ("the house_8L sweep: GPyTorch's best point", "exact_gradient_sweep", "docs/benchmarks.md",
     "GPyTorch's best point ({best}) is below every daskgp point here", sweep_notes),
    ("the house_8L sweep: GPyTorch's float32 peak", "exact_gradient_sweep", "docs/benchmarks.md",
     "GPyTorch's float32 peak there was\n  {peak} GB", sweep_notes),
]


def sweep_half_ratios(d: dict) -> dict:
    """The float64 sweep on half of house_8L: matched ratios against each GPyTorch precision, which meet the
    ≤ 0.5 target, and what GPyTorch's float64 costs against its float32."""
    ours = d["daskgp"]

    def ratios(prec, keys):
        return [ours[k][f"matched_float{prec}"]["ratio"] for k in keys]

    u, cg = ["ulisse_4", "ulisse_16", "ulisse_64"], ["cg_4", "cg_16", "cg_64"]
    late = [f"{k.replace('_', ' ').replace('ulisse', 'ULISSE').replace('cg', 'CG')} probes against "
            f"float{p}: {ours[k][f'matched_float{p}']['ratio']:.2f}"
            for p in ("64", "32") for k in u + cg if ours[k][f"matched_float{p}"]["ratio"] > 0.5]
    g = d["gpytorch"]
    cost = [g["f64" + k[3:]]["summary"]["seconds_mean"] / g[k]["summary"]["seconds_mean"] for k in g
            if k.startswith("f32")]
    return {"f64u": " / ".join(f"{r:.2f}" for r in ratios("64", u)),
            "f64cg": _range(min(ratios("64", cg)), max(ratios("64", cg)), ".2f"),
            "f32u": " / ".join(f"{r:.2f}" for r in ratios("32", u)),
            "f32cg": _range(min(ratios("32", cg)), max(ratios("32", cg)), ".2f"),
            "verdict": ("Every ratio meets the ≤ 0.5 target." if not late else
                        "Every ratio but one meets the ≤ 0.5 target (" + "; ".join(late) + ")."
                        if len(late) == 1 else
                        f"{len(late)} ratios miss the ≤ 0.5 target ({'; '.join(late)})."),
            "cost": _range(min(cost), max(cost), ".1f")}


PROSE += [
    ("the float64 sweep on half of house_8L: the ratios", "exact_gradient_sweep_rows11392",
     "docs/benchmarks.md",
     "**Matched ratio against float64 GPyTorch: {f64u}** for ULISSE with 4 / 16 / 64 probes\n"
     "  ({f64cg} for CG). Against float32 GPyTorch, whose rank-100 point is the most accurate of all here, "
     "the\n"
     "  ratios are {f32u} ({f32cg} for CG). {verdict} On this subset GPyTorch's float64\n"
     "  costs {cost}× its float32.", sweep_half_ratios),
]


def cmvp_house8l(d: dict) -> dict:
    """exact_gradient.json's kernel products on house_8L (fresh and cached, k = 1 / 8 / 32 columns) and the
    ULISSE row's error before and after the array-API change."""
    c = d["daskgp"]["ulisse"]["cmvp"]
    ks = ("1", "8", "32")
    fresh = [c[k]["seconds_fresh"] for k in ks]
    rate = [c[k]["kernel_entries_per_second"] / 1e8 for k in ks]
    return {"fresh": _range(min(fresh), max(fresh), ".1f"), "rate": _range(min(rate), max(rate), ".1f"),
            "cached": " / ".join(f"{c[k]['seconds_cached']:.2f}" for k in ks),
            "before": f"{d['before_after_issue18']['before']['ulisse']['rel_error_mean']:.3f}",
            "after": f"{d['daskgp']['ulisse']['summary']['rel_error_mean']:.3f}",
            "cg": f"{d['daskgp']['cg']['summary']['rel_error_mean']:.3f}"}


def cmvp_memory(d: dict) -> dict:
    """One K·v at n = 200,000 on two workers: its time, rate, the workers' peak and the rows' error."""
    p = d["products"][0]
    return {"secs": f"{p['seconds']:.0f}", "rate": f"{p['kernel_entries_per_second'] / 1e8:.1f}",
            "peak": f"{max(d['worker_peak_gb'].values()):.2f}",
            "err": f"{p['max_rel_error_50_rows']:.0e}".replace("e-", "e-").replace("e-0", "e-")}


PROSE += [
    ("kernel products on house_8L", "exact_gradient", "docs/benchmarks.md",
     "A CMVP on house_8L takes {fresh} s with fresh kernel entries\n({rate}·10⁸ entries/s) and {cached} s "
     "from cached kernel rows for k = 1 / 8 / 32 columns.\n(a)'s error rose from {before} to {after}",
     cmvp_house8l),
    ("kernel products on house_8L: CG's error", "exact_gradient", "docs/benchmarks.md",
     "(CG's error, the probes' alone, is unchanged at {cg})", cmvp_house8l),
    ("one K·v at n = 200,000", "cmvp_memory", "docs/benchmarks.md",
     "took\n{secs} s ({rate}·10⁸ kernel entries/s). Peak resident memory was {peak} GB per worker. The "
     "result rows match a direct\ncomputation to {err}.", cmvp_memory),
]


def sgld_concrete_tail(d: dict) -> dict:
    """concrete's default sampler against exact MH: the tail s/ESS ratio."""
    return {"tail": f"{d['sghmc']['sec_per_ess_tail'] / d['mh']['sec_per_ess_tail']:.2f}"}


PROSE += [
    ("concrete's default sampler against exact MH: the tail", "sgld_concrete", "docs/benchmarks.md",
     "exact MH's bulk s/ESS ({tail}× the tail)", sgld_concrete_tail),
]


def nuts_fair_agreement(d: dict) -> dict:
    """concrete, NUTS as its experts run it: how far daskgp's posteriors are from NUTS's, and HMC's ESS."""
    c = d["cases"]["concrete"]
    gap = max(abs(g) for k in ("mean_gap_in_nuts_sd_hmc", "mean_gap_in_nuts_sd_sghmc") for g in c[k])
    hmc, sghmc = c["sd_ratio_hmc_over_nuts"], c["sd_ratio_sghmc_over_nuts"]
    h = c["daskgp_hmc"]
    return {"gap": f"{gap:.2f}", "hmc": _range(min(hmc), max(hmc), ".2f"),
            "sghmc": _range(min(sghmc), max(sghmc), ".2f"), "ess": f"{h['min_ess']:.0f}",
            "kept": f"{h['chains'] * h['kept_draws']:,}"}


PROSE += [
    ("NUTS as its experts run it, concrete: the posteriors agree", "nuts_fair", "docs/benchmarks.md",
     "The posteriors agree: means within {gap} NUTS sd, sd ratios {hmc} (HMC) and {sghmc} (SGHMC).",
     nuts_fair_agreement),
    ("NUTS as its experts run it, concrete: HMC's ESS", "nuts_fair", "docs/benchmarks.md",
     "and {ess} effective samples from {kept} kept draws.", nuts_fair_agreement),
]


def _ratio(r: float) -> str:
    return f"{r:.2f}" if r >= 0.1 else f"{r:.3f}"


def nuts_fair_sizes_prose(d: dict) -> dict:
    """NUTS extrapolated at 2,000 / 5,000 / 9,568 power_plant rows: issue 55's targets, SGHMC's walls, the
    two sides' gradient costs, and concrete's gradients per ESS per process (the extrapolation's factor)."""
    cs = [d["cases"][k] for k in ("power2k", "power5k", "power_plant")]
    r = [c["ratio_sghmc_extrapolated"] for c in cs]
    met = all(x <= 1 for x in r) and r[-1] <= 0.1
    prev = [v["wall_seconds"] for v in cs[0]["previous"].values()]
    g = [c["gradient_cost"] for c in cs]

    def cost(x):
        v = x["daskgp_seconds_per_gradient"], x["seconds_per_gradient"]
        return " against ".join(f"{s:.2f}" if s < 1 else f"{s:.1f}" for s in v)
    return {"verdict": "are met here" if met else "are not met here",
            "ratios": ", ".join(_ratio(x) for x in r),
            "walls": f"{cs[1]['daskgp_sghmc']['wall_seconds']:.0f} s against "
                     + " and ".join(f"{w:.0f}" for w in sorted([*prev, cs[0]["daskgp_sghmc"]["wall_seconds"]
                                                                 ]))
                     + " s",
            "g2": cost(g[0]), "g5": cost(g[1]), "g9": cost(g[2]),
            "per_process": f"{cs[0]['nuts_extrapolated']['gradients_per_ess_per_process']:.1f}"}


PROSE += [
    ("NUTS extrapolated: issue 55's targets", "nuts_fair", "docs/benchmarks.md",
     "ratio ≤ 1 at every n and ≤ 0.1 at 9,568 rows, {verdict} ({ratios})", nuts_fair_sizes_prose),
    ("NUTS extrapolated: SGHMC's walls", "nuts_fair", "docs/benchmarks.md",
     "2,000 rows' (two modes): {walls} (two runs;", nuts_fair_sizes_prose),
    ("NUTS extrapolated: the gradients' costs", "nuts_fair", "docs/benchmarks.md",
     "({g2} s\n  at 2,000 rows, {g5} s at 5,000, {g9} s at 9,568)", nuts_fair_sizes_prose),
    ("NUTS extrapolated: concrete's gradients per ESS", "nuts_fair", "docs/benchmarks.md",
     "concrete's gradients per effective sample per process ({per_process}, its\nwarmup included",
     nuts_fair_sizes_prose),
]
PROSE += [
    ("NUTS run to the target: the extrapolation it replaced", "nuts_fair", "docs/benchmarks.md",
     "above (NUTS {nuts_spe} s / ESS, ratio {r2}) favoured NUTS", lambda d: {
         "nuts_spe": f"{d['cases']['power2k']['nuts_extrapolated']['seconds_per_ess']:.1f}",
         "r2": _ratio(d["cases"]["power2k"]["ratio_sghmc_extrapolated"])}),
    ("NUTS run to the target: concrete's gradients per ESS", "nuts_fair", "docs/benchmarks.md",
     "against\n  concrete's {per_process})", nuts_fair_sizes_prose),
]


def nuts_peer_record(d: dict) -> dict:
    """The withdrawn NUTS comparison (diagonal mass, chains in sequence): its ratios, the posteriors'
    agreement, NUTS's mixing and gradient cost, and power_plant's gradient (an extrapolation)."""
    c = d["cases"]["concrete"]
    nuts, ours = c["nuts"], c["daskgp"]
    pp = d["cases"]["power_plant"]["nuts_gradient_cost"]
    chains = c["nuts_chains"].values()
    iterations = nuts["chains"] * nuts["sampling_iterations"]
    per_ess = pp["seconds_per_gradient"] * nuts["gradients_per_ess"]
    return {"ours": f"{ours['seconds_per_ess']:.2f}", "nuts": f"{nuts['seconds_per_ess']:.2f}",
            "ratio": f"{c['ratio']:.3f}", "verdict": "met" if c["ratio"] <= 1 else "not met",
            "sampling": f"{nuts['seconds_per_ess_sampling_only']:.2f}",
            "r_sampling": f"{c['ratio_vs_nuts_sampling_only']:.3f}",
            "gaps": " / ".join(f"{abs(g):.2f}" for g in c["mean_gap_in_nuts_sd"]),
            "sd": " / ".join(f"{r:.2f}" for r in c["sd_ratio_daskgp_over_nuts"]),
            "ess": f"{nuts['min_ess']:.0f}", "draws": f"{nuts['chains'] * nuts['kept_draws']:,}",
            "steps": _range(*(f(ch["step_size"] for ch in chains) for f in (min, max)), ".2f"),
            "per_iteration": f"{nuts['sampling_gradients'] / iterations:.0f}",
            "per_gradient": f"{nuts['seconds_per_gradient']:.2f}", "gpe": f"{nuts['gradients_per_ess']:.0f}",
            "pp_grad": f"{pp['seconds_per_gradient']:.0f}", "pp_compile": f"{pp['compile_seconds']:.0f}",
            "pp_ess": f"{round(per_ess, -3):,.0f}", "pp_hours": f"{round(400 * per_ess / 3600, -1):.0f}"}


PROSE += [
    ("the withdrawn NUTS record: the ratios", "nuts_peer", "docs/benchmarks.md",
     "**ratio = {ours} / {nuts} = {ratio}** (target ≤ 1.0: {verdict}). Against NUTS's best case, the warmup "
     "amortised over\n  endless draws ({sampling} s per ESS), it is {r_sampling}.", nuts_peer_record),
    ("the withdrawn NUTS record: the posteriors", "nuts_peer", "docs/benchmarks.md",
     "The means differ by {gaps} NUTS sd (s2, ℓ, noise, log scale). The sd\n  ratios daskgp / NUTS are {sd}.",
     nuts_peer_record),
    ("the withdrawn NUTS record: NUTS's mixing", "nuts_peer", "docs/benchmarks.md",
     "NUTS needed {per_iteration} leapfrog gradients per iteration (step sizes {steps}) and had no "
     "divergences. It reached\n  ESS {ess} from {draws} draws", nuts_peer_record),
    ("the withdrawn NUTS record: NUTS's gradient", "nuts_peer", "docs/benchmarks.md",
     "each gradient of the dense-Cholesky log density costs {per_gradient} s inside NumPyro's\n  compiled "
     "loop, and {gpe} gradients go into one effective sample", nuts_peer_record),
    ("the withdrawn NUTS record: power_plant", "nuts_peer", "docs/benchmarks.md",
     "One gradient of NUTS's log density costs {pp_grad} s there\n  (compilation {pp_compile} s). At "
     "concrete's {gpe} gradients per effective sample that extrapolates to about {pp_ess} s per\n  ESS, or "
     "{pp_hours} hours for ESS 400", nuts_peer_record),
]


def house8l_reference(d: dict) -> dict:
    """house_8L's exact isotropic reference: its cost, the MAP and the Laplace sds (log parameters)."""
    iso = d["iso"]
    return {"evals": str(iso["exact_evaluations"]), "hours": f"{iso['exact_seconds'] / 3600:.1f}",
            "phi": ", ".join(signed(v, ".4f") for v in iso["phi_map"]),
            "sd": ", ".join(f"{v:.4f}" for v in iso["laplace_sd"])}


PROSE += [
    ("house_8L's exact reference", "house8l_reference", "docs/benchmarks.md",
     "**Iso: done** ({evals} evaluations, {hours} h). φ = log(s2, ℓ, σ²) = ({phi}), Laplace sd\n    ({sd}).",
     house8l_reference),
]


def gpu_notes(d: dict) -> dict:
    """house_8L on one H200: the GPU against the same machine's CPU cores, against GPyTorch at matched
    accuracy and its defaults, and the kernel products (33 columns, cached and fresh)."""
    ours, peers = d["daskgp"], d["peers"]
    s = ours["sampler_gpu"]["summary"]
    tol, dflt = peers["gpytorch_cg_tol_0.01_float32"]["summary"], peers["gpytorch_default_float32"]["summary"]
    chol = peers["gpytorch_cholesky_float64"]["summary"]
    g, c = ours["cg_gpu"]["cmvp"]["33"], ours["cg_cpu"]["cmvp"]["33"]
    return {"sampler": f"{d['gpu_vs_cpu']['sampler']:.1f}", "cg": f"{d['gpu_vs_cpu']['cg']:.1f}",
            "peer_err": f"{100 * tol['rel_error_mean']:.1f} %",
            "our_err": f"{100 * s['rel_error_mean']:.1f} %",
            "faster": f"{s['seconds_median'] / tol['seconds_median']:.2f}",
            "peer_s": f"{tol['seconds_median']:.3f}", "our_s": f"{s['seconds_median']:.3f}",
            "vs_chol": f"{s['seconds_median'] / chol['seconds_median']:.2f}",
            "defaults": f"{s['seconds_median'] / dflt['seconds_median']:.1f}",  # against daskgp's
            "off": f"{dflt['rel_error_mean']:.0f}",
            "cached_gpu": f"{1e3 * g['seconds_cached']:.1f} ms",
            "cached_cpu": f"{1e3 * c['seconds_cached']:.0f} ms",
            "cached_x": f"{c['seconds_cached'] / g['seconds_cached']:.0f}",
            "read": f"{g['cached_bytes_per_second'] / 1e9:.0f}",
            "fresh_gpu": f"{g['seconds_fresh']:.3f}", "fresh_cpu": f"{c['seconds_fresh']:.3f}",
            "fresh_x": f"{c['seconds_fresh'] / g['seconds_fresh']:.1f}",
            "rate": f"{g['kernel_entries_per_second_fresh'] / 1e9:.1f}",
            "cpu_s": f"{ours['sampler_cpu']['summary']['seconds_median']:.2f}",
            "gpu_s": f"{s['seconds_median']:.2f}"}


PROSE += [
    ("the GPU page: against the CPU", "gpu_gradient", "docs/gpu.md",
     "same code and draws: **{sampler}×** (sampler gradient) and\n  **{cg}×** (the other).", gpu_notes),
    ("the GPU page: against GPyTorch", "gpu_gradient", "docs/gpu.md",
     "(CG tolerance 0.01; {peer_err} error against daskgp's {our_err}):\n  **GPyTorch is {faster}× faster** "
     "({peer_s} s against {our_s} s), in float32 where daskgp does float64 arithmetic\n  on float32 cached "
     "rows. Against the exact float64 Cholesky, daskgp takes {vs_chol} of its time. GPyTorch's\n  defaults "
     "are {defaults}× faster still, but their gradient is off by {off}× its own size.", gpu_notes),
    ("the GPU page: kernel products", "gpu_gradient", "docs/gpu.md",
     "from cached float32 rows {cached_gpu} on the GPU against {cached_cpu} on the 16\n  cores ({cached_x}×; "
     "{read} GB/s read); recomputing every kernel entry {fresh_gpu} s against {fresh_cpu} s (**only "
     "{fresh_x}×**: {rate}·10⁹", gpu_notes),
    ("house_8L on a GPU, the benchmarks page", "gpu_gradient", "docs/benchmarks.md",
     "default sampler's gradient on house_8L takes {gpu_s} s against {cpu_s} s on the same machine's 16 CPU "
     "cores;\n    a cached 33-column product {cached_gpu} against {cached_cpu}.", gpu_notes),
]


def gpu_flights(d: dict) -> dict:
    """The sampler's gradient on flights rows on one H200: its median seconds and the GPU's peak memory."""
    s = d["daskgp"]["sampler_gpu"]
    return {"s": f"{s['summary']['seconds_median']:.1f}", "gib": f"{s['gpu_peak_bytes'] / 2**30:.0f}"}


PROSE += [
    ("the GPU page: 100,000 flights rows", "gpu_gradient_flights_rows100000", "docs/gpu.md",
     "daskgp's gradient took {s} s in {gib} GiB", gpu_flights),
    ("the GPU page: 150,000 flights rows", "gpu_gradient_flights_rows150000", "docs/gpu.md",
     "At 150,000 rows: {s} s in {gib} GiB", gpu_flights),
]


def ngd_tuning(d: dict) -> dict:
    """The NGD-SVGP peer's natural step, chosen per task on a validation tenth, and its correctness check
    against the collapsed bound."""
    def task(name, fmt):
        t = d["tuning"][name]
        vals = ", ".join(format(c["validation"], fmt) for c in t["candidates"].values())
        return f"{t['chosen']:g}", vals

    (fl, flv), (de, dev), (mn, mnv) = task("flights", ".2f"), task("flights_delayed", ".4f"), \
        task("mnist_parity", ".4f")
    return {"seconds": f"{d['tuning']['flights']['seconds']:.0f}",
            "cands": ", ".join(d["tuning"]["flights"]["candidates"]),
            "fl": fl, "flv": flv, "de": de, "dev": dev, "mn": mn, "mnv": mnv,
            "gap": _sci(d["peer_check"]["rel_gap_elbo_vs_collapsed"])}


PROSE += [
    ("the NGD-SVGP peer's natural step", "ngd_peers", "docs/benchmarks.md",
     "{seconds} s per candidate —\nfrom {{{cands}}}: on flights {fl} (validation RMSE {flv}), on flights\n"
     "delayed {de} (validation NLL {dev}), on MNIST {mn} ({mnv};", ngd_tuning),
    ("the NGD-SVGP peer's check against the collapsed bound", "ngd_peers", "docs/benchmarks.md",
     "relative gap {gap} against both the bound written out in\nthe peer", ngd_tuning),
]


def ngd_mnist(d: dict) -> dict:
    """SEP against NGD-SVGP on MNIST odd/even: its lead at 60 / 150 / 300 s (mean paired difference)."""
    at = d["tasks"]["mnist_parity"]["at"]
    lead = [f"{-at[t]['sep_minus_peer'][0]:.3f}" for t in ("60s", "150s", "300s")]
    return {"lead": f"{lead[0]}, {lead[1]} and {lead[2]}"}


PROSE += [
    ("SEP against NGD-SVGP on MNIST, the benchmarks page", "ngd_peers", "docs/benchmarks.md",
     "ahead of the peer beyond the spread at every\n  time, by {lead} nats.", ngd_mnist),
]


def sep_schedule(d: dict) -> dict:
    """SEP's minibatch schedules on the two flights labels: each variant's paired difference in test NLL from
    its baseline (mean ± sd over seeds), delayed then departed."""
    s = d["summary"]

    def pair(variant, t="150s", joint=" and "):
        def one(label):
            v = s[label][t][variant]
            return f"{v['minus_base']:+.4f} ± {v['minus_base_sd']:.4f}".replace("-", "−")
        return joint.join(one(lab) for lab in ("flights_delayed", "flights_departed"))
    return {"refresh": pair("refresh"), "const_lr": pair("const_lr"), "average": pair("average"),
            "batch_finish": pair("batch_finish"), "finish": pair("finish"),
            "finish_60": pair("finish_60", "60s", ", ")}


PROSE += [
    ("SEP's schedules: re-making the factor every epoch", "sep_schedule", "docs/benchmarks.md",
     "({refresh} nats at 150 s", sep_schedule),
    ("SEP's schedules: an undecayed Adam step", "sep_schedule", "docs/benchmarks.md",
     "undecayed Adam step as the peer's ({const_lr}, seeds 0–1", sep_schedule),
    ("SEP's schedules: the moving average", "sep_schedule", "docs/benchmarks.md",
     "with the factor re-made there ({average}).", sep_schedule),
    ("SEP's schedules: the batch finish", "sep_schedule", "docs/benchmarks.md",
     "was better on both labels in all three seeds\n  ({batch_finish} nats at 150 s)", sep_schedule),
    ("SEP's schedules: the finish as the library runs it", "sep_schedule", "docs/benchmarks.md",
     "{finish} nats at 150 s, better in all six pairs, and level at 60 s ({finish_60}).", sep_schedule),
]


def gpu_flights_matched(d: dict) -> dict:
    """flights rows on one H200: GPyTorch at CG tolerance 0.01 against daskgp's sampler gradient (s ratio)."""
    ours = d["daskgp"]["sampler_gpu"]["summary"]["seconds_median"]
    peer = d["peers"]["gpytorch_cg_tol_0.01_float32"]["summary"]["seconds_median"]
    return {"faster": f"{ours / peer:.2f}"}


PROSE += [
    ("the GPU summary on the benchmarks page: house_8L", "gpu_gradient", "docs/benchmarks.md",
     "At matched accuracy GPyTorch (float32)\n  is {faster}× faster on house_8L", gpu_notes),
    ("the GPU summary on the benchmarks page: 50,000 rows", "gpu_gradient_flights_rows50000",
     "docs/benchmarks.md", "and {faster}× at 50,000 rows", gpu_flights_matched),
    ("the GPU summary on the benchmarks page: 150,000 rows", "gpu_gradient_flights_rows150000",
     "docs/benchmarks.md", "daskgp ran 150,000 rows in {gib} GiB.", gpu_flights),
    ("the GPU summary on the benchmarks page: the fresh pass", "gpu_gradient", "docs/benchmarks.md",
     "the fresh kernel pass on the GPU: {rate}·10⁹ entries/s, only {fresh_x}× the 16 cores", gpu_notes),
]


def bimodal_prose(d: dict) -> dict:
    """The bimodal 3,000-row posterior: the reference's cost, and the sampled run against mode 1's Laplace
    approximation (mean gaps in its sds, sd ratios)."""
    run = d["runs"]["rows3000_seed0_fixed"]
    lap = d["modes"][0]["sd"]
    return {"mins": f"{(d['seconds_modes'] + d['importance']['seconds_log_density']) / 60:.1f}",
            "gaps": ", ".join(f"{g:.1f}" for g in run["gap_vs_laplace_in_laplace_sd"][:2])
            + f" and {run['gap_vs_laplace_in_laplace_sd'][2]:.1f}",
            "ratios": ", ".join(f"{s / sd:.1f}" for s, sd in zip(run["sd"][:2], lap[:2], strict=True))
            + f" and\n{run['sd'][2] / lap[2]:.1f}"}


PROSE += [
    ("the bimodal posterior: the reference's cost", "bimodal_posterior", "docs/benchmarks.md",
     "{mins} min on 2 cores)", bimodal_prose),
    ("the bimodal posterior: against one mode's Laplace", "bimodal_posterior", "docs/benchmarks.md",
     "Against mode 1's Laplace approximation the same draws were {gaps} sd off with sds {ratios}× too wide",
     bimodal_prose),
    ("the bimodal posterior: the sampled run's time", "adapt_from_noise", "docs/benchmarks.md",
     "iterations, which it reached; {secs} s)",
     lambda d: {"secs": f"{d['cases']['rows3000_seed0_fixed']['seconds']:.0f}"}),
]
PROSE += [
    ("the scale table: writing 10⁸ rows", "scale", "docs/benchmarks.md",
     "100 (10⁸; {secs} s to write) Parquet files", lambda d: {
         "secs": f"{d['generation_seconds']['100000000']:.0f}"}),
]


def scale_sgpr_1e8(d: dict) -> dict:
    """SGPR at 10⁸ rows from the subset start: its RMSE against least squares, the client, a pass's time
    against 10⁷ rows', the workers' peaks; the same budget against 50 k-means iterations at 10⁶ and 10⁷."""
    c = d["cases"]
    s8, ls8 = c["100000000/sgpr-subset"], c["100000000/linear-normal"]
    s7 = c["10000000/sgpr-subset"]
    peaks = [p / 1024 for p in s8["worker_peak_mb"]]

    def vs(n):
        sub, full = c[f"{n}/sgpr-subset"], c[f"{n}/sgpr"]
        return sub, full
    (a6, b6), (a7, b7) = vs(10**6), vs(10**7)
    gap = max(abs(a["test_rmse"] / b["test_rmse"] - 1) for a, b in ((a6, b6), (a7, b7)))
    return {"rmse": f"{s8['test_rmse']:.3f}",
            "below": f"{100 * (1 - s8['test_rmse'] / ls8['test_rmse']):.1f}",
            "client": f"{s8['client_peak_mb']:.0f}", "pass": f"{s8['seconds_per_epoch']:.0f}",
            "pass7": f"{s7['seconds_per_epoch']:.0f}", "peaks": _range(min(peaks), max(peaks), ".2f"),
            "gap": f"{100 * gap:.1f}", "r6": f"{a6['test_rmse']:.3f}\nagainst {b6['test_rmse']:.3f}",
            "r7": f"{a7['test_rmse']:.3f} against {b7['test_rmse']:.3f}",
            "t6": f"{a6['wall_seconds']:.0f} s against {b6['wall_seconds']:.0f} s",
            "t7": f"{a7['wall_seconds']:.0f} s against {b7['wall_seconds']:,.0f} s"}


PROSE += [
    ("SGPR at 10⁸ rows, the paragraph", "scale", "docs/benchmarks.md",
     "SGPR's test RMSE is {rmse} min, {below} % below exact least squares, with the client at {client} MB. A "
     "pass over\n99 million training rows took {pass} s on the two single-threaded workers, ten times the "
     "{pass7} s of 10⁷ rows.\nEach worker held its 4.0 GB of rows and peaked at {peaks} GB.", scale_sgpr_1e8),
    ("SGPR at 10⁸ rows, the budget against 50 iterations", "scale", "docs/benchmarks.md",
     "the same budget lands within {gap} % of 50 iterations from the k-means start ({r6}; {r7}), in {t6} and "
     "in {t7}.", scale_sgpr_1e8),
]


def taxi_capacity(d: dict) -> dict:
    """What an m-point sparse GP reaches on 10⁵ rows of the taxi-like table: SGPR at m = 100 and 200 and
    ADVGP at m = 100 against the floor (ratio to the nominal Bayes RMSE)."""
    c = d["cases"]
    s1, s2, a1 = c["100000/sgpr/m100/seed0"], c["100000/sgpr/m200/seed0"], c["100000/advgp/m100/seed0"]
    return {"sgpr": f"{s1['test_rmse']:.3f}", "sgpr_pct": f"{100 * (s1['ratio_to_floor'] - 1):.1f}",
            "m200": f"{100 * (s1['ratio_to_floor'] - s2['ratio_to_floor']):.1f}",
            "advgp": f"{a1['test_rmse']:.3f}", "advgp_pct": f"{100 * (a1['ratio_to_floor'] - 1):.1f}",
            "updates": f"{a1['iterations']:,}"}


PROSE += [
    ("the taxi table's capacity: SGPR", "taxi_capacity", "docs/benchmarks.md",
     "ends where the 10⁶-row fit of the table above does ({sgpr} here,", taxi_capacity),
    ("the taxi table's capacity: SGPR against the floor", "taxi_capacity", "docs/benchmarks.md",
     "{sgpr_pct} %\n  above the floor at 10⁵ and 10⁶ rows alike, and m = 200 takes {m200} percentage points "
     "off it.", taxi_capacity),
    ("the taxi table's capacity: ADVGP", "taxi_capacity", "docs/benchmarks.md",
     "reaches SGPR's RMSE on the same rows ({advgp} against\n  {sgpr}; the optimum of its objective is the "
     "collapsed bound's) — {advgp_pct} % above the floor", taxi_capacity),
    ("the taxi table's capacity: ADVGP's updates", "taxi_capacity", "docs/benchmarks.md",
     "It took {updates} updates", taxi_capacity),
]


def scale_gplvm_memory(d: dict) -> dict:
    """The GPLVM's one-round case at 10⁷ rows: the client's and the workers' peaks; the client at 10⁶."""
    c7, c6 = d["cases"]["10000000/gplvm-1"], d["cases"]["1000000/gplvm-1"]
    w = [p / 1024 for p in c7["worker_peak_mb"]]
    return {"client": f"{c7['client_peak_mb']:.0f}", "worker": _range(min(w), max(w), ".1f"),
            "client6": f"{c6['client_peak_mb']:.0f}"}


PROSE += [
    ("the GPLVM at 10⁷ rows: memory", "scale", "docs/benchmarks.md",
     "At 10⁷ rows the client's peak is {client} MB, inside item 4's 1 GB, and each worker's {worker} GB",
     scale_gplvm_memory),
    ("the GPLVM at 10⁷ rows: the client against the chunks", "scale", "docs/benchmarks.md",
     "({client6} MB in 1,000 chunks, {client} MB in 10,000)", scale_gplvm_memory),
]


def sgpr_start_prose(d: dict) -> dict:
    """Where SGPR starts, the prose: each start's test RMSE at iteration 100 (mean and range over seeds,
    k-means then subset), the gap between the means and the spread (the largest range), and the subset
    start's first iterate (range)."""
    def at(init, it):
        return [next(t["test_rmse"] for t in d["cases"][f"{init}/{s}"]["trajectory"] if t["iteration"] == it)
                for s in (0, 1, 2)]
    k, s, first = at("kmeans", 100), at("subset", 100), at("subset", 1)
    mk, ms = sum(k) / 3, sum(s) / 3
    lo, hi = sorted([mk, ms])
    return {"k": f"{mk:.3f}", "s": f"{ms:.3f}", "lo": f"{lo:.3f}", "hi": f"{hi:.3f}",
            "gap": f"{100 * (hi / lo - 1):.2f}", "spread": f"{max(max(k) - min(k), max(s) - min(s)):.3f}",
            "k_range": _range(min(k), max(k), ".3f"), "s_range": _range(min(s), max(s), ".3f"),
            "first": _range(min(first), max(first), ".2f")}


PROSE += [
    ("where SGPR starts, the benchmarks page", "sgpr_start", "docs/benchmarks.md",
     "(means {lo} and {hi}, a {gap} % gap against a {spread} spread)", sgpr_start_prose),
    ("where SGPR starts, the sparse guide", "sgpr_start", "docs/guide/sparse.md",
     "From the subset start the first iterate's test RMSE is {first} min", sgpr_start_prose),
    ("where SGPR starts, the sparse guide: at 100 iterations", "sgpr_start", "docs/guide/sparse.md",
     "within the seeds' spread (k-means {k_range}\nagainst subset {s_range})", sgpr_start_prose),
]


def exact_gradient_paired(d: dict) -> dict:
    """The registry change's exact-gradient rounds, and the same gradient re-measured alone (farm-bench)."""
    p = d["exact_gradient_paired"]
    lo, hi = p["whole_process_wall_ratio_range"]
    return {"rounds": " / ".join(f"{r:.2f}" for r in d["summary"]["exact_gradient_s"]["ratio_per_round"]),
            "after": f"{p['after_median_s']:.1f}", "before": f"{p['before_median_s']:.1f}",
            "ratio": f"{p['ratio_of_medians']:.2f}", "wall": f"{p['whole_process_wall_ratio_median']:.2f}",
            "lo": f"{lo:.2f}", "hi": f"{hi:.2f}"}


PROSE += [
    ("the registry's cost: the exact gradient re-measured", "registry_and_run_store", "docs/benchmarks.md",
     "**The exact gradient's {rounds} is the machine, not the code.**", exact_gradient_paired),
    ("the registry's cost: the exact gradient alone", "registry_and_run_store", "docs/benchmarks.md",
     "the medians were {after} s after and {before} s\nbefore (ratio **{ratio}**; whole-process wall ratio "
     "{wall}, range {lo}–{hi})", exact_gradient_paired),
]


def registry_round(d: dict) -> dict:
    """The registry change's before/after run: concrete's s/ESS ratio, SGPR's before median (the machine's
    speed that day) and ADVGP's per-round ratios (the spread)."""
    s = d["summary"]
    adv = s["advgp_partition_s"]["ratio_per_round"]
    return {"ess": f"{s['concrete_s_per_ess']['ratio_median']:.2f}",
            "now": f"{s['sgpr_eval_s']['before_median_s']:.1f}",
            "lo": f"{min(adv):.2f}", "hi": f"{max(adv):.2f}"}


PROSE += [
    ("the registry's cost: concrete's ratio and the machine", "registry_and_run_store", "docs/benchmarks.md",
     "its s/ESS differs only by wall time: {ess} in the median. The machine ran about twice as\nslowly as in "
     "the session that measured the table above (SGPR {now} s against", registry_round),
    ("the registry's cost: the spread of a round", "registry_and_run_store", "docs/benchmarks.md",
     "(ADVGP {lo}–{hi} with no change on its path)", registry_round),
    ("the registry's cost: the session before", "shared_vocabulary", "docs/benchmarks.md",
     "against {then} s), and its rounds spread", lambda d: {
         "then": f"{d['summary']['sgpr_eval_s']['before_median_s']:.2f}"}),
]


def sgpr_flights_prose(d: dict) -> dict:
    """SGPR on flights: strong and weak scaling over 1 → 2 workers, and the bound against GPyTorch's at the
    same parameters (relative difference; the jitter's cost)."""
    sc, b = d["scaling"], d["bound_at_fitted"]
    return {"strong": f"{sc['strong_speedup_1_to_2_workers']:.2f}",
            "weak": f"{sc['weak_efficiency_half_on_1_vs_full_on_2']:.2f}", "rel": _sci(b["rel_diff_float64"]),
            "jitter": f"{b['daskgp'] - b['daskgp_with_default_jitter']:.0f}"}


PROSE += [
    ("SGPR flights: scaling", "sgpr_flights", "docs/benchmarks.md",
     "Strong scaling 1 → 2 workers: {strong}× speed-up; weak scaling (half the rows on 1 worker vs all on "
     "2): {weak}\nefficiency.", sgpr_flights_prose),
    ("SGPR flights: the bounds agree", "sgpr_flights", "docs/benchmarks.md",
     "agree to **{rel}** relative (both without jitter; daskgp's default jitter of 10⁻⁶·σ² on K_mm lowers "
     "its\nbound by {jitter} nats)", sgpr_flights_prose),
]


def crossover_prose(d: dict) -> dict:
    """The small-n crossover's two-mode case (2,000 power_plant rows) in the exact guide's prose: HMC's wall
    over SGHMC's per seed, both walls, and the crossing estimate between concrete's and that case's
    geometric means (log-linear in n)."""
    p = d["cases"]["power2k"]["paired"]
    runs = d["cases"]["power2k"]["runs"]
    walls = {m: [runs[f"{m}/{s}"]["wall_seconds"] for s in p["seeds"]] for m in ("hmc", "sghmc")}
    ratios = [f"{r:.2f}×" for r in p["wall_ratio_hmc_over_sghmc"]]
    conc = d["cases"]["concrete"]["paired"]["geometric_mean_wall_ratio"]
    return {"ratios": ", ".join(ratios[:-1]) + f" and {ratios[-1]}",
            "hmc": ", ".join(f"{w:,.0f}" for w in walls["hmc"][:-1]) + f" and {walls['hmc'][-1]:,.0f}",
            "sghmc": ", ".join(f"{w:.0f}" for w in walls["sghmc"][:-1]) + f" and {walls['sghmc'][-1]:.0f}",
            "estimate": f"{d['crossover_estimate_rows']:,.0f}", "concrete": f"{conc:.2f}",
            "gm": f"{p['geometric_mean_wall_ratio']:.2f}"}


PROSE += [
    ("the small-n crossover's two-mode case, the exact guide", "small_n_crossover", "docs/guide/exact.md",
     "HMC took {ratios} SGHMC's time to the same target ({hmc} s\nagainst {sghmc} s)", crossover_prose),
    ("the small-n crossover's estimate, the exact guide", "small_n_crossover", "docs/guide/exact.md",
     "{estimate} rows, log-linear between concrete's {concrete} and the three\nseeds' geometric mean {gm}",
     crossover_prose),
]


def ulisse_bias_prose(d: dict) -> dict:
    """The paper's roulette: its noise-gradient bias on 4,096 rows, and its lengthscale bias on house_8L at
    the issue's θ (mean ± se over seeds)."""
    h4 = d["cases"]["house4k"]["summary"]["ulisse_exponential"]
    h8 = d["cases"]["house_8L"]["summary"]["ulisse_exponential"]
    return {"noise": f"{h4['bias_mean'][2]:+.2f} ± {h4['bias_se'][2]:.2f}",
            "ell": f"{h8['bias_mean'][1]:.1f} ± {h8['bias_se'][1]:.1f}".replace("-", "−")}


PROSE += [
    ("the roulettes' bias, the exact guide's prose: 4,096 rows", "ulisse_bias", "docs/guide/exact.md",
     "put the noise gradient off by {noise} in", ulisse_bias_prose),
    ("the roulettes' bias, the exact guide's prose: house_8L", "ulisse_bias", "docs/guide/exact.md",
     "was not reproduced: {ell} for the\npaper's roulette", ulisse_bias_prose),
]


def bimodal_guide(d: dict) -> dict:
    """The 3,000-row posterior in the exact guide's prose: both modes (φ, log p, sds), the importance
    sample's mass per mode, mean and sd, and the sampled run against it (mean gaps in sd, sd ratios)."""
    m1, m2 = d["modes"][:2]
    imp = d["importance"]
    run = d["runs"]["rows3000_seed0_fixed"]

    def mode(m):
        return (f"({', '.join(signed(v, '.3f') for v in m['phi'])}), log p {signed(m['log_p'], '.2f')}, sds "
                f"{m['sd'][0]:.3f}, {m['sd'][1]:.3f}, {m['sd'][2]:.3f}")

    def three(v, f, sep=", "):
        return f"{format(v[0], f)}{sep}{format(v[1], f)} and {format(v[2], f)}"
    return {"m1": mode(m1), "m2": mode(m2), "kish": f"{imp['kish_ess']:.0f}",
            "mass1": f"{100 * imp['mode_mass'][0]:.0f}", "mass2": f"{100 * imp['mode_mass'][1]:.0f}",
            "mean": ", ".join(signed(v, ".3f") for v in imp["mean"]),
            "sd": f"{imp['sd'][0]:.3f}, {imp['sd'][1]:.3f}, {imp['sd'][2]:.4f}",
            "gaps": three(run["gap_vs_importance_in_sd"], ".2f"),
            "ratios": three(run["sd_ratio_vs_importance"], ".2f")}


PROSE += [
    ("the 3,000-row posterior, the exact guide: the modes", "bimodal_posterior", "docs/guide/exact.md",
     "L-BFGS on the exact log posterior finds two modes:\n  {m1};\n  and {m2}.", bimodal_guide),
    ("the 3,000-row posterior, the exact guide: the importance sample", "bimodal_posterior",
     "docs/guide/exact.md",
     "(1,000 exact log densities, Kish ESS {kish}) puts **{mass1} % of\n  the posterior mass at the higher "
     "mode and {mass2} % at the other**; posterior mean ({mean}),\n  sd ({sd}).", bimodal_guide),
    ("the 3,000-row posterior, the exact guide: the sampled run", "bimodal_posterior", "docs/guide/exact.md",
     "against the importance-sampling posterior its means are {gaps} sd off and its sds {ratios}×",
     bimodal_guide),
]


def advgp_converged_prose(d: dict) -> dict:
    """ADVGP against SVGP run to convergence on flights: the paired gap, SVGP's converged RMSE, and issue
    30's ADADELTA run at 120 s (mean ± sd over seeds)."""
    r, r30 = d["advgp"]["advgp_vs_svgp_rmse"], d["advgp_issue30"]["advgp_vs_svgp_rmse"]
    return {"gap": f"{r['advgp_minus_svgp'][0]:.2f} ± {r['advgp_minus_svgp'][1]:.2f}",
            "svgp": f"{r['svgp'][0]:.2f}", "old": f"{r30['advgp'][0]:.2f} ± {r30['advgp'][1]:.2f}"}


PROSE += [
    ("ADVGP against converged SVGP, the guide's prose: the gap", "peers_converged", "docs/guide/advgp.md",
     "**Converged SVGP is better by {gap} minutes**", advgp_converged_prose),
    ("ADVGP against converged SVGP, the guide's prose: the target", "peers_converged", "docs/guide/advgp.md",
     "ADVGP never reached {svgp} in its budget", advgp_converged_prose),
    ("ADVGP against converged SVGP, the guide's prose: issue 30's run", "peers_converged",
     "docs/guide/advgp.md", "ADVGP was at {old} at 120 s", advgp_converged_prose),
]


def advgp_flights_prose(d: dict) -> dict:
    """Issue 30's ADVGP grid on flights against GPyTorch SVGP: the targets, the nearest m = 100 run, the
    best configuration, equal time at 120 s and the seconds per update."""
    adv = d["advgp"]
    m100 = [adv[f"m=100,tau={t}"] for t in (0, 8, 32)]
    at120 = [nearest_at(c["curve"], 120, 2) for c in m100]
    spu = [c["seconds_per_update"] for c in adv.values()]
    return {"svgp_final": f"{d['time_to_svgp_final_rmse']['svgp_final_rmse']:.2f}",
            "svgp_t": f"{d['time_to_svgp_final_rmse']['svgp']:.0f}",
            "near": f"{min(c['final_rmse'] for c in m100):.2f}",
            "best": f"{d['best']['final_rmse']:.2f}", "best_m": str(d["best"]["m"]),
            "best_tau": str(d["best"]["tau"]),
            "forest": f"{d['best']['gap_to_random_forest']:.1f}",
            "lo120": f"{min(at120):.2f}", "hi120": f"{max(at120):.2f}",
            "svgp120": f"{nearest_at(d['svgp']['curve'], 120, 1):.2f}",
            "spu": f"{min(spu):.3f}–{max(spu):.2f}", "paper": f"{d['paper_seconds_per_update']:.2f}"}


PROSE += [
    ("issue 30's ADVGP grid: the targets", "advgp_flights", "docs/guide/advgp.md",
     "ADVGP did not reach SVGP's final {svgp_final} within its 240 s, so `ratio` is\n    None. SVGP first "
     "reached it after {svgp_t} s; the nearest ADVGP m = 100 run was {near} at 240 s. The best\n    "
     "configuration (m = {best_m}, τ = {best_tau}) ends at {best}, {forest} minutes above the forest",
     advgp_flights_prose),
    ("issue 30's ADVGP grid: equal time", "advgp_flights", "docs/guide/advgp.md",
     "At equal time (120 s), ADVGP m = 100 is {lo120}–{hi120} against SVGP's {svgp120}.",
     advgp_flights_prose),
    ("issue 30's ADVGP grid: seconds per update", "advgp_flights", "docs/guide/advgp.md",
     "**Seconds per update:** {spu} s here against the paper's {paper} s", advgp_flights_prose),
]


def gpc_converged_prose(d: dict) -> dict:
    """MNIST odd/even at m = 200: SEP against EP and both against converged SVGP (paired test NLL)."""
    g = d["gpc"]
    se, ss, es = g["sep_vs_ep_test_nll"], g["sep_vs_svgp_test_nll"], g["ep_vs_svgp_test_nll"]

    def pm(v, f):
        return f"{format(v[0], '+' + f)} ± {format(v[1], f)}".replace("-", "−")
    return {"sep_ep": pm(se["sep_minus_ep"], ".5f"), "n_ep": str(len(se["seeds"])),
            "r_ep": f"{se['ratio_of_means']:.4f}", "n_svgp": str(len(ss["seeds"])),
            "sep_svgp": pm(ss["sep_minus_svgp"], ".4f").lstrip("+"), "r_svgp": f"{ss['ratio_of_means']:.3f}",
            "ep_svgp": pm(es["ep_minus_svgp"], ".4f").lstrip("+")}


PROSE += [
    ("MNIST, SEP against EP, the classification guide", "peers_converged", "docs/guide/gpc.md",
     "**SEP is level with EP**: SEP − EP = {sep_ep} nats over\n      {n_ep} splits (ratio of means {r_ep})",
     gpc_converged_prose),
    ("MNIST, SEP and EP against converged SVGP, the classification guide", "peers_converged",
     "docs/guide/gpc.md",
     "**Against converged SVGP** ({n_svgp} splits): SEP − SVGP = {sep_svgp}\n      (SEP / SVGP {r_svgp}); "
     "EP − SVGP = {ep_svgp}.", gpc_converged_prose),
]


def gpc_fit_times(d: dict) -> dict:
    """The classification guide's accuracy tables' companions: logistic regression's test error / NLL and
    each method's fit seconds (a range over m on breast cancer; per m on MNIST)."""
    a = d["accuracy"]

    def lr(task, nd):
        r = a[task]["logistic_regression"]
        return f"{r['test_error']:.{nd}f} / {r['test_nll']:.{nd}f}"

    def secs(task, method):
        return [v["seconds"] for k, v in a[task].items() if k.startswith(f"{method},")]

    bc = {m: _range(min(secs("breast_cancer", m)), max(secs("breast_cancer", m)), ".0f")
          for m in ("ep", "sep", "adf", "svgp")}
    mn = {m: " / ".join(f"{a['mnist_parity'][f'{m},m={k}']['seconds']:.0f}" for k in (200, 400, 500))
          for m in ("ep", "sep", "adf", "svgp")}
    return {"bc_lr": lr("breast_cancer", 3), "mn_lr": lr("mnist_parity", 3),
            **{f"bc_{m}": v for m, v in bc.items()}, **{f"mn_{m}": v for m, v in mn.items()}}


PROSE += [
    ("breast cancer: logistic regression and fit times", "gpc", "docs/guide/gpc.md",
     "Logistic regression {bc_lr}. Fit times: EP {bc_ep} s, SEP {bc_sep} s, ADF {bc_adf} s, "
     "SVGP {bc_svgp} s.",
     gpc_fit_times),
    ("MNIST: fit times and logistic regression", "gpc", "docs/guide/gpc.md",
     "Fit seconds at m = 200 / 400 / 500: EP {mn_ep}, SEP {mn_sep}, ADF {mn_adf}, SVGP\n  {mn_svgp} (its "
     "2,000 steps; the machine was shared with other work during the m = 400 fits).\n  Logistic regression: "
     "{mn_lr};", gpc_fit_times),
]
PROSE += [
    ("the probes' rule: the roofline's noise readings", "exact_roofline", "docs/guide/exact.md",
     "the roofline measured λ {l8} on 8,192 rows and {l22} on all 22,784", lambda d: {
         "l8": f"{d['cases']['after/8192']['noise_lambda_32']:.2f}",
         "l22": f"{d['cases']['after/22784']['noise_lambda_32']:.2f}"}),
]
PROSE += [
    ("flights delayed: the baselines", "gpc", "docs/guide/gpc.md",
     "(class prior {prior}, logistic regression {lr} in\n  {secs} s)", lambda d: {
         "prior": f"{d['flights']['class_prior']['test_nll']:.3f}",
         "lr": f"{d['flights']['logistic_regression']['test_nll']:.3f}",
         "secs": f"{d['flights']['logistic_regression']['seconds']:.1f}"}),
    ("the bimodal posterior: the noise at the mode", "adapt_from_noise", "docs/benchmarks.md",
     "(λ = {lam} at the mode)", lambda d: {
         "lam": f"{d['cases']['rows3000_seed0_fixed']['noise_at_mode']:.2f}"}),
]
PROSE += [
    ("HMC's adaptation: 50 with windows, the slower seeds", "hmc_adaptation", "docs/guide/exact.md",
     "than 150 in one seed of each ({concrete}× and {power}×", lambda d: {
         "concrete": f"{max(d['cases']['concrete']['paired']['50']['wall_ratio']):.1f}",
         "power": f"{max(d['cases']['power1k']['paired']['50']['wall_ratio']):.1f}"}),
]


def advgp_round_trips(d: dict) -> dict:
    """A round trip carrying θ: as a task through the scheduler and as an actor call, at m = 100 and 500."""
    r1, r5 = d["round_trips"]["m=100"], d["round_trips"]["m=500"]
    return {"t1": f"{1e3 * r1['task_seconds_median']:.1f}", "a1": f"{1e3 * r1['actor_seconds_median']:.1f}",
            "f1": f"{r1['theta_floats']:,}", "f5": f"{r5['theta_floats']:,}",
            "t5": f"{1e3 * r5['task_seconds_median']:.1f}", "a5": f"{1e3 * r5['actor_seconds_median']:.1f}"}


PROSE += [
    ("ADVGP's server: a task against an actor", "advgp_flights", "docs/guide/advgp.md",
     "a round trip carrying θ takes **{t1} ms** as a task through the scheduler and **{a1} ms** as\n    an "
     "actor call (m = 100, {f1} floats; m = 500, {f5} floats: {t5} ms and {a5} ms)", advgp_round_trips),
]
