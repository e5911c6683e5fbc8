"""The numbers the README and the documentation quote from benchmarks, each rendered from its results JSON,
and what each benchmark measured (its provenance).

A claim is a line of text with blanks, the file it appears in, and the JSON its blanks are read from.
``tests/test_claims.py`` renders every claim from its JSON and asserts the rendered line is in the file, so a
number changed by hand (or a JSON re-measured without its text) fails the test. ``python
benchmarks/claims.py`` prints each claim's rendered line and its provenance (run it after a benchmark and
paste the lines it reports as missing). The docs' tables have their value functions in ``claim_tables.py``;
every table row with a number on ``BENCHMARK_PAGES`` must be covered by a claim, or its table marked
``NOT_FROM_JSON`` (:func:`uncited_table_rows`).

Provenance: every results JSON written through ``_common.write_results`` records the revision it measured and
a content hash of the code it measured (``CODE``: the modules its numbers depend on). The documentation's
*Provenance* page (written by ``docs/conf.py`` through ``provenance_table``) shows, per JSON the claims cite,
"measured on revision R" and flags one whose code changed since, or whose code was never recorded.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import (  # benchmarks/ is on the path: scripts run from it, tests and docs add it
    head_revision,
    read_result,
)
from claim_prose import PROSE
from claim_tables import (
    advgp_converged,
    advgp_flights,
    advgp_stragglers,
    bimodal,
    exact_gradient_table,
    exact_scaling,
    first_contact,
    gpc_accuracy,
    gpc_flights,
    gpc_memory,
    gpc_suite_row,
    gplvm_scoring,
    gpu_gradient,
    gpu_page,
    ngd_delayed_prose,
    ngd_flights_prose,
    nuts_peer,
    run_store,
    sep_converged,
    sgld_concrete,
    sgld_house8l,
    sgpr_flights_rows,
    sgpr_start,
    slow_link,
    sweep_half,
    trace_estimators,
    ulisse_bias,
    vocabulary_row,
    warmup_exact,
    warmup_resume,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

# The code each benchmark's numbers depend on (paths under the repository root, folders taken whole). A
# results JSON not named here is taken to depend on the whole package.
CODE: dict[str, tuple[str, ...]] = {
    "exact_gradient_sweep": ("daskgp/exact", "daskgp/compute", "daskgp/core"),
    "exact_gradient": ("daskgp/exact", "daskgp/compute", "daskgp/core"),
    "nuts_peer": ("daskgp/exact", "daskgp/compute", "daskgp/core", "daskgp/mcmc"),
    "sgpr_flights": ("daskgp/sparse", "daskgp/compute", "daskgp/core"),
    "peers_converged": ("daskgp/advgp", "daskgp/gpc", "daskgp/sparse", "daskgp/compute", "daskgp/core"),
    "advgp_refine": ("daskgp/advgp", "daskgp/inducing", "daskgp/compute", "daskgp/core"),
    "gpc": ("daskgp/gpc", "daskgp/compute", "daskgp/core"),
    "scale": ("daskgp/advgp", "daskgp/sparse", "daskgp/gpc", "daskgp/datasets", "daskgp/compute",
              "daskgp/core"),
    "gpu_gradient_flights_rows150000": ("daskgp/exact", "daskgp/compute", "daskgp/core"),
    "exact_roofline": ("daskgp/exact", "daskgp/compute", "daskgp/core", "daskgp/mcmc"),
    "nuts_fair": ("daskgp/exact", "daskgp/compute", "daskgp/core", "daskgp/mcmc"),
    "mean_tol": ("daskgp/exact", "daskgp/compute", "daskgp/core", "daskgp/mcmc/config.py"),
    "stale_precond": ("daskgp/exact", "daskgp/compute", "daskgp/core", "daskgp/mcmc"),
    "small_n_crossover": ("daskgp/exact", "daskgp/compute", "daskgp/core", "daskgp/mcmc"),
    "hmc_adaptation_steponly": ("daskgp/exact", "daskgp/compute", "daskgp/core", "daskgp/mcmc"),
    "hmc_single": ("daskgp/exact", "daskgp/compute", "daskgp/core", "daskgp/mcmc"),
    "sep_tasks": ("daskgp/gpc", "daskgp/compute", "daskgp/core"),
    "sep_chunks": ("daskgp/gpc", "daskgp/compute", "daskgp/core"),
    "gplvm_chunks": ("daskgp/sparse", "daskgp/inducing", "daskgp/compute", "daskgp/core"),
    "psi_cost": ("daskgp/sparse", "daskgp/inducing", "daskgp/compute", "daskgp/core"),
    "advgp_batch": ("daskgp/advgp", "daskgp/compute", "daskgp/core", "daskgp/inducing"),
    "ngd_peers": ("daskgp/advgp", "daskgp/sparse", "daskgp/gpc", "daskgp/inducing", "daskgp/compute",
                  "daskgp/core"),
}
WHOLE_PACKAGE = ("daskgp",)


def code_paths(name: str) -> tuple[str, ...]:
    """The paths whose content the results JSON ``name`` (its stem) depends on."""
    return CODE.get(name, WHOLE_PACKAGE)


def _python_files(paths, root: Path) -> list[str]:
    files = []
    for rel in paths:
        p = root / rel
        files += [f.relative_to(root).as_posix() for f in p.rglob("*.py")] if p.is_dir() else [rel]
    return sorted(set(files))


def _digest(named_bytes) -> str:
    h = hashlib.sha256()
    for name, data in sorted(named_bytes):
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()[:16]


def code_hash(paths, root: Path = ROOT) -> str:
    """A content hash (16 hex digits) of the Python files under ``paths`` (relative to ``root``, this
    checkout by default): their relative names and bytes, in sorted order."""
    return _digest((f, (root / f).read_bytes()) for f in _python_files(paths, root))


def code_hash_at(revision: str, paths) -> str:
    """The same hash over the files as they were at git ``revision`` (for results measured before JSONs
    recorded it: the revision that committed them)."""
    listing = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", revision, "--", *paths],
                             capture_output=True, text=True, check=True).stdout.split()
    files = [f for f in listing if f.endswith(".py")]
    def blob(f: str) -> bytes:
        return subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{f}"], capture_output=True,
                              check=True).stdout

    return _digest((f, blob(f)) for f in files)


def provenance(name: str) -> dict:
    """What a results JSON named ``name`` records about its measurement: this checkout's revision (with
    '+changes' when the measured code has uncommitted edits), the code paths and their content hash."""
    paths = code_paths(name)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", *paths],
                           capture_output=True, text=True).stdout.strip()
    return {"revision": head_revision() + ("+changes" if dirty else ""), "code": list(paths),
            "code_sha256": code_hash(paths)}


def status(name: str, results: Path = RESULTS, root: Path = ROOT) -> tuple[str, str]:
    """(revision measured, 'current' | 'code changed since' | 'code not recorded') of the results JSON
    ``name`` (its stem) in ``results``, its code hashed in ``root``."""
    doc = json.loads((results / f"{name}.json").read_text())
    prov = doc.get("provenance") or {}
    if "code_sha256" not in prov:
        return measured_revision(doc), "code not recorded"
    same = prov["code_sha256"] == code_hash(prov.get("code", code_paths(name)), root)
    return measured_revision(doc), "current" if same else "code changed since"


def measured_revision(doc: dict) -> str:
    """The revision a results JSON (its content) records having measured, or 'unknown'."""
    return (doc.get("provenance") or {}).get("revision", "unknown")


# ---- the claims ------------------------------------------------------------------------------------------

def load(name: str) -> dict:
    """The results JSON ``name`` (its stem) under benchmarks/results/."""
    return read_result(name)


def _exact_gradient(d: dict) -> dict:
    ours = d["daskgp"]["ulisse_4"]
    peer = d["gpytorch"][ours["matched"]["peer"]]
    return {"rel": f"{100 * ours['summary']['rel_error_mean']:.0f} %",
            "ours": f"{ours['summary']['seconds_mean']:.1f} s",
            "peer": f"{peer['summary']['seconds_mean']:.1f} s",
            "peer_settings": f"cg_tolerance {peer['cg_tolerance']:g}, {peer['trace_samples']} probes, "
                             f"rank-{peer['precond_size']} preconditioner",
            "ratio": f"{ours['matched']['ratio']:.2f}×"}


def _sweep_rows(d: dict) -> dict:
    def row(side):
        sm = side["summary"]
        return {"s": f"{sm['seconds_mean']:.1f} ± {sm['seconds_sd']:.1f}",
                "err": f"{sm['rel_error_mean']:.3f} ± {sm['rel_error_sd']:.3f}",
                "first": f"{side['first_call_seconds']:.1f}"}
    ours, peer = row(d["daskgp"]["ulisse_4"]), row(d["gpytorch"]["f32_tol0.01_t64_p100"])
    ratio = {k: f"{d['daskgp'][k]['matched']['ratio']:.2f}" for k in ("ulisse_4", "ulisse_16", "ulisse_64")}
    same = ratio["ulisse_4"] == ratio["ulisse_16"]  # the text speaks of one ratio for both
    return {"ours_s": ours["s"], "ours_err": ours["err"], "ours_first": ours["first"],
            "peer_s": peer["s"], "peer_err": peer["err"], "peer_first": f"{float(peer['first']):.0f}",
            "r4": ratio["ulisse_4"] if same else f"{ratio['ulisse_4']} / {ratio['ulisse_16']}",
            "r64": ratio["ulisse_64"]}


def _sweep_table(d: dict) -> dict:
    """The sweep's other rows: ULISSE with 16 and 64 probes, CG, and GPyTorch's settings in groups."""
    def sm(side, key):
        return d[side][key]["summary"]

    def err(v, like=None):  # three decimals, two at or above 1 (an sd takes its mean's)
        return f"{v:.2f}" if (like if like is not None else v) >= 1 else f"{v:.3f}"

    def one(side, key):
        m = sm(side, key)
        return (f"{m['seconds_mean']:.1f} ± {m['seconds_sd']:.1f} | {err(m['rel_error_mean'])} ± "
                f"{err(m['rel_error_sd'], m['rel_error_mean'])}")

    def group(side, keys):
        ms = [sm(side, k) for k in keys]
        firsts = [d[side][k]["first_call_seconds"] for k in keys]
        first = (" / ".join(f"{f:.0f}" for f in firsts) if len(keys) == 2 else
                 f"{min(firsts):.0f}–{max(firsts):.0f}")
        return (" / ".join(f"{m['seconds_mean']:.1f}" for m in ms) + " | "
                + " / ".join(err(m["rel_error_mean"]) for m in ms) + f" | {first}")

    first = {k: f"{d['daskgp'][k]['first_call_seconds']:.1f}" for k in ("ulisse_16", "ulisse_64")}
    g = "gpytorch"
    rows = [f"| daskgp | ULISSE, N_r = 16 | {one('daskgp', 'ulisse_16')} | {first['ulisse_16']} |",
            f"| daskgp | ULISSE, N_r = 64 | {one('daskgp', 'ulisse_64')} | {first['ulisse_64']} |",
            f"| daskgp | CG to 1e-6, N_r = 4 / 16 / 64 | {group('daskgp', ['cg_4', 'cg_16', 'cg_64'])} |",
            f"| GPyTorch 1.15.2, float32 | defaults (cg_tolerance 1, 10 trace samples, rank 15) | "
            f"{one(g, 'f32_tol1.0_t10_p15')} | {d[g]['f32_tol1.0_t10_p15']['first_call_seconds']:.1f} |",
            f"| GPyTorch | cg_tolerance 0.1 / 0.01 | "
            f"{group(g, ['f32_tol0.1_t10_p15', 'f32_tol0.01_t10_p15'])} |",
            f"| GPyTorch | 64 trace samples, cg_tolerance 1 / 0.1 / 0.01 | "
            f"{group(g, ['f32_tol1.0_t64_p15', 'f32_tol0.1_t64_p15', 'f32_tol0.01_t64_p15'])} |"]
    return {"rows": "\n".join(rows)}


def _sgpr_flights(d: dict) -> dict:
    sc, gp = d["scaling"], d["gpytorch"]
    ours, peer = sc["2_workers_full"]["seconds_median"], gp["float64"]["seconds_median"]
    rm = d["rmse"]
    return {"ours": f"{ours:.2f} s", "peer": f"{peer:.2f} s", "ratio": f"{ours / peer:.2f}×",
            "ours3": f"{ours:.3f}", "one": f"{sc['1_worker_full']['seconds_median']:.3f}",
            "half": f"{sc['1_worker_half']['seconds_median']:.3f}", "peer64": f"{peer:.2f}",
            "peer32": f"{gp['float32']['seconds_median']:.2f}", "ratio2": f"{ours / peer:.2f}",
            "gpall": f"{rm['full']['daskgp']:.2f}", "rf": f"{rm['full']['random_forest']:.2f}",
            "secs": f"{rm['full']['daskgp_seconds']:.0f}"}


def _advgp_peer_means(d: dict) -> dict:
    r = d["advgp"]["advgp_vs_svgp_rmse"]
    return {"adv": f"{r['advgp'][0]:.2f} ± {r['advgp'][1]:.2f}",
            "svgp": f"{r['svgp'][0]:.2f} ± {r['svgp'][1]:.2f}"}


def _scale(d: dict) -> dict:
    """The 10⁸-row cases against exact least squares: the README's sentence and the docs' table rows."""
    c = d["cases"]
    ls, adv, sgpr = c["100000000/linear-normal"], c["100000000/advgp-batch"], c["100000000/sgpr-subset"]

    def pct(case):
        return 100 * (case["test_rmse"] / ls["test_rmse"] - 1)

    def vs(case):  # the docs' signed percentage against least squares, with a true minus sign
        return f"{'−' if pct(case) < 0 else '+'}{abs(pct(case)):.1f} %"
    return {"adv": f"{-pct(adv):.0f} %", "adv_budget": f"{adv['server_seconds']:.0f} s",
            "sgpr": f"{-pct(sgpr):.0f} %", "sgpr_passes": str(sgpr["evaluations_this_segment"]),
            "sgpr_minutes": f"{sgpr['wall_seconds'] / 60:.0f} minutes",
            "client": _under(max(adv["client_peak_mb"], sgpr["client_peak_mb"]) / 1024, 0.5, "GB"),
            "ls_wall": f"{ls['wall_seconds']:.0f}", "ls_rmse": f"{ls['test_rmse']:.3f}",
            "ls_client": f"{ls['client_peak_mb']:.0f}",
            "adv_updates": f"{adv['updates']:,}", "adv_spu": f"{adv['seconds_per_update']:.2f}",
            "adv_wall": f"{adv['wall_seconds']:,.0f}", "adv_rmse": f"{adv['test_rmse']:.3f}",
            "adv_vs": vs(adv), "adv_client": f"{adv['client_peak_mb']:.0f}", "adv_below": f"{-pct(adv):.1f}",
            "sgpr_iter": str(sgpr["iterations"]), "sgpr_evals": str(sgpr["evaluations_this_segment"]),
            "sgpr_spe": f"{sgpr['seconds_per_epoch']:.0f}", "sgpr_wall": f"{sgpr['wall_seconds']:,.0f}",
            "sgpr_rmse": f"{sgpr['test_rmse']:.3f}", "sgpr_vs": vs(sgpr),
            "sgpr_client": f"{sgpr['client_peak_mb']:.0f}"}


def _scale_rows(d: dict) -> dict:
    """The 10⁶- and 10⁷-row rows of the scale table after their settings column (wall, test RMSE, against
    least squares, client and worker peaks), and each size's training-mean and least-squares RMSE."""
    c = d["cases"]
    out = {}
    for rows, sym, sup in ((10**6, "1e6", "10⁶"), (10**7, "1e7", "10⁷"), (10**8, "1e8", "10⁸")):
        ls = c[f"{rows}/linear-normal"]
        out[f"{sym}_mean"] = f"| {sup} | training mean | | | {ls['mean_predictor_rmse']:.2f} |"
        w = ", ".join(f"{x:,.0f}" for x in ls["worker_peak_mb"])
        out[f"{sym}_ls"] = f"| {ls['test_rmse']:.3f} | 1 | {ls['client_peak_mb']:.0f} MB | {w} MB |"
        for method in ("advgp-batch-paper-start", "advgp-batch", "advgp", "sgpr", "sgpr-subset"):
            case = c.get(f"{rows}/{method}")
            if case is None or (rows == 10**8 and method != "advgp-batch-paper-start"):
                continue  # 10⁸'s ADVGP and SGPR rows are _scale's
            pct = 100 * (case["test_rmse"] / ls["test_rmse"] - 1)
            bold = "**" if method.startswith("sgpr") and (rows == 10**7 or method == "sgpr") else ""
            dagger = "†" if method == "sgpr" else ""
            w = ", ".join(f"{x:,.0f}" for x in case["worker_peak_mb"])
            rmse = f"{bold}{case['test_rmse']:.3f}{bold}"
            out[f"{sym}_{method}"] = (f"| {case['wall_seconds']:,.0f} s | {rmse} | "
                                      f"{bold}{'−' if pct < 0 else '+'}{abs(pct):.1f} %{bold} | "
                                      f"{case['client_peak_mb']:.0f} MB | {w} MB{dagger} |")
    return out


