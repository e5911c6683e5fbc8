"""The docs' benchmark tables rendered from their results JSONs, a value function per table for
``benchmarks/claims.py``'s claims (issue 54, item 3): each takes the JSON (a dict) and returns the blanks of
its claim's template — usually ``rows``, the table's body lines as the page prints them."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from _common import nearest_at, read_result  # benchmarks/ is on the path, as for claims.py


def rel_error(v: float) -> str:
    """A relative error as the tables print it: two decimals above 1, three above 0.01, else four."""
    return f"{v:.2f}" if v >= 1 else f"{v:.3f}" if v >= 0.01 else f"{v:.4f}"


def exact_gradient_table(d: dict) -> dict:
    """The exact-gradient table's rows (mean s / gradient over seeds, mean relative error, peak RSS) and the
    two ratios under it."""
    labels = [("daskgp", "ulisse", "(a) daskgp ULISSE, N_r = 4, rank-1000 pivoted-Cholesky preconditioner, "
               "float64"),
              ("daskgp", "ulisse_reused_pivots", "(a′) same, pivots kept from an earlier θ (a sampler's "
               "steady state)"),
              ("daskgp", "cg", "(b) daskgp CG to 1e-8, N_r = 4, same preconditioner"),
              ("daskgp", "accurate", "(e) daskgp N_r = 128 ULISSE (≤ 1 % error)"),
              ("peers", "gpytorch_default", "(d) GPyTorch defaults, float32"),
              ("peers", "gpytorch_cg_tol_0.01", "(f) GPyTorch, cg_tolerance 0.01, float32")]
    rows = []
    for side, key, label in labels:
        c = d[side][key]
        m = c["summary"]
        rows.append(f"| {label} | {m['seconds_mean']:.2f} | {rel_error(m['rel_error_mean'])} "
                    f"| {c['peak_rss_gb']:.1f} GB |")
    ex = d["exact"]
    rows.append(f"| (c) exact Cholesky (single-threaded LAPACK, see below; from the previous run) | "
                f"{ex['seconds']:.1f} | 0 | {ex['peak_rss_gb']:.1f} GB |")
    return {"rows": "\n".join(rows), "accurate": f"{d['ratio_accurate']:.2f}", "ratio": f"{d['ratio']:.2f}"}


def sgld_concrete(d: dict) -> dict:
    """concrete's default sampler against exact MH: each side's row values and the posterior comparison."""
    out = {}
    for side in ("mh", "sghmc"):
        r = d[side]
        out[side] = (f"{r['seconds']:.0f}", f"{r['min_ess_bulk']:,.0f} / {r['min_ess_tail']:,.0f}",
                     f"{r['sec_per_ess_bulk']:.2f}", f"{r['sec_per_ess_tail']:.2f}",
                     f"{r['iterations_per_ess']:.2g}" if r["iterations_per_ess"] >= 10 else
                     f"{r['iterations_per_ess']:.1f}", f"{max(t['r_hat'] for t in r['table'].values()):.3f}")
    mh, sg = out["mh"], out["sghmc"]
    rows = []
    for name, label, fmt in (("variance", "s2 (variance)", ".3f"), ("lengthscale", "l (lengthscale)", ".3f"),
                             ("noise", "noise", ".4f")):
        a, b = d["mh"]["table"][name], d["sghmc"]["table"][name]
        c = d["comparison"]["sghmc"][name]
        rows.append(f"| {label} | {a['mean']:{fmt}} ({a['sd']:{fmt}}) | "
                    f"{b['mean']:{fmt}} ({b['sd']:{fmt}}) | "
                    f"{c['mean_diff_over_sd_mh']:.3f} | {c['sd_ratio']:.3f} |")
    return {"mh": f"| MH (exact Cholesky) | {mh[0]} | {mh[1]} | {mh[2]} / {mh[3]} | {mh[4]} | {mh[5]} |",
            "sghmc": f"| {sg[0]} (warmup {d['sghmc']['warmup_seconds']:.0f}) | {sg[1]} | "
                     f"**{sg[2]}** / {sg[3]} | "
                     f"{sg[4]} | {sg[5]} |",
            "rows": "\n".join(rows), "best": f"{d['sghmc']['sec_per_ess_bulk']:.3f}",
            "ratio": f"{d['ratio']:.2f}", "vs_mh": f"{d['sec_per_ess_vs_mh']['sghmc']:.2f}"}


def bimodal(d: dict) -> dict:
    """The 3,000-row power_plant posterior's table: each mode, the importance-sampled moments, the draws."""
    def three(v, fmt=".3f"):
        return ", ".join(format(x, fmt).replace("-", "−") for x in v)

    rows = []
    for i, (m, mass) in enumerate(zip(d["modes"], d["importance"]["laplace_mode_mass"], strict=True), 1):
        head = f"| mode {i} (log p {m['log_p']:.2f}, Laplace mass {100 * mass:.0f} %) | "
        rows.append(head.replace("-", "−")
                    + f"{three(m['phi'])} | {three(m['sd'])} |")
    imp = d["importance"]
    w = imp["mode_mass"]
    rows.append(f"| exact posterior (importance sampling; {100 * w[0]:.0f} / {100 * w[1]:.0f} % mass) | "
                f"{three(imp['mean'])} | {three(imp['sd'][:2])}, {imp['sd'][2]:.4f} |")
    run = next(iter(d["runs"].values()))
    ess = run["ess_bulk"]
    rows.append(f"| daskgp's draws (ESS {min(ess):.0f}–{max(ess):.0f}) | {three(run['mean'])} | "
                f"{three(run['sd'][:2])}, {run['sd'][2]:.4f} |")
    se = f"{max(ess) ** -0.5:.2f}–{min(ess) ** -0.5:.2f}"
    rows.append(f"| gap, in exact sd (se of the draws' means {se}) | "
                f"{three(run['gap_vs_importance_in_sd'], '.2f')} | ratio "
                f"{three(run['sd_ratio_vs_importance'], '.2f')} |")
    return {"rows": "\n".join(rows), "kish": f"{imp['kish_ess']:.0f}"}


