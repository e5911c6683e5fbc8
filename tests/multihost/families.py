"""Fit every sparse family and return what each fitted (run by tests/multihost/test_hosts.py as a script on
the client host against a scheduler on another host, and in the test's own process on a local cluster).

    python tests/multihost/families.py OUT.npz [--scheduler ADDRESS] [--parquet FOLDER]

Each estimator is deterministic here (SGPR's L-BFGS-B, ADVGP with τ = 0, GPC by SEP, the GPLVM's fixed
rounds), so the same rows give the same numbers wherever the workers run.
"""

from __future__ import annotations

import argparse


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--scheduler")
    ap.add_argument("--parquet", help="power_plant as a Parquet folder (SGPR and ADVGP read it on workers)")
    a = ap.parse_args()

    import numpy as np
    from distributed import Client, LocalCluster
    from sklearn.datasets import load_breast_cancer, load_digits

    import daskgp as dg
    from daskgp.compute.cluster import close_client, cluster_workers, worker_environ
    from daskgp.datasets import read_table

    if a.scheduler:
        client = Client(a.scheduler, timeout=60)
    else:
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                               env=worker_environ())
        client = Client(cluster)
    try:
        out = {"workers": np.array(sorted(cluster_workers(client)))}
        t = read_table(a.parquet).check_finite()
        sg = dg.SparseGPRegressor(n_inducing=20, max_iter=15, chunk_rows=1500).fit(t.X, t.y, client=client)
        out["sgpr_bound"] = np.asarray(sg.bound_trace_)
        out["sgpr_pred"] = np.asarray(sg.predict(t.X[:300].compute()))
        adv = dg.ADVGPRegressor(n_inducing=16, max_iter=30, tau=0, tol=None, random_state=0)
        adv.fit(t.X, t.y, client=client)
        out["advgp_objective"] = np.array([r.objective for r in adv.records_])
        out["advgp_pred"] = np.asarray(adv.predict(t.X[:300].compute()))
        X, y = load_breast_cancer(return_X_y=True)
        gpc = dg.SparseGPClassifier(n_inducing=10, method="sep", max_iter=15, chunk_rows=100)
        gpc.fit(X, y, client=client)
        out["gpc_params"] = gpc.params_.to_vector()
        out["gpc_proba"] = gpc.predict_proba(X[:100])
        Y = load_digits().data[:200]
        lv = dg.BayesianGPLVM(n_components=2, n_inducing=8, n_outer=2, global_iter=5, local_iter=5,
                              chunk_rows=50).fit(Y, client=client)
        out["gplvm_bound"] = np.asarray(lv.bound_trace_)
        out["gplvm_embedding"] = np.asarray(lv.embedding_)
        np.savez(a.out, **out)
    finally:
        close_client(client)


if __name__ == "__main__":
    main()