def _worker_peaks(c: dict, gib: bool = False, sep: str = " and ") -> str:
    """A scale case's worker peaks joined with ``sep``: MB with thousands commas, or GiB to 2 decimals."""
    return sep.join(f"{w / 1024:.2f}" if gib else f"{w:,.0f}" for w in c["worker_peak_mb"])


def _scale_sep(d: dict) -> dict:
    """SEP from the 10⁷-row Parquet table: its fit, score and memory peaks."""
    c = d["cases"]["10000000/sep"]
    return {"iters": f"{c['iterations']:,}", "batch": f"{c['batch_size']:,}",
            "fit": f"{c['fit_seconds']:.0f}", "refine": f"{c['refine_seconds']:.0f}",
            "nll": f"{c['test_nll']:.4f}",
            "const": f"{c['constant_nll']:.4f}", "err": f"{100 * c['test_error']:.1f} %",
            "pos": f"{100 * c['positive_fraction']:.0f} %", "client": f"{c['client_peak_mb']:.0f} MB",
            "workers": _worker_peaks(c),
            "wall": f"{c['wall_seconds']:.0f}"}


def _scale_sep_chunks(d: dict) -> dict:
    """SEP at 10⁷ rows in 16 chunks against the same run in 500 (kept in ``earlier_runs``): seconds a
    minibatch (the refinement's excluded), minibatches, test NLL, the client's peak."""
    new, old = d["cases"]["10000000/sep"], d["earlier_runs"]["10000000/sep (500 chunks)"]

    def spi(c):
        return (c["fit_seconds"] - c["refine_seconds"]) / c["iterations"]
    return {"old_spi": f"{spi(old):.2f}", "new_spi": f"{spi(new):.3f}",
            "speedup": f"{spi(old) / spi(new):.0f}",
            "old_iters": f"{old['iterations']:,}", "new_iters": f"{new['iterations']:,}",
            "old_nll": f"{old['test_nll']:.4f}", "new_nll": f"{new['test_nll']:.4f}",
            "old_client": f"{old['client_peak_mb']:.0f}", "new_client": f"{new['client_peak_mb']:.0f}",
            "old_workers": _worker_peaks(old)}


def _scale_gplvm(d: dict) -> dict:
    """The GPLVM's cases on the taxi table (one round of 1 + 1 iterations, or two of 5 + 5): the earlier runs
    in a chunk a file (``earlier_runs``: ψ2 in its direct form, then as (m, m) products with ψ1 over the
    whole chunk), then the cases in the default chunks with every ψ term in blocks of rows."""
    earlier, cases = d["earlier_runs"], d["cases"]
    whole = " (a chunk per file, ψ1 over the whole chunk)"
    rows = [("10⁶", "1 + 1", "a file", "direct", earlier["1000000/gplvm-1 (ψ2 in its direct form)"])]
    runs = [(label, it, f"{n}/{method}") for n, label in ((1000000, "10⁶"), (10000000, "10⁷"))
            for method, it in (("gplvm-1", "1 + 1"), ("gplvm", "2 × (5 + 5)"))]
    rows += [(label, it, "a file", "products", earlier[k + whole])
             for label, it, k in runs if k + whole in earlier]
    rows += [(label, it, "1,000 rows", "products in blocks", cases[k]) for label, it, k in runs if k in cases]
    return {"table": "\n".join(
        f"| {n} | {it} | {chunk} | {form} | {c['fit_seconds']:.0f} | {c['bound_per_row']:.3f} | "
        f"{c['client_peak_mb']:.0f} MB | {_worker_peaks(c, sep=' / ')} MB |"
        for n, it, chunk, form, c in rows)}


def _scale_bayes(d: dict) -> dict:
    """Each hold-out's own Bayes RMSE (``bayes`` cases) and SGPR's and ADVGP's RMSE divided by it."""
    cases, label = d["cases"], {10**6: "10⁶", 10**7: "10⁷", 10**8: "10⁸"}
    floors = {n: cases[f"{n}/bayes"]["test_rmse"] for n in label if f"{n}/bayes" in cases}

    def ratios(method):
        return " and ".join(f"{cases[f'{n}/{method}']['test_rmse'] / f:.3f} × at {label[n]} rows"
                            for n, f in floors.items() if f"{n}/{method}" in cases)
    return {"floors": ", ".join(f"{f:.3f} at {label[n]} rows" for n, f in floors.items()),
            "sgpr": ratios("sgpr"), "advgp": ratios("advgp-rule")}


def _gplvm_chunks(d: dict) -> dict:
    """The GPLVM's bound and seconds against its rows a chunk (benchmarks/gplvm_chunks.py)."""
    cases = sorted(d["cases"].values(), key=lambda c: c["chunk_rows"])
    return {"rows": f"{d['rows']:,}", "sizes": " / ".join(f"{c['chunk_rows']:,}" for c in cases),
            "bounds": " / ".join(f"{c['bound_per_row']:.2f}" for c in cases),
            "secs": " / ".join(f"{c['fit_seconds']:.0f}" for c in cases),
            "local": " / ".join(f"{c['seconds_local']:.0f}" for c in cases)}


def _psi_cost(d: dict) -> dict:
    """The GPLVM's ψ-statistics a row before and after their (m, m)-product form (benchmarks/psi_cost.py)."""
    med, per, agree = d["median_seconds"], d["per_row"], d["agreement"]
    return {"before": f"{per['before']['local_evaluation_us']:.0f}",
            "after": f"{per['after']['local_evaluation_us']:.0f}", "ratio": f"{d['ratio']:.2f}",
            "fit_before": f"{med['before']['fit_seconds']:.0f}",
            "fit_after": f"{med['after']['fit_seconds']:.0f}",
            "D": f"{agree['D']:.0e}", "grad": f"{max(agree['dmu'], agree['dS'], agree['global_grad']):.0e}",
            "bound": f"{agree['fit_bound']:.0e}"}