def gpu_gradient(d: dict) -> dict:
    """The GPU page's first table: a row per data set and size, each from its results JSON (house_8L's is
    ``d``, flights' sizes are read beside it), medians over seeds."""
    def secs(side: dict, key: str, error_unit: str = "") -> str:
        c = side.get(key) if side else None
        if c is None:
            return "not run"
        if "error" in c:
            return "out of memory" if "memory" in c["error"].lower() else "failed"
        m = c["summary"]
        out = f"{m['seconds_median']:#.3g} s"
        if error_unit and "rel_error_mean" in m:
            e = m["rel_error_mean"]
            out += " (exact)" if e < 1e-5 else f" ({100 * e:.2f} % error)" if error_unit == "long" else \
                f" ({100 * e:.1f} %)"
        return out

    rows = []
    flights = [(f"flights, {n:,}", read_result(f"gpu_gradient_flights_rows{n}"))
               for n in (50000, 100000, 150000)]
    for label, doc in [("house_8L, 22,784", d), *flights]:
        ours, peers = doc["daskgp"], doc.get("peers") or {}
        rows.append(f"| {label} | {secs(ours, 'sampler_gpu', 'long')} | {secs(ours, 'sampler_cpu')} | "
                    f"{secs(peers, 'gpytorch_cg_tol_0.01_float32', 'short')} | "
                    f"{secs(peers, 'gpytorch_cholesky_float64', 'short')} |")
    return {"rows": "\n".join(rows), "gpu_vs_cpu": f"{d['gpu_vs_cpu']['sampler']:.1f}"}


def sgpr_flights_rows(d: dict) -> dict:
    """The flights test-RMSE table: the baselines and SGPR (fit seconds) per training size."""
    rows = []
    for key, label in (("7K", "7,000"), ("70K", "70,000"), ("full", "246,468 (all)")):
        r = d["rmse"][key]
        rows.append(f"| {label} | {r['mean']:.2f} | {r['linear']:.2f} | {r['ridge']:.2f} | "
                    f"{r['random_forest']:.2f} | **{r['daskgp']:.2f}** ({r['daskgp_seconds']:.0f}) |")
    return {"rows": "\n".join(rows)}


def run_store(d: dict) -> dict:
    """The run store's table: write, checkpoint size and opening, today's format against the previous."""
    rows = []
    for r in d["rows"]:
        size = "concrete-sized" if r["n"] == 1030 else "house_8L-sized"
        rows.append(f"| {size} (n = {r['n']:,}), {r['draws_per_chain']:,} draws | "
                    f"{r['format2_s_per_block_median']:.3f} vs {r['format1_s_per_block_median']:.3f} | "
                    f"{r['ratio_write']:.2f} | "
                    f"{r['format2_checkpoint_mb']:.2g} vs {r['format1_checkpoint_mb']:.2g} | "
                    f"{r['format2_open_s']:.2f} vs {r['format1_open_s']:.2f} | {r['ratio_open']:.2f} |")
    return {"rows": "\n".join(rows)}


def nuts_peer(d: dict) -> dict:
    """The withdrawn NUTS comparison's table (diagonal mass, chains in sequence), kept as its run's record."""
    c = d["cases"]["concrete"]
    nuts, ours = c["nuts"], c["daskgp"]
    steps = nuts["sampling_gradients"] + nuts["warmup_gradients"]
    sampling_only = c["ratio"] / c["ratio_vs_nuts_sampling_only"] * nuts["seconds_per_ess"]
    per_step = nuts["wall_seconds"] / steps  # the wall, warmup and compilation included, per step
    iters = ours["kept_draws"] + ours["warmup_draws"]
    return {"rows": f"| NUTS (NumPyro), 4 × ({nuts['warmup_iterations']} + {nuts['sampling_iterations']}) | "
                    f"{nuts['wall_seconds']:,.0f} | {nuts['min_ess']:.0f} | {nuts['max_rhat']:.3f} | "
                    f"{nuts['seconds_per_ess']:.2f} ({sampling_only:.2f} with the warmup left out) | "
                    f"{steps:,} leapfrog steps ({per_step:.3f} s each) |\n"
                    f"| **daskgp SGHMC** (defaults) | {ours['wall_seconds']:.0f} | {ours['min_ess']:.0f} | "
                    f"{ours['max_rhat']:.3f} | **{ours['seconds_per_ess']:.2f}** | "
                    f"{ours['chains']} × {iters:,} iterations |"}