def _sep_chunks(d: dict) -> dict:
    """SEP's milliseconds a minibatch against the number of chunks (benchmarks/sep_chunks.py)."""
    cases = sorted(d["cases"].values(), key=lambda c: c["chunks"])
    return {"rows": f"{d['rows']:,}", "ms": " / ".join(
        f"{c['ms_per_iteration']:.0f}" for c in cases), "chunks": " / ".join(str(c["chunks"]) for c in cases)}


def _scale_rule(d: dict, rows: int = 10**7) -> dict:
    """ADVGP at every default until its own rule stopped it (or its max_iter did), on the ``rows``-row
    table."""
    c = d["cases"][f"{rows}/advgp-rule"]
    return {"updates": f"{c['updates']:,}", "fit": f"{c['fit_seconds']:.0f}",
            "spu": f"{c['seconds_per_update']:.2f}", "rmse": f"{c['test_rmse']:.3f}",
            "ratio": f"{c['test_rmse'] / 4.58:.3f}", "rule": "its rule" if c["converged"] else "max_iter",
            "client": f"{c['client_peak_mb']:.0f}", "batch": f"{c['batch_size']:,}",
            "workers": _worker_peaks(c, gib=True),
            "met": "met" if c["test_rmse"] <= 1.05 * 4.58 else "not met"}


def _scale_rule_1e8(d: dict) -> dict:
    return _scale_rule(d, 10**8)


def _scale_rule_rows(d: dict) -> dict:
    """ADVGP's rule run at 10⁷ rows with 16,384 rows from each of the 10 partitions (``earlier_runs``)
    against the rows an update now keeps."""
    new = d["cases"]["10000000/advgp-rule"]
    old = d["earlier_runs"]["10000000/advgp-rule (16,384 rows a partition)"]
    return {"old_rows": f"{old['batch_size']:,}", "new_rows": f"{new['batch_size']:,}",
            "old_updates": f"{old['updates']:,}", "old_fit": f"{old['fit_seconds']:,.0f}",
            "old_rmse": f"{old['test_rmse']:.3f}", "new_updates": f"{new['updates']:,}",
            "new_fit": f"{new['fit_seconds']:,.0f}", "new_rmse": f"{new['test_rmse']:.3f}",
            "speedup": f"{old['fit_seconds'] / new['fit_seconds']:.1f}"}


def _capacity(d: dict) -> dict:
    """What an m-point sparse GP reaches on the synthetic taxi table: a row per (rows, method, m, seed) and
    the test rows' own Bayes RMSE."""
    rows = [f"| {c['rows']:,} | {c['method'].upper()} | {c['m']} | {c['test_rmse']:.3f} | "
            f"{c['ratio_to_floor']:.3f} | {c['iterations']:,} | {'yes' if c['converged'] else 'no'} | "
            f"{c['fit_seconds']:.0f} |" for c in d["cases"].values()]
    return {"rows": "\n".join(rows), "bayes": f"{d['test']['bayes_rmse']:.3f}",
            "linear": f"{d['test']['linear_rmse']:.3f}"}


def _under(value: float, bound: float, unit: str) -> str:
    """'under BOUND UNIT' when ``value`` is below ``bound``, else the value itself (the claim then fails)."""
    return f"under {bound:g} {unit}" if value < bound else f"{value:.2f} {unit}"


def _roofline(d: dict) -> dict:
    """The roofline table's rows (n, side) and the figures its text quotes."""
    out = {}
    for n in (1030, 8192, 22784):
        for side in ("before", "after"):
            r = d["cases"][f"{side}/{n}"]
            products = sorted(r["products"])[len(r["products"]) // 2]
            out[f"{side}{n}"] = (f"| {n:,} | {side} | {r['probes']} | {r['gradient_median_s']:.2f} "
                                 f"| {products} | {r['product_s']:.3f} | {r['products_s']:.2f} "
                                 f"| {r['everything_else_s']:.2f} |")
    a, b = d["cases"]["after/22784"], d["cases"]["before/22784"]
    return {**out, "gemm32": f"{a['gemm_f32_gflops']:.0f}", "gemm64": f"{a['gemm_f64_gflops']:.0f}",
            "target_s": f"{a['gradient_median_s']:.1f}", "met": "met" if d.get("target_met") else "not met",
            "speedup22784": f"{d['speedup']['22784']:.1f}",
            "speedup8192": f"{d['speedup']['8192']:.1f}",
            "lam8192": f"{d['cases']['after/8192']['noise_lambda_32']:.2f}",
            "lam22784": f"{a['noise_lambda_32']:.2f}", "one_col": f"{a['product_1_column_s']:.3f}",
            "before_s": f"{b['gradient_median_s']:.1f}", "probes8192": d["cases"]["after/8192"]["probes"],
            "probes22784": a["probes"]}


def _nuts_fair(d: dict) -> dict:
    """The concrete comparison with NUTS as its experts run it: a row per side, the ratios, the gradients."""
    c = d["cases"]["concrete"]
    nuts = c["nuts"]

    def row(side: dict) -> str:
        return (f"{side['wall_seconds']:.0f} | {side['min_ess']:.0f} | {side['max_rhat']:.3f} | "
                f"{side['seconds_per_ess']:.2f}")
    g = c["gradient_cost"]
    sampling = max(pr["sampling_seconds"] for pr in c["nuts_processes"].values())  # the slower process
    only = sampling / nuts["min_ess"]
    return {"nuts_only": f"{only:.2f}", "r_only": f"{c['daskgp_hmc']['seconds_per_ess'] / only:.2f}",
            "nuts": row(nuts), "hmc": row(c["daskgp_hmc"]), "sghmc": row(c["daskgp_sghmc"]),
            "r_hmc": f"{c['ratio_hmc']:.2f}", "r_sghmc": f"{c['ratio_sghmc']:.2f}",
            "nuts_gpe": f"{nuts['gradients_per_ess']:.0f}", "nuts_div": str(nuts["divergences"]),
            "g_auto": f"{g['autodiff_seconds_per_gradient']:.3f}",
            "g_hand": f"{g['hand_seconds_per_gradient']:.3f}",
            "g_ours": f"{g['daskgp_seconds_per_gradient']:.3f}",
            "nuts_spe": f"{nuts['seconds_per_ess']:.2f} s",
            "hmc_spe": f"{c['daskgp_hmc']['seconds_per_ess']:.2f} s", "ratio": f"{c['ratio_hmc']:.2f}×",
            **({"revision": c["measured_revision"]} if "measured_revision" in c else {})}


def _nuts_fair_sizes(d: dict) -> dict:
    """The larger sizes, NUTS extrapolated (its gradients per ESS on concrete times its gradient's cost
    measured at the size): a row per case that has both sides."""
    rows = []
    for name in ("power2k", "power5k", "power_plant"):
        c = d["cases"].get(name, {})
        if "daskgp_sghmc" not in c or "nuts_extrapolated" not in c:
            continue
        s, e = c["daskgp_sghmc"], c["nuts_extrapolated"]
        rows.append(f"| {c['n']:,} | {e['seconds_per_gradient']:.2f} | {e['seconds_per_ess']:.1f} | "
                    f"{s['wall_seconds']:.0f} | {s['min_ess']:.0f} | {s['max_rhat']:.3f} | "
                    f"{s['seconds_per_ess']:.2f} | **{c['ratio_sghmc_extrapolated']:.3f}** |")
    return {"rows": "\n".join(rows)}


def _nuts_target(d: dict) -> dict:
    """NUTS run to daskgp's own stopping rule (not extrapolated) beside SGHMC in the same invocation: a row
    per case that has both."""
    rows = []
    for name in ("concrete", "power2k", "power5k", "power_plant"):
        c = d["cases"].get(name, {})
        if "nuts_target" not in c or "daskgp_sghmc" not in c or "ratio_sghmc_vs_nuts_target" not in c:
            continue
        t, s = c["nuts_target"], c["daskgp_sghmc"]
        kept = t["kept_draws"]
        grads = t["gradients"]["warmup"] + t["gradients"]["sampling"]
        rows.append(f"| {c['n']:,} | {t['warmup_iterations']} + {kept} × {t['chains']} | {grads:,} | "
                    f"{t['wall_seconds']:.0f} | {t['min_ess']:.0f} | {t['max_rhat']:.4f} | "
                    f"{t['seconds_per_ess']:.2f} | {s['wall_seconds']:.0f} | {s['min_ess']:.0f} | "
                    f"{s['max_rhat']:.4f} | {s['seconds_per_ess']:.2f} | "
                    f"**{c['ratio_sghmc_vs_nuts_target']:.3f}** |")
    c = d["cases"]["power2k"]
    sd = c["sd_ratio_sghmc_over_nuts_target"]
    return {"rows": "\n".join(rows), "gap": f"{max(c['mean_gap_in_nuts_target_sd_sghmc']):.2f}",
            "sd_lo": f"{min(sd):.2f}", "sd_hi": f"{max(sd):.2f}"}


def _advgp_batch(d: dict) -> dict:
    """ADVGP's rows per gradient task on flights: a row per batch setting, mean over seeds at 60 and 120 s,
    and the paired difference from whole partitions."""
    names = {"none": "whole partition (61,617)", "32768": "32,768", "auto": "'auto' (16,384 at m = 100)",
             "8192": "8,192", "2048": "2,048"}
    rows = []
    for b, label in names.items():
        per = d["cases"].get(b)
        if not per:
            continue
        upd = sum(r["seconds_per_update"] for r in per.values()) / len(per)
        cells = []
        for t in ("60s", "120s"):
            row = d["at"][t][b]
            diff = row.get("minus_whole")
            cells.append(f"{row['rmse'][0]:.2f}" + ("" if diff is None else f" ({diff[0]:+.2f})"))
        rows.append(f"    | {label} | {len(per)} | {upd:.3f} | {cells[0]} | {cells[1]} |")  # in a list item
    return {"rows": "\n".join(rows)}


def _ngd_readme(d: dict) -> dict:
    """The README's summary of the NGD-SVGP comparison: each side's paired difference from the peer at 60 /
    150 / 300 s (mean over seeds), and ADVGP's ratio at 300 s."""
    def diffs(task, side, fmt):
        at = d["tasks"][task]["at"]
        return " / ".join(format(at[t][f"{side}_minus_peer"][0], fmt) for t in ("60s", "150s", "300s"))

    delayed = d["tasks"]["flights_delayed"]["at"].values()
    return {"advgp": diffs("flights", "advgp", "+.2f"), "sgpr": diffs("flights", "sgpr", "+.2f"),
            "ratio": f"{d['ratio']['flights']:.3f}", "mnist": diffs("mnist_parity", "sep", "+.3f"),
            "delayed": diffs("flights_delayed", "sep", "+.3f"),
            "delayed_pct": f"{max(100 * r['sep_minus_peer'][0] / r['peer'][0] for r in delayed):.0f}"}


def _nuts_withdrawn(d: dict) -> dict:
    """The withdrawn NUTS comparison's two s/ESS (daskgp's SGHMC and the diagonal-mass NUTS), as quoted."""
    c = d["cases"]["concrete"]
    return {"ours": f"{c['daskgp']['seconds_per_ess']:.2f}", "nuts": f"{c['nuts']['seconds_per_ess']:.2f}"}


def _ngd_peers(d: dict) -> dict:
    """daskgp's sparse families against NGD-SVGP at equal wall time: a row per (task, time, side), mean ±
    sd over seeds and the paired difference from the peer."""
    unit = {"flights": "test RMSE, minutes", "flights_delayed": "test NLL, nats",
            "mnist_parity": "test NLL, nats"}
    rows = []
    for task, part in d.get("tasks", {}).items():
        for t, row in part.get("at", {}).items():
            peer = row["peer"]
            rows.append(f"| {task} ({unit[task]}) | {t} | NGD-SVGP (lr {part['peer_ngd_lr']:g}) | "
                        f"{peer[0]:.3f} ± {peer[1]:.3f} | | |")
            for side in part["sides"]:
                v, diff = row[side], row[f"{side}_minus_peer"]
                rows.append(f"| | | {side.upper()} | {v[0]:.3f} ± {v[1]:.3f} | "
                            f"{diff[0]:+.3f} ± {diff[1]:.3f} | {'yes' if row[f'{side}_ahead'] else 'no'} |")
    return {"rows": "\n".join(rows), "seeds": ", ".join(sorted({s for p in d.get("tasks", {}).values()
                                                                    for s in p["seeds"]}))}


def _advgp_refine(d: dict) -> dict:
    """ADVGP's end-of-fit refine on flights: refined − unrefined test RMSE over the snapshots after the
    first update, and the least −ELBO gain per row of any snapshot."""
    s = d["summary"]
    return {"better": s["refined_better"], "pairs": s["pairs"], "seeds": len(d["seeds"]),
            "mean": f"{s['diff_mean']:+.3f}", "sd": f"{s['diff_sd']:.3f}", "lo": f"{s['diff_range'][0]:+.3f}",
            "hi": f"{s['diff_range'][1]:+.3f}", "gain": f"{s['neg_elbo_gain_per_row_min']:.1e}",
            "secs": f"{max(p['refine_seconds_here'] for v in d['seeds'].values() for p in v['points']):.2f}"}


def _product_width(d: dict) -> dict:
    """The cached float32 product at house_8L's size: 14 columns plain and padded, and the ratio over 9-15."""
    r = d["cases"]["22784"]["14"]
    return {"plain": f"{r['plain_s']:.3f}", "padded": f"{r['daskgp_s']:.3f}", "ratio": f"{d['ratio']:.2f}",
            "same": "the same bits at every width" if d["target_met"] else "NOT THE SAME BITS"}


def _straggler(d: dict) -> dict:
    """ADVGP with a straggler host: a row per (straggler, update, τ) — updates per second, the final test
    RMSE (mean ± sd over seeds) and in how many seeds τ reached every one of τ = 0's targets sooner."""
    rows = []
    for group in sorted({k.rsplit("/", 1)[0] for k in d["cases"]}):
        slow, opt = group.split("/")
        cases = [c for k, c in d["cases"].items() if k.rsplit("/", 1)[0] == group]
        what = f"CPU capped at {float(slow[3:]):g} core" if slow.startswith("cpu") else f"link at {slow}"
        for t in d["taus"]:
            c = [case[str(t)] for case in cases]
            rmse = [x["final_rmse"] for x in c]
            sooner = "—" if t == 0 else str(sum(x["sooner_to_every_target"] for x in c))
            rows.append(f"| {what if t == 0 else ''} | {opt if t == 0 else ''} | {t} | "
                        f"{statistics.mean(x['seconds_per_update'] for x in c):.3f} | "
                        f"{statistics.mean(rmse):.2f} ± "
                        f"{statistics.stdev(rmse) if len(rmse) > 1 else 0:.2f} | "
                        f"{sooner} of {len(c)} |")
    return {"rows": "\n  ".join(rows)}  # the rows of a table in a list item


def _straggler_default(d: dict) -> dict:
    """ADVGP with a straggler host against the default fit (Adam, τ = 0): a row per (straggler, update, τ)
    — its seconds to each of the default's targets, the median over seeds ('—': not reached in some seed)
    and in how many seeds it reached every one sooner than the default."""
    rows = []
    for slow, entries in d["against_default"].items():
        what = f"CPU capped at {float(slow[3:]):g} core" if slow.startswith("cpu") else f"link at {slow}"
        for i, (key, e) in enumerate(entries.items()):
            opt, tau = key.split("/tau")
            per_target = list(zip(*e["seconds_to_default_targets"].values(), strict=True))
            secs = " / ".join("—" if None in xs else f"{statistics.median(xs):.0f}" for xs in per_target)
            sooner = ("— (the default)" if key == "adam/tau0" else
                      f"{sum(e['sooner'].values())} of {len(e['sooner'])}")
            rows.append(f"| {what if i == 0 else ''} | {opt} | {tau} | {secs} | {sooner} |")
    return {"rows": "\n  ".join(rows)}


def _sep_tasks(d: dict) -> dict:
    """SEP's minibatch iteration, a task per chunk (before) against a task per worker (after)."""
    med = d["median_seconds_per_iteration"]
    return {"before": f"{med['before']:.3f}", "after": f"{med['after']:.3f}", "runs": len(d["runs"]["after"]),
            "same": "the same evidence to the bit" if d["same_evidence"] else "A DIFFERENT EVIDENCE"}


def _shared_vocabulary(d: dict) -> dict:
    """A before/after run of benchmarks/shared_vocabulary.py: a row per measurement, its medians and
    ratios."""
    labels = {"sgpr_eval_s": "SGPR bound + gradient, flights (246,468 rows, m = 100, 2 workers)",
              "advgp_partition_s": "ADVGP partition objective + gradient (20,000 rows, m = 100)",
              "gpc_sep_pass_s": "SEP pass with gradient (20,000 rows, m = 100)",
              "exact_gradient_s": "exact stochastic gradient, house_8L (22,784 rows, N_r = 4, ULISSE, "
                                  "rank 100)",
              "concrete_s_per_ess": "concrete, seconds per effective sample of the sampling (ESS 400)"}
    rows = []
    for key, label in labels.items():
        r = d["summary"][key]
        digits = 3 if r["before_median_s"] < 1 else 2
        rows.append(f"| {label} | {r['before_median_s']:.{digits}f} | {r['after_median_s']:.{digits}f} | "
                    f"{' / '.join(f'{x:.2f}' for x in r['ratio_per_round'])} | **{r['ratio_median']:.2f}** |")
    same = d["summary"]["concrete_draws_identical_before_after"]
    return {"rows": "\n".join(rows), "base": d["base"], "identical": "identical" if same else "DIFFERENT"}


def _mean_tol(d: dict) -> dict:
    """K⁻¹y's tolerance: the worst bias per case at 1e-4 and 1e-3, the cold iterations on 22,784 rows."""
    def worst(case: str, tol: str, key: str = "bias_over_noise_sd") -> float:
        return max(abs(b) for pt in d["cases"][case]["points"].values() for b in pt[tol][key])
    full = d["cases"]["house_8L"]["points"]["mode"]
    w3 = max(worst(c, "0.001") for c in d["cases"])
    wh = max(worst(c, "0.0001", "bias_whitened") for c in d["cases"])
    return {"w8": f"{100 * worst('house8k', '0.0001'):.2f}",
            "w22": f"{100 * worst('house_8L', '0.0001'):.2f}", "wh": f"{wh:.4f}",
            "it4": full["0.0001"]["iterations"], "it6": full["1e-06"]["iterations"],
            "w3": f"{100 * w3:.1f}"}


def _stale_precond(d: dict) -> dict:
    """The kept preconditioner halfway to the mode against a fresh one; the curvature's shared one."""
    half, c = d["points"]["halfway"], d["curvature"]
    far, near = half["at the subset MAP"], half["at the point"]
    sds = [a / b for a, b in zip(c["shared"]["sd"], c["per solve"]["sd"], strict=True)]
    return {"far": far["cg_iterations"], "near": near["cg_iterations"], "far_s": f"{far['seconds']:.1f}",
            "near_s": f"{near['seconds']:.1f}", "build": f"{d['build_seconds']:.1f}",
            "shared": f"{c['shared']['seconds']:.1f}", "each": f"{c['per solve']['seconds']:.1f}",
            "sd": f"{100 * max(abs(r - 1) for r in sds):.1f}"}


def _fidelity_house8k(d: dict) -> dict:
    """The default sampler on 8,192 house_8L rows against the exact posterior, beside concrete's mixing."""
    c = d["cases"]["house8k"]
    return {"chains": c["chains"], "kept": c["kept_draws"], "ess": f"{min(c['ess_bulk']):.0f}",
            "gaps": " / ".join(f"{g:.2f}".replace("-", "−") for g in c["mean_gap_sd"]),
            "ratios": " / ".join(f"{r:.2f}" for r in c["sd_ratio"]), "ipe": f"{c['iterations_per_ess']:.1f}",
            "concrete": f"{d['cases']['concrete']['iterations_per_ess']:.1f}"}


def _gpu_rows(d: dict) -> dict:
    return {"rows": f"{d['n']:,}"}


def _crossover(d: dict) -> dict:
    """HMC against SGHMC per case: the paired ratios and walls over seeds; the largest size HMC won in every
    seed of, and the crossing's estimate where a larger case was measured ("not measured" otherwise)."""
    est = d.get("crossover_estimate_rows")
    out = {"estimate": f"{round(est, -2):,.0f}" if est is not None else "not measured",
           "won": f"{d['crossover_rows']:,}" if d.get("crossover_rows") else "none"}
    def joined(values, form: str) -> str:
        return " / ".join(format(v, form) for v in values)

    for name, c in d["cases"].items():
        runs = c["runs"]
        if "paired" not in c:  # under way (a resumable case longer than a session): what ran, no ratio yet
            walls = {m: [r["wall_seconds"] for k, r in runs.items() if k.startswith(f"{m}/")]
                     for m in ("hmc", "sghmc")}
            out[name] = (f"0 paired so far | — | — | {joined(walls['hmc'], '.0f') or '—'} | "
                         f"{joined(walls['sghmc'], '.0f') or '—'} |")
            continue
        p = c["paired"]
        walls = {m: [runs[f"{m}/{s}"]["wall_seconds"] for s in p["seeds"]] for m in ("hmc", "sghmc")}
        out[name] = (f"{len(p['seeds'])} | {joined(p['wall_ratio_hmc_over_sghmc'], '.2f')} | "
                     f"{joined(p['ratio_hmc_over_sghmc'], '.2f')} | {joined(walls['hmc'], '.0f')} | "
                     f"{joined(walls['sghmc'], '.0f')} |")
    concrete = [r["wall_seconds"] for k, r in d["cases"]["concrete"]["runs"].items() if k.startswith("hmc/")]
    out["lo"], out["hi"] = f"{min(concrete):.0f}", f"{max(concrete):.0f}"
    gaps = [g for c in d["cases"].values() if "paired" in c for seed in c["paired"]["mean_gap_in_pooled_sd"]
            for g in seed]
    out["gap"] = f"{max(gaps):.2f}"
    return out


def _adaptation(d: dict) -> dict:
    """HMC's step-only adaptation of 50 against 150 with windows: the paired wall ratios' range per case,
    and concrete's walls to the target with it."""
    def span(values, form: str) -> str:
        return f"{format(min(values), form)}–{format(max(values), form)}"

    out = {f"ratio_{name}": span(c["paired"]["50"]["wall_ratio"], ".2f") + "×"
           for name, c in d["cases"].items()}
    walls = [r["wall_seconds"] for k, r in d["cases"]["concrete"]["runs"].items() if k.startswith("50/")]
    out["lo"], out["hi"] = f"{min(walls):.0f}", f"{max(walls):.0f}"
    return out


def _single(d: dict) -> dict:
    """HMC's single-precision inner force against the double one: the paired wall ratios' range per case,
    and the kept draws' acceptance range over both sides."""
    out = {f"single_{name}": f"{min(c['paired']['ratios']):.2f}–{max(c['paired']['ratios']):.2f}×"
           for name, c in d["cases"].items()}
    acc = [r["kept_stats"]["accept_prob"] for c in d["cases"].values() for r in c["runs"].values()]
    out["accept"] = f"{min(acc):.2f}–{max(acc):.2f}"
    walls = [r["wall_seconds"] for k, r in d["cases"]["concrete"]["runs"].items() if k.startswith("single/")]
    out["lo"], out["hi"] = f"{min(walls):.0f}", f"{max(walls):.0f}"  # the demo's run, today's code
    return out


def _house8l(d: dict) -> dict:
    """The house_8L run as it stands: its sittings, hours, kept draws, ESS, R-hat and the reference bands."""
    ref = d["reference"]
    kept = d["draws_per_chain"] - int(d["config"]["n_adapt"])
    sds = [r["sd_ratio"] for r in ref.values()]
    return {"sittings": len(d["segments"]), "hours": f"{d['end_to_end_hours']:.2f}", "kept": kept,
            "ess_bulk": f"{d['min_ess_bulk']:.0f}", "ess_tail": f"{d['min_ess_tail']:.0f}",
            "rhat": f"{d['max_r_hat']:.3f}",
            "mean_diff": f"{max(r['mean_diff_over_sd_ref'] for r in ref.values()):.2f}",
            "sd_lo": f"{min(sds):.2f}", "sd_hi": f"{max(sds):.2f}",
            "draws_per_ess": f"{int(d['config']['n_chains']) * kept / d['min_ess_bulk']:.1f}"}


def _house8l_costs(d: dict) -> dict:
    """A house_8L sitting stopped before its chains kept a draw: its warmup, its cost per iteration and the
    end-to-end hours that cost projects for 800 iterations (the first 2-chain run's length to R-hat 1.01)."""
    iterations = 800
    hours = (d["warmup_seconds"] + iterations * d["sec_per_iteration_mean"]) / 3600
    return {"warmup_s": f"{d['warmup_seconds']:,.0f}", "gradients": d["warmup_gradients"],
            "spi": f"{d['sec_per_iteration_mean']:.1f}",
            "products": f"{d['products_per_iteration_mean']:.0f}",
            "columns": d["n_probes"] + 1, "draws": d["draws_per_chain"], "iterations": iterations,
            "hours": f"{hours:.1f}", "wall_s": f"{sum(g['wall_s'] for g in d['segments']):,.0f}"}


def _hostile(d: dict) -> dict:
    """Issue 56's hostile re-run: its case count and how many fell in each class."""
    counts = {k.replace("-", "_").replace(" ", "_"): v for k, v in d["counts"].items()}
    return {"n": len(d["cases"]), **counts}


@dataclass(frozen=True)
class Claim:
    """``template`` (str.format blanks) rendered from ``values(json)`` must appear verbatim in ``where``."""

    name: str
    result: str  # the results JSON's stem, under benchmarks/results/
    where: str  # the file, relative to the repository root
    template: str
    values: Callable[[dict], dict]

    def render(self) -> str:
        """The template filled from the JSON; ``{revision}`` is the revision the JSON measured, unless the
        claim's values name their own (a case measured before the file's latest segment)."""
        doc = load(self.result)  # the revision alone: no need to hash the code, as status() does
        return self.template.format(**{"revision": measured_revision(doc), **self.values(doc)})


CLAIMS = [
    Claim("exact gradient, house_8L, against GPyTorch", "exact_gradient_sweep", "README.md",
          "| exact gradient of log p(y\\|θ), house_8L (n = 22,784), at matched accuracy (≈ {rel} rel. error) "
          "| {ours} (ULISSE, N_r = 4) | GPyTorch {peer} ({peer_settings}) | {ratio} | {revision} |",
          _exact_gradient),
    Claim("exact gradient at θ = (1, 2, 0.3), the table", "exact_gradient", "docs/benchmarks.md", "{rows}",
          exact_gradient_table),
    Claim("exact gradient at θ = (1, 2, 0.3), the ratios", "exact_gradient", "docs/benchmarks.md",
          "Ratios: (e)/(f) = **{accurate}** is the only like-for-like pair: both errors are about 1–2 %. "
          "(a)/(d) = {ratio}", exact_gradient_table),
    Claim("concrete's default sampler against exact MH: MH's row", "sgld_concrete", "docs/benchmarks.md",
          "{mh}", sgld_concrete),
    Claim("concrete's default sampler against exact MH: SGHMC's row", "sgld_concrete", "docs/benchmarks.md",
          "{sghmc}", sgld_concrete),
    Claim("concrete's default sampler against exact MH: the posteriors", "sgld_concrete",
          "docs/benchmarks.md",
          "{rows}", sgld_concrete),
    Claim("concrete's default sampler against exact MH: the ratios", "sgld_concrete", "docs/benchmarks.md",
          "ratio = {best} / 3 = **{ratio}**.\n- SGHMC took {vs_mh}× exact MH's bulk s/ESS", sgld_concrete),
    Claim("the bimodal 3,000-row posterior: the table", "bimodal_posterior", "docs/benchmarks.md", "{rows}",
          bimodal),
    Claim("the bimodal 3,000-row posterior: the importance sample", "bimodal_posterior", "docs/benchmarks.md",
          "Kish ESS {kish}", bimodal),
    Claim("the exact gradient on one GPU: the table", "gpu_gradient", "docs/benchmarks.md", "{rows}",
          gpu_gradient),
    Claim("the exact gradient on one GPU: against the CPU", "gpu_gradient", "docs/benchmarks.md",
          "GPU ÷ CPU on the same machine: {gpu_vs_cpu}× for the sampler's gradient", gpu_gradient),
    Claim("SGPR flights, the test RMSE table", "sgpr_flights", "docs/benchmarks.md", "{rows}",
          sgpr_flights_rows),
    Claim("the run store's costs, the table", "run_store", "docs/benchmarks.md", "{rows}", run_store),
    Claim("the withdrawn NUTS comparison, its record", "nuts_peer", "docs/benchmarks.md", "{rows}",
          nuts_peer),
    Claim("SGLD on house_8L, the throughput table", "sgld_house8l", "docs/benchmarks.md",
          "| SGLD iterations per hour (both chains) | {per_hour}, from 2 × 100 iterations on daskgp 0.2.0",
          sgld_house8l),
    Claim("SGLD on house_8L, an iteration's parts", "sgld_house8l", "docs/benchmarks.md",
          "| seconds per iteration, per chain (one core) | {per_chain} |\n"
          "| CG iterations / operator passes per iteration | {cg} |\n"
          "| kernel evaluation (rows rebuilt for the new θ, gradient pass, preconditioner rows) | "
          "{kernel} |\n"
          "| CMVPs with cached kernel rows (by difference; {cmvp} |\n"
          "| scheduler and driver overhead | ≈ 0 ({overhead}", sgld_house8l),
    Claim("SGLD on house_8L, the estimate", "sgld_house8l", "docs/benchmarks.md", "concrete's ≈ {ess} |",
          sgld_house8l),
    Claim("ADVGP over a slow link, the table", "multihost_slow_link", "docs/benchmarks.md", "{rows}",
          slow_link),
    Claim("ADVGP over a slow link, the updates", "multihost_slow_link", "docs/benchmarks.md",
          "τ = 8 makes {factor}× as many updates per second over the slow link in every seed", slow_link),
    Claim("the scale table at 1e6 rows", "scale", "docs/benchmarks.md",
          "{1e6_mean}", _scale_rows),
    Claim("the scale table at 1e6 rows: advgp-batch-paper-start", "scale", "docs/benchmarks.md",
          "{1e6_advgp-batch-paper-start}", _scale_rows),
    Claim("the scale table at 1e6 rows: advgp-batch", "scale", "docs/benchmarks.md",
          "{1e6_advgp-batch}", _scale_rows),
    Claim("the scale table at 1e6 rows: advgp", "scale", "docs/benchmarks.md",
          "{1e6_advgp}", _scale_rows),
    Claim("the scale table at 1e6 rows: sgpr", "scale", "docs/benchmarks.md",
          "{1e6_sgpr}", _scale_rows),
    Claim("the scale table at 1e6 rows: sgpr-subset", "scale", "docs/benchmarks.md",
          "{1e6_sgpr-subset}", _scale_rows),
    Claim("the scale table at 1e7 rows", "scale", "docs/benchmarks.md",
          "{1e7_mean}", _scale_rows),
    Claim("the scale table at 1e7 rows: advgp-batch-paper-start", "scale", "docs/benchmarks.md",
          "{1e7_advgp-batch-paper-start}", _scale_rows),
    Claim("the scale table at 1e7 rows: advgp-batch", "scale", "docs/benchmarks.md",
          "{1e7_advgp-batch}", _scale_rows),
    Claim("the scale table at 1e7 rows: advgp", "scale", "docs/benchmarks.md",
          "{1e7_advgp}", _scale_rows),
    Claim("the scale table at 1e7 rows: sgpr", "scale", "docs/benchmarks.md",
          "{1e7_sgpr}", _scale_rows),
    Claim("the scale table at 1e7 rows: sgpr-subset", "scale", "docs/benchmarks.md",
          "{1e7_sgpr-subset}", _scale_rows),
    Claim("the scale table: the mean at 10⁸ rows", "scale", "docs/benchmarks.md", "{1e8_mean}", _scale_rows),
    Claim("the scale table: ADVGP from the paper's start at 10⁸ rows", "scale", "docs/benchmarks.md",
          "{1e8_advgp-batch-paper-start}", _scale_rows),
    Claim("the scale table: least squares at 10⁶ rows", "scale", "docs/benchmarks.md", "{1e6_ls}",
          _scale_rows),
    Claim("the scale table: least squares at 10⁷ rows", "scale", "docs/benchmarks.md", "{1e7_ls}",
          _scale_rows),
    Claim("first contact: start-up and a small prediction", "first_contact", "docs/benchmarks.md", "{rows}",
          first_contact),
    Claim("where SGPR starts, the table", "sgpr_start", "docs/benchmarks.md", "{rows}", sgpr_start),
    Claim("exact gradient sweep, daskgp's N_r = 4 row", "exact_gradient_sweep", "docs/benchmarks.md",
          "| daskgp, float64 | ULISSE, N_r = 4 | {ours_s} | {ours_err} | {ours_first} |", _sweep_rows),
    Claim("exact gradient sweep, GPyTorch's matched row", "exact_gradient_sweep", "docs/benchmarks.md",
          "| GPyTorch | cg_tolerance 0.01, 64 trace samples, preconditioner rank 100 | {peer_s} | "
          "**{peer_err}** | {peer_first} |", _sweep_rows),
    Claim("exact gradient sweep, the other rows", "exact_gradient_sweep", "docs/benchmarks.md", "{rows}",
          _sweep_table),
    Claim("exact gradient sweep, the matched ratios", "exact_gradient_sweep", "docs/benchmarks.md",
          "It is **{r4}** for ULISSE with 4 or 16 probes and **{r64}** for 64 probes", _sweep_rows),
    Claim("SGPR bound and gradient, flights, against GPyTorch", "sgpr_flights", "README.md",
          "| SGPR bound + gradient, flights (246,468 rows, m = 100) "
          "| {ours} (2 workers) | GPyTorch SGPR {peer} (float64, 2 threads) | {ratio} | {revision} |",
          _sgpr_flights),
    Claim("SGPR flights, seconds per evaluation", "sgpr_flights", "docs/benchmarks.md",
          "| 1 worker, all rows | {one} |", _sgpr_flights),
    Claim("SGPR flights, seconds per evaluation on 2 workers", "sgpr_flights", "docs/benchmarks.md",
          "| 2 workers, all rows | **{ours3}** |", _sgpr_flights),
    Claim("SGPR flights, half the rows on 1 worker", "sgpr_flights", "docs/benchmarks.md",
          "| 1 worker, half the rows | {half} |", _sgpr_flights),
    Claim("SGPR flights, GPyTorch float64", "sgpr_flights", "docs/benchmarks.md",
          "float64, 2 threads | {peer64} | — |\n| GPyTorch, float32, 2 threads | {peer32} | — |",
          _sgpr_flights),
    Claim("SGPR flights, the ratio", "sgpr_flights", "docs/benchmarks.md",
          "**ratio** (daskgp 2 workers / GPyTorch float64) = **{ratio2}**", _sgpr_flights),
    Claim("SGPR flights, test RMSE", "sgpr_flights", "docs/benchmarks.md",
          "| {rf} | **{gpall}** ({secs}) |", _sgpr_flights),
    Claim("the sparse families against NGD-SVGP, the README's summary", "ngd_peers", "README.md",
          "on flights ADVGP's test RMSE is {advgp}\nminutes from the peer's at 60 / 150 / 300 s "
          "(ratio {ratio} at 300 s) and SGPR's {sgpr}; on MNIST odd/even\nSEP's test NLL is {mnist} nats "
          "from it. Where daskgp does not yet win: on flights delayed\n(> 15 min) SEP's test NLL trails it "
          "by {delayed} nats (about {delayed_pct} %), and ADVGP's lead at\n300 s",
          _ngd_readme),
    Claim("the withdrawn NUTS comparison, the README's mention", "nuts_peer", "README.md",
          "The earlier comparison ({ours} against {nuts} s per effective sample", _nuts_withdrawn),
    Claim("ADVGP against converged SVGP on flights, the means over seeds", "peers_converged",
          "docs/guide/advgp.md", "| mean ± sd | **{adv}** |", _advgp_peer_means),
    Claim("converged SVGP on flights, the mean over seeds", "peers_converged", "docs/guide/advgp.md",
          "| **{svgp}** | 180 ± 17 |", _advgp_peer_means),
    Claim("ADVGP and SGPR at 10⁸ rows", "scale", "README.md",
          "ADVGP's test RMSE is {adv} below exact\nleast squares' after {adv_budget} of updates, and SGPR's "
          "{sgpr} below after {sgpr_iter} L-BFGS-B iterations ({sgpr_passes} passes over the rows, "
          "{sgpr_minutes}), with\nthe client {client} "
          "in both", _scale),
    Claim("10⁸ rows: least squares", "scale", "docs/benchmarks.md",
          "| 10⁸ | least squares | exact, the normal equations summed on the workers | {ls_wall} s "
          "| {ls_rmse} | 1 | {ls_client} MB |", _scale),
    Claim("10⁸ rows: ADVGP", "scale", "docs/benchmarks.md",
          "| 10⁸ | **ADVGP, batch** | 600 s: {adv_updates} updates, {adv_spu} s/update (100 partitions) "
          "| {adv_wall} s | **{adv_rmse}** | **{adv_vs}** | **{adv_client} MB** |", _scale),
    Claim("10⁸ rows: SGPR", "scale", "docs/benchmarks.md",
          "| 10⁸ | **SGPR, subset start** | {sgpr_iter} iterations ({sgpr_evals} evaluations, "
          "{sgpr_spe} s each) | {sgpr_wall} s | **{sgpr_rmse}** | **{sgpr_vs}** | **{sgpr_client} MB** |",
          _scale),
    Claim("10⁸ rows: the targets", "scale", "docs/benchmarks.md",
          "the client peaked at {adv_client} MB (target ≤ 1 GB: it holds the\ngraph, never the rows), and "
          "ADVGP's test RMSE is {adv_below} % below exact least squares'", _scale),
    Claim("the sampler's gradient against the floor: the table", "exact_roofline", "docs/benchmarks.md",
          "{before1030}\n{after1030}\n{before8192}\n{after8192}\n{before22784}\n{after22784}", _roofline),
    Claim("the sampler's gradient against the floor: the speed-ups", "exact_roofline", "docs/benchmarks.md",
          "{speedup8192}× faster on 8,192 rows and {speedup22784}× on all 22,784", _roofline),
    Claim("the sampler's gradient against the floor: the noise", "exact_roofline", "docs/benchmarks.md",
          "λ = {lam8192} on 8,192 rows and {lam22784} on 22,784", _roofline),
    Claim("the sampler's gradient against the floor: the probes", "exact_roofline", "docs/benchmarks.md",
          "so the chains use {probes8192} and {probes22784} probes", _roofline),
    Claim("the sampler's gradient against the floor: a narrow product", "exact_roofline",
          "docs/benchmarks.md", "a one-column product costs {one_col} s", _roofline),
    Claim("the sampler's gradient against the floor: the target", "exact_roofline", "docs/benchmarks.md",
          "(≤ 15 s a gradient on 22,784 rows) is {met}: {target_s} s (from {before_s}).**", _roofline),
    Claim("K⁻¹y's own tolerance: its bias and its iterations", "mean_tol", "docs/guide/exact.md",
          "at 1e-4 at most {w8} % of the gradient's 32-probe noise sd on 8,192 rows and {w22} % on 22,784\n"
          "({wh} posterior sd in whitened units), {it4} cold iterations on 22,784 rows against {it6} for "
          "1e-6;\n"
          "at 1e-3 up to {w3} %.", _mean_tol),
    Claim("a stale preconditioner, and the curvature's shared one", "stale_precond", "docs/guide/exact.md",
          "one left at the subset MAP took {far} CG iterations\n  halfway to the mode where one built "
          "there took {near} ({far_s} s against {near_s} s a gradient; a rank-2,000 build\n  costs {build} "
          "s). The curvature's solves share one preconditioner built at its φ: {shared} s instead of {each} "
          "s\n  for a 32-probe curvature at the mode, the same sds to {sd} %.", _stale_precond),
    Claim("the default sampler on 8,192 house_8L rows", "fidelity", "docs/guide/exact.md",
          "200 and R-hat ≤ 1.01): {chains} × {kept} kept draws, bulk ESS ≥ {ess}; mean gaps {gaps} exact sd, "
          "sd\n  ratios {ratios}; {ipe} iterations per effective sample, against concrete's {concrete}",
          _fidelity_house8k),
    Claim("NUTS as its experts run it, concrete: the table", "nuts_fair", "docs/benchmarks.md",
          "| NUTS (NumPyro), dense mass matrix, 4 × (1,000 + 1,000), 2 processes | {nuts} | 1 |\n"
          "| daskgp HMC (`method=\"hmc\"`), exact gradient, to ESS 400 | {hmc} | **{r_hmc}** |\n"
          "| daskgp SGHMC (the default beyond 1,400 rows), to ESS 400 | {sghmc} | **{r_sghmc}** |",
          _nuts_fair),
    Claim("NUTS as its experts run it, concrete: the gradients", "nuts_fair", "docs/benchmarks.md",
          "JAX autodiff {g_auto} s, hand-written {g_hand} s; daskgp's exact gradient {g_ours} s", _nuts_fair),
    Claim("NUTS as its experts run it, concrete: NUTS's best case", "nuts_fair", "docs/benchmarks.md",
          "its sampling phase alone gives {nuts_only} s per ESS, and HMC's end-to-end figure is\n"
          "{r_only}× that",
          _nuts_fair),
    Claim("NUTS as its experts run it, the larger sizes", "nuts_fair", "docs/benchmarks.md", "{rows}",
          _nuts_fair_sizes),
    Claim("ADVGP's rows per gradient task", "advgp_batch", "docs/guide/advgp.md", "{rows}", _advgp_batch),
    Claim("ADVGP's refine on flights", "advgp_refine", "docs/guide/advgp.md",
          "the refined q(w) predicted better in {better} of {pairs} snapshots ({seeds} seeds), by\n"
          "  {mean} ± {sd} minutes of test RMSE ({lo} to {hi}), the pass over every training row taking\n"
          "  at most {secs} s", _advgp_refine),
    Claim("the sparse families against NGD-SVGP: the table", "ngd_peers", "docs/benchmarks.md",
          "{seeds}; daskgp − peer paired per seed", _ngd_peers),
    Claim("the sparse families against NGD-SVGP: the rows", "ngd_peers", "docs/benchmarks.md", "{rows}",
          _ngd_peers),
    Claim("the cached product padded to 16 columns", "product_width", "docs/benchmarks.md",
          "14 columns {plain} s as numpy computes them, {padded} s padded to 16; over widths 9–15 the "
          "padded\n    products take {ratio}× the time, with {same}", _product_width),
    Claim("ADVGP with a straggler host: the table", "multihost_straggler", "docs/guide/advgp.md", "{rows}",
          _straggler),
    Claim("SEP from Parquet at 10⁷ rows", "scale", "docs/benchmarks.md",
          "{iters} minibatches of {batch} rows in {fit} s (the refinement's passes over every row {refine} s "
          "of it): test NLL {nll} nats against the constant predictor's {const} (test error {err}, {pos} of "
          "the trips long), the client's peak {client}, the workers' {workers} MB, {wall} s end to end.",
          _scale_sep),
    Claim("SEP at 10⁷ rows: 16 chunks against 500", "scale", "docs/benchmarks.md",
          "a minibatch took {old_spi} s in 500 chunks and {new_spi} s in 16 ({speedup}× faster: {old_iters} "
          "against {new_iters} minibatches in the same budget), and the client's peak fell from {old_client} "
          "to {new_client} MB (the workers' from {old_workers} MB); test NLL {old_nll} in 500 chunks, "
          "{new_nll} in 16.", _scale_sep_chunks),
    Claim("ADVGP to its own rule at 10⁷ rows", "scale", "docs/benchmarks.md",
          "{updates} updates in {fit} s ({spu} s an update, set-up included), stopped by {rule}: test RMSE "
          "{rmse} ({ratio} × 4.58), the client's peak {client} MB.", _scale_rule),
    Claim("the hold-outs' own floors", "scale", "docs/benchmarks.md",
          "each table's 1 % test rows: {floors}. Against its own floor SGPR's 50 iterations are {sgpr}, and "
          "ADVGP at every default (`advgp-rule`) {advgp}", _scale_bayes),
    Claim("the GPLVM on the taxi table", "scale", "docs/benchmarks.md",
          "| rows | iterations | a chunk | ψ terms | fit s | bound / row | client peak | worker peaks |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |\n{table}", _scale_gplvm),
    Claim("the GPLVM's ψ-statistics a row", "psi_cost", "docs/guide/sparse.md",
          "a local evaluation (the statistics and the local gradient) went from {before} to {after} µs a row "
          "({ratio}×), and a fit of 2 rounds of 5 global and 5 local iterations on two workers from "
          "{fit_before} to {fit_after} s. The statistics agree to {D} relative, the gradients to {grad} of "
          "their largest entry and the fits' bounds to {bound}", _psi_cost),
    Claim("the GPLVM's bound against its chunks", "gplvm_chunks", "docs/guide/sparse.md",
          "On {rows} rows in chunks of {sizes} rows the bound after the same round was {bounds} nats a row, "
          "in {secs} s (the local step {local} s of them)", _gplvm_chunks),
    Claim("SEP's iteration against its chunks", "sep_chunks", "docs/guide/gpc.md",
          "On {rows} rows: {ms} ms an iteration in {chunks} chunks", _sep_chunks),
    Claim("ADVGP to its rule at 10⁸ rows", "scale", "docs/benchmarks.md",
          "{updates} updates of {batch} rows from each of the 100 partitions in {fit} s ({spu} s an update, "
          "set-up included), stopped by {rule}: test RMSE {rmse} ({ratio} × 4.58; the 5 % target {met}), the "
          "client's peak {client} MB, the workers' {workers} GB", _scale_rule_1e8),
    Claim("ADVGP to its rule at 10⁷ rows: an update's rows", "scale", "docs/benchmarks.md",
          "with {old_rows} rows from each partition it had made {old_updates} updates in {old_fit} s "
          "(test RMSE {old_rmse}); with {new_rows} a partition, {new_updates} updates in {new_fit} s "
          "(test RMSE {new_rmse}), {speedup}× sooner", _scale_rule_rows),
    Claim("what an m-point sparse GP reaches on the taxi table", "taxi_capacity", "docs/benchmarks.md",
          "{rows}\n\nThe test rows' own Bayes RMSE (the generator's mean function) is {bayes} and least "
          "squares' {linear}.", _capacity),
    Claim("ADVGP with a straggler host against the default fit: the table", "multihost_straggler",
          "docs/guide/advgp.md", "{rows}", _straggler_default),
    Claim("SEP's minibatch iteration, a task per worker", "sep_tasks", "docs/guide/gpc.md",
          "from 13 chunks of 20,000, {before} → {after} s (median of {runs} runs a side, {same};",
          _sep_tasks),
    Claim("NUTS run to daskgp's stopping rule: the table", "nuts_fair", "docs/benchmarks.md", "{rows}",
          _nuts_target),
    Claim("NUTS run to daskgp's stopping rule: the posteriors agree", "nuts_fair", "docs/benchmarks.md",
          "SGHMC's means within {gap} NUTS sd of NUTS's, sd ratios {sd_lo}–{sd_hi}", _nuts_target),
    Claim("the method as the unit costs nothing (issue 57)", "shared_vocabulary_issue57",
          "docs/benchmarks.md", "(revision {base}) against this one ({revision})", _shared_vocabulary),
    Claim("the method as the unit costs nothing (issue 57): the table", "shared_vocabulary_issue57",
          "docs/benchmarks.md", "{rows}", _shared_vocabulary),
    Claim("the method as the unit costs nothing (issue 57): the draws", "shared_vocabulary_issue57",
          "docs/benchmarks.md", "The concrete draws are {identical} before and after", _shared_vocabulary),
    Claim("NUTS as its experts run it, concrete: the README row", "nuts_fair", "README.md",
          "| converged exact posterior, concrete (n = 1,030), seconds per effective sample end to end "
          "(1 seed) "
          "| {hmc_spe} (HMC, exact gradient) | NumPyro NUTS {nuts_spe} (dense mass, chains in parallel) "
          "| {ratio} | {revision} |", _nuts_fair),
    Claim("the small-n crossover, HMC against SGHMC", "small_n_crossover", "docs/guide/exact.md",
          "| concrete, 1,030 | {concrete}\n| house_8L subset, 2,000 | {house2k}\n"
          "| power_plant subset, 2,000 (two modes) | {power2k}", _crossover),
    Claim("the small-n crossover, its estimate", "small_n_crossover", "docs/guide/exact.md",
          "The posteriors agree: means within {gap} pooled sd. The largest size HMC won in every seed of "
          "every\ncase up to it: {won} rows; the crossing beyond it, at the worst case: {estimate}.",
          _crossover),
    Claim("concrete's time with the single-precision force", "hmc_single", "docs/benchmarks.md",
          "gradient in single precision ({lo}–{hi} s over 3 seeds", _single),
    Claim("the demo's time", "hmc_single", "README.md",
          "make demo    # main job: HMC on concrete until bulk/tail ESS ≥ 400 and R-hat < 1.01 (sampling "
          "{lo}–{hi} s on 2 cores); ArviZ summary", _single),
    Claim("HMC's adaptation: concrete's time", "hmc_adaptation_steponly", "docs/benchmarks.md",
          "(concrete to ESS 400: {lo}–{hi} s end to end over 3 seeds", _adaptation),
    Claim("HMC's adaptation: the step only against windows", "hmc_adaptation_steponly", "docs/guide/exact.md",
          "reached the target in {ratio_concrete} of the\nwall time of 150 with windows on concrete and "
          "{ratio_power1k} on 1,000 power_plant rows", _adaptation),
    Claim("HMC's single-precision inner force", "hmc_single", "docs/guide/exact.md",
          "seeds): {single_concrete} of the wall time on concrete and {single_power1k} on 1,000 power_plant "
          "rows, with\nthe same acceptance ({accept}).", _single),
    Claim("the exact gradient on a GPU", "gpu_gradient_flights_rows150000", "README.md",
          "the exact gradient has run on one NVIDIA H200 up to {rows} rows", _gpu_rows),
    Claim("house_8L under the default sampler, as it stands", "sghmc_house8l", "docs/benchmarks.md",
          "after {sittings} sittings ({hours} h end to end) and {kept} kept iterations per chain: min bulk "
          "ESS {ess_bulk}, tail {ess_tail}, max R-hat {rhat}; every mean within {mean_diff} reference sd, "
          "the sds {sd_lo}–{sd_hi}× the reference's; {draws_per_ess} draws per bulk ESS", _house8l),
    Claim("house_8L with 2 chains, as it stands", "sghmc_house8l_c2", "docs/benchmarks.md",
          "after {sittings} sitting(s) ({hours} h end to end) and {kept} kept iterations per chain: min bulk "
          "ESS {ess_bulk}, tail {ess_tail}, max R-hat {rhat}; every mean within {mean_diff} reference sd, "
          "the sds {sd_lo}–{sd_hi}× the reference's; {draws_per_ess} draws per bulk ESS", _house8l),
    Claim("house_8L's second seed, stopped", "sghmc_house8l_c2_s1", "docs/benchmarks.md",
          "its warmup took {warmup_s} s ({gradients}\n    gradients), then {spi} s an iteration of the two "
          "chains (about {products} products of up to {columns} columns) over its\n    first {draws} "
          "iterations; at {iterations} iterations that is {hours} h end to end, and the sitting was stopped "
          "at {wall_s} s",
          _house8l_costs),
    Claim("issue 56's hostile re-run", "hostile_files", "docs/benchmarks.md",
          "| after | {n} | {one_line} | {accepted} | {misleading} | {traceback} | {silent} | {loss} | "
          "{harness_error} |", _hostile),
    Claim("issue 56's hostile re-run on the code before it", "hostile_files_before", "docs/benchmarks.md",
          "| before (5e0e80b) | {n} | {one_line} | {accepted} | {misleading} | {traceback} | {silent} | "
          "{loss} | {harness_error} |", _hostile),
]

# The sparse-peer section's flights paragraphs (the numbers of the current run; the earlier run's are quoted
# as such)
CLAIMS += [Claim(f"the sparse peers' flights paragraphs: {name}", "ngd_peers", "docs/benchmarks.md", template,
                 ngd_flights_prose)
           for name, template in (
               ("SGPR against the peer", "beyond the spread at 60, 150 and 300 s, by {sgpr}\n  minutes"),
               ("SGPR against ADVGP", "level at 60 s ({sa60}), below on average at 150 s ({sa150},"),
               ("SGPR against ADVGP at 300 s", "below beyond the spread at 300 s ({sa300})"),
               ("SGPR's iterations", "each seed is still running ({its} iterations)"),
               ("ADVGP against the peer", "at every time in this run, by {adv} minutes\n  (ratio ADVGP / "
                                          "peer at 300 s: {ratio})"),
               ("per seed at 300 s", "  ({ours} against {peer}; {early})."),
               ("ADVGP's updates", "cheaper on this machine ({spu} s against 0.22–0.23 s: {ups} updates"),
               ("the peer's steps", "the peer's steps dearer ({steps} in 300 s"))]
CLAIMS += [Claim("the classification guide: breast cancer's table", "gpc", "docs/guide/gpc.md",
                 "  {breast_cancer}", gpc_accuracy),
           Claim("the classification guide: breast cancer's logistic regression", "gpc", "docs/guide/gpc.md",
                 "Logistic regression {lr}.", gpc_accuracy),
           Claim("the classification guide: MNIST odd/even's table", "gpc", "docs/guide/gpc.md",
                 "  {mnist_parity}", gpc_accuracy)]
CLAIMS += [Claim("the classification guide: flights delayed against time", "gpc", "docs/guide/gpc.md",
                 "  {rows}", gpc_flights)]
CLAIMS += [Claim("the classification guide: memory against n", "gpc", "docs/guide/gpc.md", "  {rows}",
                 gpc_memory),
           Claim("the classification guide: crowded inducing inputs", "gpc", "docs/guide/gpc.md",
                 "    {crowded}", gpc_memory)]
CLAIMS += [Claim("the ADVGP guide: against converged SVGP, per seed", "peers_converged",
                 "docs/guide/advgp.md", "  {rows}", advgp_converged),
           *(Claim(f"the classification guide: SEP against EP and converged SVGP, split {i}",
                   "peers_converged", "docs/guide/gpc.md", f"{{split{i}}}", sep_converged) for i in range(3))]
CLAIMS += [Claim(f"the ADVGP guide: issue 30's {part}", "advgp_flights", "docs/guide/advgp.md",
                 indent + blank, advgp_flights)
           for part, indent, blank in (("m × τ table", "  ", "{grid}"), ("peers", "  ", "{peers}"),
                                       ("stragglers", "    ", "{stragglers}"))]
CLAIMS += [Claim("the ADVGP guide: stragglers at the default", "advgp_stragglers", "docs/guide/advgp.md",
                 "    {rows}", advgp_stragglers)]
CLAIMS += [Claim("the exact guide: Hutchinson against Hutch++", "trace_estimators", "docs/guide/exact.md",
                 "  {rows}", trace_estimators),
           Claim("the exact guide: the traces", "trace_estimators", "docs/guide/exact.md", "({traces} from",
                 trace_estimators)]
CLAIMS += [Claim(f"the classification guide: the binary suite, {problem}",
                 f"gpc_suite/{problem}_rows3000", "docs/guide/gpc.md", "{row}", gpc_suite_row)
           for problem in ("breast_cancer", "house_price_high", "mnist_zero", "randhie_visit",
                           "weather_rain")]
CLAIMS += [Claim("the float64 sweep on half of house_8L, the table", "exact_gradient_sweep_rows11392",
                 "docs/benchmarks.md", "  {rows}", sweep_half)]
CLAIMS += [Claim("the sparse peers' flights-delayed paragraph: the gap", "ngd_peers", "docs/benchmarks.md",
                 "it is behind at every time, in every seed, by {diff} nats", ngd_delayed_prose),
           Claim("the sparse peers' flights-delayed paragraph: at 300 s", "ngd_peers", "docs/benchmarks.md",
                 "Its test NLL at 300 s is {sep} against the peer's {peer}", ngd_delayed_prose)]

# The GPU page
CLAIMS += [Claim("the GPU page: house_8L's table", "gpu_gradient", "docs/gpu.md", "{rows}", gpu_page),
           Claim("the GPU page: flights' table", "gpu_gradient", "docs/gpu.md", "{flights}", gpu_page)]

# The guides' tables
CLAIMS += [
    Claim("the roulettes' bias against CG, the table", "ulisse_bias", "docs/guide/exact.md", "{rows}",
          ulisse_bias),
    *(Claim(f"the exact warmup against the ascent, row {i}", "warmup_exact", "docs/guide/exact.md",
            f"{{row{i}}}", warmup_exact) for i in range(4)),
    *(Claim(f"committing the warmup, seed {i}", "warmup_resume", "docs/guide/exact.md", f"{{row{i}}}",
            warmup_resume) for i in range(2)),
    Claim("committing the warmup, the median ratio", "warmup_resume", "docs/guide/exact.md",
          "The median ratio, {ratio}", warmup_resume),
    Claim("products on one and two workers", "exact_scaling", "docs/guide/exact.md", "{rows}",
          exact_scaling),
    Claim("the communication model's table", "exact_scaling", "docs/guide/exact.md", "{model}",
          exact_scaling),
    Claim("the default gradient on one and two workers", "exact_scaling", "docs/guide/exact.md",
          "**{one} s with one worker, {two} s with two**\n(ratio {ratio}, efficiency {eff}", exact_scaling),
    Claim("the GPLVM classifier's scoring, the table", "gplvm_scoring", "docs/guide/sparse.md", "{rows}",
          gplvm_scoring),
]

# The two before/after timing tables of shared_vocabulary.py: each row's label, and its numbers
CLAIMS += [Claim(f"the shared vocabulary's cost: {key}{part}", "shared_vocabulary", "docs/benchmarks.md",
                 blank, vocabulary_row(key))
           for key in ("sgpr_eval_s", "advgp_partition_s", "gpc_sep_pass_s", "exact_gradient_s")
           for part, blank in (("", "{head}"), (", its numbers", "{tail}"))]
CLAIMS += [Claim(f"the registry and run store's cost: {key}", "registry_and_run_store", "docs/benchmarks.md",
                 "{tail}", vocabulary_row(key))
           for key in ("sgpr_eval_s", "advgp_partition_s", "gpc_sep_pass_s", "exact_gradient_s",
                       "concrete_s_per_ess")]

CLAIMS += [Claim(*entry) for entry in PROSE]  # the prose's sentences (claim_prose.py)


def cited_results() -> list[str]:
    """The results JSONs the claims cite, each once, in claim order."""
    return list(dict.fromkeys(c.result for c in CLAIMS))


def provenance_table() -> str:
    """A Markdown table: each cited results JSON, the revision it measured, and whether its code changed."""
    flag = {"current": "current", "code changed since": "**code changed since: re-measure**",
            "code not recorded": "**measured before code hashes were recorded: re-measure**"}
    rows = ["| results | measured on revision | code | quoted in |", "| --- | --- | --- | --- |"]
    for name in cited_results():
        rev, state = status(name)
        where = ", ".join(sorted({c.where for c in CLAIMS if c.result == name}))
        rows.append(f"| `benchmarks/results/{name}.json` | {rev} | {flag[state]} | {where} |")
    return "\n".join(rows)


def backfill(name: str) -> dict:
    """Provenance for a results JSON written before JSONs recorded it: the revision that last committed the
    file (its measurement ran on that revision's code or its parent's) and the code's hash at that revision,
    marked as backfilled. Written into the JSON; a JSON that has provenance is left alone."""
    path = RESULTS / f"{name}.json"
    text = path.read_text()
    doc = json.loads(text)
    if "provenance" in doc:
        return doc["provenance"]
    rev = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h", "--", str(path)],
                         capture_output=True, text=True, check=True).stdout.strip()
    paths = code_paths(name)
    doc["provenance"] = {"revision": rev, "code": list(paths), "code_sha256": code_hash_at(rev, paths),
                         "backfilled": "from the commit that last wrote this file"}
    indent = re.match(r"\{\n( *)\"", text)  # the file's own indentation, so the diff is the stamp alone
    path.write_text(json.dumps(doc, indent=len(indent.group(1)) if indent else None, ensure_ascii=False)
                    + ("\n" if text.endswith("\n") else ""))
    return doc["provenance"]