def sgld_house8l(d: dict) -> dict:
    """The SGLD throughput table on house_8L (daskgp 0.2.0's code, 2 × 100 iterations)."""
    t = d["time_split_per_iteration"]
    f = t["fractions"]
    e = d["sec_per_ess"]
    return {"per_hour": f"{d['iterations_per_hour']:.0f}",
            "per_chain": f"{d['seconds_per_iteration_per_chain']:.1f}",
            "cg": f"{d['cg_iterations_per_iteration']:.1f} / {d['operator_passes_per_iteration']:.1f}",
            "kernel": f"{t['kernel_evaluation_s']:.1f} s ({100 * f['kernel_evaluation']:.0f} %)",
            "cmvp": f"≤ {t['cmvp_upper_bound_s']:.1f} s from pass counts) | {t['cmvp_s']:.1f} s "
                    f"({100 * f['cmvp']:.0f} %)",
            "overhead": f"{t['scheduler_and_driver_overhead_s']:.1f} s".replace("-", "−"),
            "ess": f"{e['iterations_per_ess_from_concrete']:,.0f} iterations per ESS × "
                   f"{e['estimated_sec_per_ess'] / e['iterations_per_ess_from_concrete']:.1f} s) | ≈ "
                   f"{round(e['estimated_sec_per_ess'], -2):,.0f}"}


def slow_link(d: dict) -> dict:
    """The slow-link table: per rate and seed, τ = 0 against τ = 8 (s / update, seconds to RMSE 4.15 with
    the sooner in bold, final RMSE), and τ = 8's mean factor in updates per second over the slow link."""
    rows, factors = [], []
    for key, case in d["cases"].items():
        rate, seed = key.split("/")
        a, b = case["0"], case["8"]
        ta, tb = (c["seconds_to_rmse"]["4.15"] for c in (a, b))
        fa, fb = (f"{t:.1f}" if t is not None else "not reached" for t in (ta, tb))
        if ta is not None and (tb is None or ta < tb):
            fa = f"**{fa}**"
        elif tb is not None:
            fb = f"**{fb}**"
        rows.append(f"| {rate.replace('kbit', ' kbit/s')} | {seed.removeprefix('seed')} | "
                    f"{a['seconds_per_update']:.3f} / {b['seconds_per_update']:.3f} | {fa} / {fb} | "
                    f"{a['final_rmse']:.3f} / {b['final_rmse']:.3f} |")
        if rate != "none":
            factors.append(case["ratio_seconds_per_update"])
    return {"rows": "\n".join(rows), "factor": f"{sum(factors) / len(factors):.1f}"}


VOCABULARY_ROWS = (("sgpr_eval_s", "SGPR bound + gradient, flights (246,468 rows, m = 100, 2 workers)", 3),
                    ("advgp_partition_s", "ADVGP partition objective + gradient (20,000 rows", 3),
                    ("gpc_sep_pass_s", "SEP pass with gradient (20,000 rows", 3),
                    ("exact_gradient_s", "exact stochastic gradient, house_8L (22,784 rows", 1),
                    ("concrete_s_per_ess", "concrete, seconds per effective sample (ESS 400)", 3))


def vocabulary(d: dict) -> dict:
    """A before/after timing table of ``shared_vocabulary.py``: medians, the per-round ratios, the Matérn 3/2
    figure. One claim per row (its label's start, then every number of the row)."""
    out = {}
    two_rounds = len(d["rounds"]) == 2
    for key, label, dec in VOCABULARY_ROWS:
        m = d["summary"].get(key)
        if m is None:
            continue
        fmt = f".{dec}f" if m["before_median_s"] < 1 or dec == 1 else ".3f"
        if two_rounds:  # each round's own medians, side by side
            med = [[statistics.median(r[side][key]) for r in d["rounds"]] for side in ("before", "after")]
            cells = " | ".join(" / ".join(format(v, fmt) for v in side) for side in med)
            ratios = " / ".join(f"{r:.2f}" for r in m["ratio_per_round"])
            cells += f" | {ratios}"
        else:
            fmt = ".4f" if m["before_median_s"] < 0.1 else ".3f" if m["before_median_s"] < 10 else ".2f"
            cells = (f"{m['before_median_s']:{fmt}} | {m['after_median_s']:{fmt}} | "
                     + " / ".join(f"{r:.2f}" for r in m["ratio_per_round"]) + f" | {m['ratio_median']:.2f}")
        mat = m["matern32_after_median_s"]
        last = "—" if mat is None else f"{mat:.2f} s" if mat > 1 else f"{mat:.3f} s"
        out[key] = f"{label}" + "{rest}" + f" | {cells} | {last} |"
    return out


def vocabulary_row(key: str) -> Callable[[dict], dict]:
    def values(d: dict) -> dict:
        template = vocabulary(d)[key]
        head, tail = template.split("{rest}")
        return {"head": head, "tail": tail}
    return values