def missing(texts: dict[str, str] | None = None,
            claims: list[Claim] | None = None) -> list[tuple[Claim, str]]:
    """(claim, its rendered text) of every claim (of ``claims``, all by default) whose text is not in its
    file; ``texts`` maps a file (relative to the root) to its content, read from disk when absent."""
    texts = dict(texts or {})
    out = []
    for claim in CLAIMS if claims is None else claims:
        if claim.where not in texts:
            texts[claim.where] = (ROOT / claim.where).read_text()
        text = claim.render()
        if text not in texts[claim.where]:
            out.append((claim, text))
    return out


def claimed_spans(where: str, text: str) -> list[tuple[int, int]]:
    """(start, end) offsets in ``text`` (the content of ``where``) of every occurrence of a claim's rendered
    text on that page."""
    spans = []
    for claim in CLAIMS:
        if claim.where != where:
            continue
        rendered = claim.render()
        start = text.find(rendered)
        while start >= 0:
            spans.append((start, start + len(rendered)))
            start = text.find(rendered, start + 1)
    return spans


# The pages whose tables quote benchmarks: every number in a table row there is a claim's, or the table is
# marked, on the line before it, as not read from a results JSON (the reason is in the source)
BENCHMARK_PAGES = ("README.md", "docs/benchmarks.md", "docs/gpu.md", "docs/guide/exact.md",
                   "docs/guide/sparse.md", "docs/guide/advgp.md", "docs/guide/gpc.md",
                   "docs/guide/dashboard.md")
NOT_FROM_JSON = "<!-- not read from a results JSON:"
def uncited_table_rows(texts: dict[str, str] | None = None) -> list[tuple[str, int, str]]:
    """(file, line number, row) of every table body row with a digit on BENCHMARK_PAGES that no claim's
    rendered text covers, in a table not marked NOT_FROM_JSON; ``texts`` as for :func:`missing`."""
    texts = dict(texts or {})
    out = []
    for where in BENCHMARK_PAGES:
        text = texts[where] if where in texts else (ROOT / where).read_text()
        covered = set()
        for start, end in claimed_spans(where, text):
            first = text.count("\n", 0, start)
            covered.update(range(first, first + text.count("\n", start, end) + 1))
        lines = text.splitlines()
        i = 0
        while i < len(lines):  # a table may be indented (inside a list item)
            if not lines[i].lstrip().startswith("|"):
                i += 1
                continue
            end = next((j for j in range(i, len(lines)) if not lines[j].lstrip().startswith("|")), len(lines))
            marked = i > 0 and lines[i - 1].lstrip().startswith(NOT_FROM_JSON)
            for k in range(i + 2, end):  # the rows after the header and its rule
                if not marked and k not in covered and any(ch.isdigit() for ch in lines[k]):
                    out.append((where, k + 1, lines[k]))
            i = end
    return out