def first_contact(d: dict) -> dict:
    """Start-up and a small prediction, before against after (medians of 5 fresh processes)."""
    b, a, p = d["before"], d["after"], d["predict_5_rows_concrete"]

    def row(before, after, digits=2):
        return f"{before:.2f} s | {after:.{digits}f} s | {after / before:#.2g}"
    return {"rows": "\n".join([
        f"| `import daskgp` | {row(b['import']['median'], a['import']['median'])} |",
        f"| `daskgp --help` | {row(b['help']['median'], a['help']['median'])} |",
        "| predict at 5 rows of concrete (50 draws, run loaded), quiet machine | "
        f"{row(p['default_blas_threads']['median'], p['chosen_threads']['median'])} |",
        "| the same with one spinning process per core | "
        f"{row(p['default_blas_threads_with_2_busy_processes']['median'],
               p['chosen_threads_with_2_busy_processes']['median'])} |"])}


def sgpr_start(d: dict) -> dict:
    """Where SGPR starts: test RMSE at iterations 1, 5, 10, 20, 50, 100 for each start and seed, the bound at
    100 and the bound evaluations."""
    def at(init, it):
        vals = []
        for seed in (0, 1, 2):
            tr = d["cases"][f"{init}/{seed}"]["trajectory"]
            vals.append(next(t["test_rmse"] for t in tr if t["iteration"] == it))
        return ", ".join(f"{v:.3f}" for v in vals)

    def total(init, what):
        return ", ".join(f"{what(d['cases'][f'{init}/{seed}']):,.0f}" for seed in (0, 1, 2))

    rows = []
    for it in (1, 5, 10, 20, 50, 100):
        k, sub = at("kmeans", it), at("subset", it)
        if it == 1:
            sub = f"**{sub}**"
        if it == 100:
            k = f"**{k}**"
        rows.append(f"| {it} | {k} | {sub} |")
    last = {init: (lambda c: c["trajectory"][-1]["bound"]) for init in ("kmeans", "subset")}
    rows.append(f"| bound at 100 (nats) | {total('kmeans', last['kmeans'])} | "
                f"{total('subset', last['subset'])} |")
    rows.append(f"| bound evaluations | {total('kmeans', lambda c: c['evaluations'])} | "
                f"{total('subset', lambda c: c['evaluations'])} |")
    return {"rows": "\n".join(rows)}


def signed(v: float, fmt: str = ".1f") -> str:
    """A number with a true minus sign, as the docs print them."""
    return format(v, fmt).replace("-", "−")


def ulisse_bias(d: dict) -> dict:
    """The roulettes' bias against CG, in standard errors, per case; and seconds × λ where it was measured."""
    labels = {"concrete": "concrete, 1,030 rows, mode", "house4k": "house_8L, 4,096 rows, mode",
              "house_8L": "house_8L, 22,784 rows, θ = (1, 2, 0.3), 4 probes, es_tol 3e-2, rank 1,000"}
    rows = []
    for key, label in labels.items():
        c = d["cases"][key]
        sm = c["summary"]
        z = []
        for r in ("ulisse_exponential", "ulisse_increment", "ulisse_residual"):
            cells = [signed(v) for v in sm[r]["bias_z"]]
            cells = [f"**{x}**" if abs(v) > 10 else x for x, v in zip(cells, sm[r]["bias_z"], strict=True)]
            z.append(" / ".join(cells))
        lam = [sm[r].get("seconds_times_lambda") for r in ("cg", "ulisse_exponential", "ulisse_increment",
                                                          "ulisse_residual")]
        tail = " / ".join(f"{v:.2f}" for v in lam) if None not in lam else "–"
        rows.append(f"| {label} | {sm['seeds']} | {sm['cg']['max_cg_iterations_mean']:.0f} | "
                    f"{' | '.join(z)} | {tail} |")
    return {"rows": "\n".join(rows)}


def warmup_exact(d: dict) -> dict:
    """The exact warmup against the stochastic ascent, per case and seed."""
    label = {"concrete": "concrete, 1,030", "power_plant:2000": "power_plant, 2,000 random"}
    rows = []
    for c in d["cases"]:
        gap = ", ".join(signed(v, ".1f" if abs(v) >= 1 else ".2f") for v in c["ascent_gap_sd"])
        rat = ", ".join(f"{v:.2f}" for v in c["ascent_sd_ratio"])
        bold = [i for i, v in enumerate(c["ascent_gap_sd"]) if abs(v) > 5]
        if bold:  # the docs mark a gap beyond 5 sd and the sds off by more than half
            gap = ", ".join(f"**{x}**" if i in bold else x for i, x in enumerate(gap.split(", ")))
            big = [f"{v:.2f}" for v in c["ascent_sd_ratio"] if abs(v - 1) > 0.5]
            rat = f"**{', '.join(big)}**" + rat[len(", ".join(big)):] if big and rat.startswith(
                ", ".join(big)) else rat
        rows.append(f"| {label[c['case']]} | {c['seed']} | {c['map']['seconds']:.1f} | "
                    f"{c['ascent']['seconds']:.1f} ({c['ascent']['gradients']}) | {c['speedup']:.1f} | "
                    f"{gap} | {rat} |")
    return {f"row{i}": r for i, r in enumerate(rows)}


def warmup_resume(d: dict) -> dict:
    """What committing the warmup costs: per seed, one segment against committed every 10."""
    out = {"ratio": f"{d['ratio']:.2f}"}
    for i, s in enumerate(d["seeds"]):
        w, c = s["whole"], s["committed"]
        out[f"row{i}"] = (f"| {s['seed']} | {w['warmup_seconds']:.1f} | {c['warmup_seconds']:.1f} | "
                          f"{c['warmup_seconds'] / w['warmup_seconds']:.2f} |")
    return out


def exact_scaling(d: dict) -> dict:
    """Products on 1 and 2 workers per n, the communication model's table, the gradient on 1 and 2."""
    k1, k2 = d["results"]["K1"], d["results"]["K2"]
    rows = []
    for n, sp in d["speedup_per_product"].items():
        rows.append(f"| {int(n):,} | {1000 * k1['products'][n]['median']:.0f} | "
                    f"{1000 * k2['products'][n]['median']:.0f} | {sp:.2f}× |")
    model = []
    for r in d["model"]["table"]:
        model.append(f"| {r['n']:.0e} | {r['workers']} | {r['compute']:.2f} | "
                     f"{r['communication'] + r['latency']:.2f} | {100 * r['communication_share']:.0f}% | "
                     f"{r['cache_gb_per_worker']:.1f} |")
    return {"rows": "\n".join(rows), "model": "\n".join(model),
            "one": f"{k1['gradients']['median']:.1f}", "two": f"{k2['gradients']['median']:.1f}",
            "ratio": f"{d['ratio']:.2f}", "eff": f"{d['efficiency']:.2f}"}


def gplvm_scoring(d: dict) -> dict:
    """The GPLVM classifier's scoring before (bound at every inducing input) and now (predictive start)."""
    rows = []
    for c in d["cases"]:
        g = c["gain_difference_nats"]
        rows.append(f"| {c['inducing']} | {c['seed']} | {c['bound']['seconds']:.1f} | "
                    f"{c['predictive']['seconds']:.1f} | {c['speedup']:.2f} | {c['bound']['accuracy']:.3f} / "
                    f"{c['predictive']['accuracy']:.3f} | {100 * g['share_worse_by_1_nat']:.2f} % / "
                    f"{100 * g['share_better_by_1_nat']:.2f} % |")
    return {"rows": "\n".join(rows)}


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def gpu_page(d: dict) -> dict:
    """The GPU page's two gradient tables: house_8L per configuration (seconds, relative error mean / max,
    GPU memory), and flights' first N rows per n (daskgp's seconds, CG iterations, memory; GPyTorch's)."""
    def gib(c):
        return f"{c['gpu_peak_bytes'] / 2**30:.1f} GiB" if c.get("gpu_peak_bytes") else "—"

    def err(m, fmt):
        if m["rel_error_mean"] < 1e-5:  # the exact side: one significant digit, as 2·10⁻⁷
            mantissa, exponent = f"{m['rel_error_mean']:.0e}".split("e")
            return f"{mantissa}·10{str(int(exponent)).translate(SUPERSCRIPT)}"
        return f"{100 * m['rel_error_mean']:{fmt}} % / {100 * m['rel_error_max']:{fmt}} %"

    ours, peers = d["daskgp"], d["peers"]
    spec = [("| daskgp, the default sampler's gradient (32 probes, CG 1e-6, rank 2,000) | H200 | ",
             ours["sampler_gpu"], ".3f", ".2f", True),
            ("| same | 16 CPU cores, same machine | ", ours["sampler_cpu"], ".2f", ".2f", False),
            ("| daskgp, 4 probes, CG 1e-8, rank 1,000 | H200 | ", ours["cg_gpu"], ".3f", ".1f", False),
            ("| same | 16 CPU cores | ", ours["cg_cpu"], ".2f", ".1f", False),
            ("| GPyTorch, its defaults (float32, CG tolerance 1) | H200 | ",
             peers["gpytorch_default_float32"], ".3f", ".0f", False),
            ("| GPyTorch, CG tolerance 0.01, float32 | H200 | ", peers["gpytorch_cg_tol_0.01_float32"], ".3f",
             ".1f", False),
            ("| GPyTorch, float64 Cholesky (exact) | H200 | ", peers["gpytorch_cholesky_float64"], ".3f", "",
             False)]
    rows = []
    for head, c, sfmt, efmt, bold in spec:
        sec = format(c["summary"]["seconds_median"], sfmt)
        rows.append(f"{head}{'**' + sec + '**' if bold else sec} | {err(c['summary'], efmt)} | {gib(c)} |")

    flights = []
    for n in (50000, 100000, 150000):
        doc = read_result(f"gpu_gradient_flights_rows{n}")
        g = doc["daskgp"]["sampler_gpu"]
        sec = f"{g['summary']['seconds_median']:#.3g}"
        sec = sec if n == 50000 else f"**{sec}**"
        cells = []
        for key in ("gpytorch_default_float32", "gpytorch_cg_tol_0.01_float32", "gpytorch_cholesky_float64"):
            c = (doc.get("peers") or {}).get(key)
            cells.append("not run" if c is None else "out of memory" if "error" in c else
                         f"{c['summary']['seconds_median']:.2f} s, {c['gpu_peak_bytes'] / 2**30:.0f} GiB")
        flights.append(f"| {n:,} | {sec} | {max(g['first']['cg_iterations'])} | {gib(g)} | "
                       f"{' | '.join(cells)} |")
    every = read_result("gpu_gradient_flights_rows273853")["daskgp"]["sampler_gpu"]
    if "TimeoutExpired" in every.get("error", ""):  # the run's one try at every row, stopped by its limit
        flights.append(f"| 273,853 (every row; kernel rows not cached) | not finished in "
                       f"{every['wall_seconds']:.0f} s | — | — | — | — | — |")
    return {"rows": "\n".join(rows), "flights": "\n".join(flights)}


def ngd_flights_prose(d: dict) -> dict:
    """The numbers of the sparse-peer section's flights paragraphs: SGPR's and ADVGP's paired differences
    from the peer and from each other, per seed at 300 s, iterations, updates and the peer's steps."""
    task = d["tasks"]["flights"]
    at, seeds = task["at"], task["seeds"]

    def diff(t, key, fmt="+.2f"):
        m, sd = at[t][key]
        return f"{m:{fmt}} ± {sd:.2f}".replace("-", "−")

    full = [v for v in seeds.values() if v["advgp"]["seconds"] > 0.9 * task["budget"]]  # not stopped early
    spu = [v["advgp"]["seconds_per_update"] for v in full]
    ups = [v["advgp"]["updates"] for v in full]
    steps = [v["peer"]["steps"] for v in seeds.values()]
    its = [v["sgpr"]["iterations"] for v in seeds.values()]
    early = [(k, v["advgp"]) for k, v in seeds.items() if v["advgp"]["seconds"] <= 0.9 * task["budget"]]
    return {"sgpr": ", ".join(f"{-at[t]['sgpr_minus_peer'][0]:.2f}" for t in ("60s", "150s")) + " and "
                    + f"{-at['300s']['sgpr_minus_peer'][0]:.2f}",
            "sa60": diff("60s", "sgpr_minus_advgp"), "sa150": diff("150s", "sgpr_minus_advgp"),
            "sa300": diff("300s", "sgpr_minus_advgp"), "its": f"{min(its)}–{max(its)}",
            "adv": ", ".join(f"{-at[t]['advgp_minus_peer'][0]:.2f}" for t in ("60s", "150s")) + " and "
                   + f"{-at['300s']['advgp_minus_peer'][0]:.2f}",
            "ratio": f"{d['ratio']['flights']:.3f}",
            "ours": ", ".join(f"{v['advgp']['test_rmse']:.2f}" for v in seeds.values()),
            "peer": ", ".join(f"{v['peer']['test_rmse']:.2f}" for v in seeds.values()),
            "early": "; ".join(f"seed {k} stopped by its own rule at {v['seconds']:.0f} s" for k, v in early),
            "spu": f"{min(spu):.2f}–{max(spu):.2f}", "ups": f"{min(ups):,}–{max(ups):,}",
            "steps": f"{min(steps):,}–{max(steps):,}"}


def ngd_delayed_prose(d: dict) -> dict:
    """The flights-delayed paragraph's numbers: SEP's paired difference from the peer at 60 / 150 / 300 s,
    and both sides' per-seed test NLL ranges at 300 s."""
    task = d["tasks"]["flights_delayed"]
    at = task["at"]

    def nll_300(curve):
        return nearest_at(curve, 300, 2)

    sep = [nll_300(v["sep"]["curve"]) for v in task["seeds"].values()]
    peer = [nll_300(v["peer"]["curve"]) for v in task["seeds"].values()]
    return {"diff": ", ".join(f"{at[t]['sep_minus_peer'][0]:.3f}" for t in ("60s", "150s")) + " and "
                    + f"{at['300s']['sep_minus_peer'][0]:.3f}",
            "sep": f"{min(sep):.3f}–{max(sep):.3f}", "peer": f"{min(peer):.3f}–{max(peer):.3f}"}


def sweep_half(d: dict) -> dict:
    """The float64 sweep on half of house_8L: a row per side and precision, settings grouped as the page
    prints them (seconds, relative errors, peak RSS)."""
    def err(v):
        return f"{v:.2f}" if v >= 1 else f"{v:.3f}"

    def group(side, keys, bold=False):
        cs = [d[side][k] for k in keys]
        lo, hi = (f"{f(c['peak_rss_gb'] for c in cs):.1f}" for f in (min, max))
        errs = " / ".join(err(c["summary"]["rel_error_mean"]) for c in cs)
        return (" / ".join(f"{c['summary']['seconds_mean']:.2f}" for c in cs) + " | "
                + (f"**{errs}**" if bold else errs) + f" | {lo if lo == hi else f'{lo}–{hi}'} GB")

    g = "gpytorch"
    rows = [f"| daskgp, float64 | ULISSE, N_r = 4 / 16 / 64 | "
            f"{group('daskgp', ['ulisse_4', 'ulisse_16', 'ulisse_64'])} |",
            f"| daskgp, float64 | CG to 1e-6, N_r = 4 / 16 / 64 | "
            f"{group('daskgp', ['cg_4', 'cg_16', 'cg_64'])} |"]
    for prec in ("32", "64"):
        keys = [f"f{prec}_tol1.0_t10_p15", f"f{prec}_tol0.1_t10_p15", f"f{prec}_tol0.01_t10_p15"]
        rows.append(f"| GPyTorch, float{prec} | defaults / cg_tolerance 0.1 / 0.01 | {group(g, keys)} |")
        rows.append(f"| GPyTorch, float{prec} | cg_tolerance 0.01, 64 trace samples, rank 100 | "
                    f"{group(g, [f'f{prec}_tol0.01_t64_p100'], bold=prec == '32')} |")
    return {"rows": "\n  ".join(rows)}


def gpc_accuracy(d: dict) -> dict:
    """The classification guide's two accuracy tables (breast cancer, MNIST odd/even): test error / test NLL
    per method and m, the lowest NLL of a row in bold, and on MNIST SEP's NLL against SVGP's and EP's."""
    out = {}
    for task, ms, label in (("breast_cancer", (20, 40, 80), None),
                            ("mnist_parity", (200, 400, 500), "capped")):  # MNIST's m = 500: the cap
        a = d["accuracy"][task]
        rows = []
        for m in ms:
            cells = {k: a[f"{k},m={m}"] for k in ("ep", "sep", "adf", "svgp")}
            best = min(c["test_nll"] for c in cells.values())
            text = [f"{c['test_error']:.3f} / " + (f"**{c['test_nll']:.3f}**" if c["test_nll"] == best
                                                     else f"{c['test_nll']:.3f}") for c in cells.values()]
            size = "capped" if label and m == ms[-1] else f"{100 * m / a['n_train']:.0f} %"
            row = f"| {m} ({size}) | " + " | ".join(text) + " |"
            if task == "mnist_parity":
                vs_svgp = cells["sep"]["test_nll"] / cells["svgp"]["test_nll"]
                vs_ep = cells["sep"]["test_nll"] / cells["ep"]["test_nll"]
                row += (f" {'**' if vs_svgp < 1 else ''}{vs_svgp:.2f}{'**' if vs_svgp < 1 else ''} | "
                        f"{vs_ep:.2f} |")
            rows.append(row)
        out[task] = "\n  ".join(rows)
    lr = d["accuracy"]["breast_cancer"]["logistic_regression"]
    out["lr"] = f"{lr['test_error']:.3f} / {lr['test_nll']:.3f}"
    return out


def gpc_flights(d: dict) -> dict:
    """The flights-delayed table of the classification guide: test NLL at 30 / 60 / 120 / 300 s (the logged
    point nearest each), iterations and the test error at the end, per side; the lowest NLL in bold."""
    f = d["flights"]
    sides = [("sep_constant_damping_0.1", "SEP, δ = \\|B\\|/20,000 = 0.1, constant"),
             ("sep", "SEP, δ and Adam's step ÷ √(1 + t/E) (default)"), ("svgp", "GPyTorch SVGP")]
    at = {k: [nearest_at(f[k]["curve"], t, 2) for t in (30, 60, 120, 300)]
          for k, _ in sides}
    best = [min(at[k][i] for k, _ in sides) for i in range(4)]
    rows = []
    for k, label in sides:
        c = f[k]
        cells = [f"**{v:.3f}**" if v == b else f"{v:.3f}" for v, b in zip(at[k], best, strict=True)]
        peak = max(r[2] for r in c["curve"] if r[0] > 30)
        if peak > at[k][-1] + 0.1:  # a spike between the columns' times, worth a word in the last one
            cells[-1] += f" (spikes to {peak:.2f})"
        its = f"{c['steps']:,} steps" if "steps" in c else f"{c['iterations']:,}"
        err = f"{c['test_error']:.3f}"
        err = f"**{err}**" if k == "svgp" else err
        rows.append(f"| {label} | " + " | ".join(cells) + f" | {its} | {err} |")
    return {"rows": "\n  ".join(rows)}


def gpc_memory(d: dict) -> dict:
    """The classification guide's memory table (decimal MB): EP's and SEP's state, what the workers hold at
    the peak, one worker's peak RSS, per n; and the crowded-inducing-inputs table: test NLL at m = 10 → 30
    per split, the better m = 30 in bold."""
    mem = d["memory"]
    rows = []
    for n in sorted({v["n"] for v in mem.values()}):
        ep, sep = mem[f"ep,n={n}"], mem[f"sep,n={n}"]
        held = (ep["cluster_managed_peak_bytes"] / 1e6, sep["cluster_managed_peak_bytes"] / 1e6)
        rows.append(f"| {n:,} | {ep['state_bytes'] / 1e6:.2f} MB | {sep['state_bytes'] / 1e6:.3f} MB | "
                    f"{held[0]:.0f} MB | {held[1]:.1f} MB | "
                    f"{ep['worker_peak_rss_bytes'] / 1e6:.0f} MB | "
                    f"{sep['worker_peak_rss_bytes'] / 1e6:.0f} MB |")
    crowded = []
    for seed in sorted({int(k.rsplit("seed=", 1)[1]) for k in d["crowded"] if "seed=" in k}):
        cells = []
        for method in ("sep", "ep"):
            a, b = (d["crowded"][f"{method},m={m},seed={seed}"]["test_nll"] for m in (10, 30))
            cells.append(f"{a:.3f} → " + (f"**{b:.3f}**" if b < a else f"{b:.3f}"))
        crowded.append(f"| {seed} | {cells[0]} | {cells[1]} |")
    return {"rows": "\n  ".join(rows), "crowded": "\n    ".join(crowded)}


def advgp_converged(d: dict) -> dict:
    """The ADVGP guide's table against converged SVGP (flights, 3 seeds): ADVGP at its budget (updates),
    SVGP at the same time and at its own end, and SVGP's seconds to ADVGP's RMSE; a mean ± sd row."""
    part = d["advgp"]
    budget = part["budget"]
    rows, cols = [], {"adv": [], "at": [], "end": [], "secs": []}
    for seed, c in part["seeds"].items():
        adv, svgp = c["advgp"], c["svgp"]
        at = nearest_at(svgp["curve"], budget, 1)
        for k, v in (("adv", adv["rmse"]), ("at", at), ("end", svgp["rmse"]),
                     ("secs", svgp["seconds_to_advgp_final"])):
            cols[k].append(v)
        rows.append(f"| {seed} | **{adv['rmse']:.2f}** ({adv['updates']:,}) | {at:.2f} | "
                    f"{svgp['rmse']:.2f} | {svgp['seconds_to_advgp_final']:.0f} |")

    def ms(v, fmt=".2f"):
        return f"{statistics.mean(v):{fmt}} ± {statistics.stdev(v):{fmt}}"
    rows.append(f"| mean ± sd | **{ms(cols['adv'])}** | {ms(cols['at'])} | **{ms(cols['end'])}** | "
                f"{ms(cols['secs'], '.0f')} |")
    return {"rows": "\n  ".join(rows)}


def sep_converged(d: dict) -> dict:
    """The classification guide's SEP-against-EP-and-converged-SVGP table (MNIST odd/even, 3 splits): a row
    per split up to its seconds (the page may note after them what they shared the machine with)."""
    out = {}
    for seed, c in d["gpc"]["seeds"].items():
        ep, sep, svgp = c["ep"], c["sep"], c.get("svgp")
        peer = ("not run (session ended)" if svgp is None else
                f"{svgp['test_nll']:.4f} ({svgp['seconds']:.0f} s; last quarter "
                f"{svgp['last_quarter_nll_change']:.4f})".replace("-", "−"))
        out[f"split{seed}"] = (f"| {seed} | {ep['test_nll']:.4f} | {sep['test_nll']:.4f} | "
                               f"{sep['test_nll'] / ep['test_nll']:.3f} | {peer} | "
                               f"{ep['seconds']:.0f} / {sep['seconds']:.0f}")
    return out


def _bold_if(text: str, bold: bool) -> str:
    return f"**{text}**" if bold else text


def _per_partition(case: dict) -> str:
    return " / ".join(str(g) for g in case["gradients_per_partition"])


def advgp_flights(d: dict) -> dict:
    """The ADVGP guide's tables of issue 30's run (ADADELTA): test RMSE and seconds per update per m and τ,
    the peers on the same split, and the straggler runs."""
    a = d["advgp"]
    best = min(c["final_rmse"] for c in a.values())
    grid = []
    for m in sorted({c["m"] for c in a.values()}):
        cells = [a[f"m={m},tau={t}"] for t in (0, 8, 32)]
        rmse = [_bold_if(f"{c['final_rmse']:.2f}", c["final_rmse"] == best) for c in cells]
        grid.append(f"| {m} | {' | '.join(rmse)} | "
                    + " / ".join(f"{c['seconds_per_update']:.3f}" for c in cells) + " |")
    curve = d["svgp"]["curve"]
    marks = (60, 120, 240, 600)
    svgp = " / ".join(f"{nearest_at(curve, t, 1):.2f}" for t in marks)
    b, sg = d["baselines"], d["sgpr"]
    peers = [f"| GPyTorch SVGP, m = 100, minibatch 5,000, Adam 0.01, float32 | {svgp} | "
             + " / ".join(str(t) for t in marks) + " |",
             f"| daskgp SGPR, m = {sg['m']}, L-BFGS-B ({sg['evaluations']} evaluations, the limit) | "
             f"{sg['rmse']:.2f} | {sg['seconds']:.0f} |",
             f"| random forest (scikit-learn, 100 trees) | {b['random_forest']:.2f} | "
             f"{b['random_forest_seconds']:.0f} |",
             f"| linear regression | {b['linear']:.2f} | {b['linear_seconds']:.2f} |"]
    st = d["stragglers"]
    low = min(c["final_rmse"] for c in st.values())
    strag = []
    for c in st.values():
        mean = "0" if c["staleness_mean"] == 0 else f"{c['staleness_mean']:.1f}"
        rmse = _bold_if(f"{c['final_rmse']:.2f}", c["final_rmse"] == low)
        strag.append(f"| {c['tau']} | {c['updates']:,} | {_per_partition(c)} | "
                     f"{c['staleness_max']} / {mean} | {rmse} |")
    return {"grid": "\n  ".join(grid), "peers": "\n  ".join(peers), "stragglers": "\n    ".join(strag)}


def advgp_stragglers(d: dict) -> dict:
    """The ADVGP guide's straggler table at the issue-31 default (Adam): per τ, updates, gradients per
    partition, the largest staleness, the test RMSE with steps divided by 1 + the mean delay, and with the
    first version's 1 + τ (``advgp_stragglers_steps_by_tau.json``)."""
    first = read_result("advgp_stragglers_steps_by_tau")["runs"]
    runs = d["runs"]
    low = min(c["final_rmse"] for c in runs.values())
    rows = []
    for key, c in runs.items():
        rmse = _bold_if(f"{c['final_rmse']:.2f}", c["final_rmse"] == low)
        rows.append(f"| {c['tau']} | {c['updates']:,} | {_per_partition(c)} | {c['staleness_max']} | "
                    f"{rmse} | {first[key]['final_rmse']:.2f} |")
    return {"rows": "\n    ".join(rows)}


def trace_estimators(d: dict) -> dict:
    """The exact guide's Hutchinson-against-Hutch++ table: the sd of ½ tr(K⁻¹∂ⱼK) per estimator and
    parameter (three significant digits), and the variance's and noise's traces."""
    labels = (("hutchinson", "Hutchinson, 32 probes (32 solves shared by all parameters)"),
              ("hutch++ (budget per parameter)", "Hutch++, 32 products per parameter (3 × 32 solves)"),
              ("hutch++ (same solves)", "Hutch++, 10 products per parameter (the same 32 solves)"))
    p = d["params"]
    rows = [f"| {label} | " + " | ".join(f"{p[name]['sd_half_trace'][key]:#.3g}"
                                         for name in ("variance", "lengthscale", "noise")) + " |"
            for key, label in labels]
    traces = f"traces {p['variance']['trace']:.0f} and {p['noise']['trace']:.0f}"
    return {"rows": "\n  ".join(rows), "traces": traces}


def gpc_suite_row(d: dict) -> dict:
    """One problem's row of the classification guide's suite table (``gpc_suite/{problem}_rows3000.json``):
    test NLL of the prior, logistic regression, Laplace GPC, and of SEP, EP and ADF with their ratio to
    Laplace (bold beyond the 2 % the tests hold) and their paired gap to it ± se."""
    def side(name):
        c = d[name]
        gap = c["vs_laplace"]
        ratio = _bold_if(f"{c['ratio']:.3f}", c["ratio"] > 1.02)
        return f"{c['nll']:.4f} ({ratio}; {gap['mean']:+.3f} ± {gap['se']:.3f})".replace("-", "−")

    return {"row": f"| {d['problem']} | {d['n_train']} / {d['features']} / {d['positive_rate']:.3f} | "
                   f"{d['prior']['nll']:.4f} | {d['logistic_regression']['nll']:.4f} | "
                   f"{d['laplace']['nll']:.4f} | "
                   + " | ".join(side(k) for k in ("sep", "ep", "adf")) + " |"}