# A number as a measurement is written: a decimal, or a count with a unit of time, memory, size or ratio.
# Versions (3.12, 1.15.2) and numbers inside code spans are not measurements.
MEASURED = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:\s?(?:%|×|s\b|ms\b|min\b|minutes?\b|h\b|hours?\b"
                      r"|[KMGT]i?B\b|nats?\b|s/ESS\b)|(?<=\d)\.\d+)(?![\w.]*\d)")
VERSION = re.compile(r"(?:Python|python|PyPI|GPyTorch|torch|NumPyro|JAX|jax|GPflow|dask|numpy|scipy|CUDA|cupy"
                     r"|daskgp|version|v)\s?[≥≤>=<~]*\s?\d+(?:\.\d+)+|\d+\.\d+\.\d+")


def _blocks(lines: list[str]):
    """(first line index, end index, kind) of each block of a Markdown page: 'table' (lines starting with
    '|'), 'code' (a fenced block), 'comment' (an HTML comment) or 'prose' (a run of other non-blank lines:
    a paragraph, or a list without blank lines between its items)."""
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        if not line:
            i += 1
            continue
        if line.startswith(("```", "~~~")):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].lstrip().startswith(line[:3])),
                       len(lines) - 1) + 1
            yield i, end, "code"
        elif line.startswith("|"):
            end = next((j for j in range(i, len(lines)) if not lines[j].lstrip().startswith("|")), len(lines))
            yield i, end, "table"
        elif line.startswith("<!--") and not line.startswith(NOT_FROM_JSON):
            end = next((j for j in range(i, len(lines)) if "-->" in lines[j]), len(lines) - 1) + 1
            yield i, end, "comment"
        else:
            end = i + 1
            while end < len(lines) and lines[end].strip() and not lines[end].lstrip().startswith(
                    ("|", "```", "~~~", "#")) and not lines[i].lstrip().startswith("#"):
                end += 1
            yield i, end, "prose"
        i = end


def uncited_prose(texts: dict[str, str] | None = None) -> list[tuple[str, int, str]]:
    """(file, line number, the number in its line) of every measurement-like number (:data:`MEASURED`) in
    the prose and code blocks of BENCHMARK_PAGES that no claim's rendered text covers, in a block not
    marked by a NOT_FROM_JSON line (its first line, or the line before it). The marker's why says where
    the numbers come from: an earlier run whose JSON was overwritten, a setting, a CI run, a derivation.
    ``texts`` as for :func:`missing`."""
    texts = dict(texts or {})
    out = []
    for where in BENCHMARK_PAGES:
        text = texts[where] if where in texts else (ROOT / where).read_text()
        covered = bytearray(len(text))  # 1 where a claim's rendered text lies
        for start, end in claimed_spans(where, text):
            covered[start:end] = b"\1" * (end - start)
        lines = text.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        for first, end, kind in _blocks([x.rstrip("\n") for x in lines]):
            marked = any(lines[k].lstrip().startswith(NOT_FROM_JSON) for k in (first, first - 1) if k >= 0)
            if kind not in ("prose", "code") or marked:
                continue
            for k in range(first, end):
                line = lines[k]
                skip = [m.span() for m in VERSION.finditer(line)]
                skip += [m.span() for m in re.finditer(r"`[^`]*`", line)] if kind == "prose" else []
                for m in MEASURED.finditer(line):
                    if any(a <= m.start() < b for a, b in skip) or covered[offsets[k] + m.start()]:
                        continue
                    out.append((where, k + 1, f"{m.group(0)!r} in: {line.strip()[:160]}"))
    return out


def main() -> None:
    import sys

    if sys.argv[1:] == ["--backfill"]:
        for name in cited_results():
            print(name, backfill(name))
        return
    for claim in CLAIMS:
        text = claim.render()
        found = text in (ROOT / claim.where).read_text()
        print(f"[{'ok' if found else 'MISSING'}] {claim.name} ({claim.where}):\n{text}\n")
    for where, line, row in uncited_table_rows():
        print(f"[UNCITED] {where}:{line}: {row}")
    for where, line, what in uncited_prose():
        print(f"[UNCITED PROSE] {where}:{line}: {what}")
    print(provenance_table())


if __name__ == "__main__":
    main()
