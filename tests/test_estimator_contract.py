"""One contract every daskgp estimator keeps (issue 57, item 4): ``fit(X, y)`` on a real data set, then
``save`` to netCDF and to zarr and ``load`` back to a fitted estimator that predicts bit-identically (the
same numbers, not close ones), with a fitted ``kernel_`` (a kernel object of :mod:`daskgp.model.kernels` in
the data's units) and its fitted attributes restored; a saved file of another estimator, a damaged copy and
an overwrite of a file daskgp did not write are refused in one line naming the file.

Data: concrete's rows (regression, ``../shared/data``), scikit-learn's breast cancer set (classification)
and its digits (the GPLVMs), each cut to a few hundred rows: the contract is about the files, not the fits.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits

import daskgp as dg
from daskgp.model.kernels import Kernel

pytestmark = pytest.mark.cluster


def _regression(concrete):
    return concrete.X[:300], concrete.y[:300]


def _classification():
    d = load_breast_cancer()
    return d.data[:300, :5], d.target[:300]


def _digits(two_classes: bool):
    d = load_digits()
    keep = np.isin(d.target, [0, 1]) if two_classes else d.target == 0
    return d.data[keep][:120], d.target[keep][:120]


# (estimator, data, the outputs that must be identical after a round trip, fitted attributes to compare)
CASES = {
    "SparseGPRegressor": (lambda: dg.SparseGPRegressor(n_inducing=10, max_iter=5), "regression",
                          ["predict"], ["bound_", "noise_variance_", "n_iter_"]),
    "ADVGPRegressor": (lambda: dg.ADVGPRegressor(n_inducing=10, max_iter=20), "regression",
                       ["predict"], ["objective_", "n_iter_", "converged_", "gradients_per_partition_"]),
    "SparseGPClassifier": (lambda: dg.SparseGPClassifier(n_inducing=8, max_iter=4), "classification",
                           ["predict_proba", "predict"],
                           ["evidence_", "n_iter_", "best_iteration_", "classes_"]),
    "BayesianGPRegressor": (lambda: dg.BayesianGPRegressor(method="hmc", n_chains=2, n_iter=40),
                            "regression", ["predict"], ["n_iter_", "param_names_", "noise_variance_"]),
    "BayesianGPLVM": (lambda: dg.BayesianGPLVM(n_inducing=8, n_outer=2, global_iter=5, local_iter=3),
                      "digits1", ["embedding_", "predict_latent"],
                      ["bound_", "bound_trace_", "noise_variance_"]),
    "GPLVMClassifier": (lambda: dg.GPLVMClassifier({"n_inducing": 6, "n_outer": 1, "global_iter": 3,
                                                   "local_iter": 2}, n_iter=5),
                        "digits2", ["predict_proba"], ["classes_", "log_prior_"]),
}


# the estimators whose fit reports FitEvents (the sampled regressor reports its chains' RunStatus)
EVENTS = {"SparseGPRegressor": ("sgpr", "bound", "bound_"),
          "ADVGPRegressor": ("advgp", "-ELBO", "objective_"),
          "SparseGPClassifier": ("sep", "log Z", "evidence_"), "BayesianGPLVM": ("gplvm", "bound", None)}


TARGETS: dict = {}  # the targets each estimator of the fixture was fitted to (None: the GPLVM's)


@pytest.fixture(scope="module")
def fitted(client, concrete):
    """Each estimator fitted once on its data, with the rows it predicts at and the events its fit
    reported."""
    data = {"regression": _regression(concrete), "classification": _classification(),
            "digits1": _digits(False), "digits2": _digits(True)}
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short fits: convergence warnings say what is known
        for name, (make, kind, _, _) in CASES.items():
            X, y = data[kind]
            est, events = make(), []
            kw = {"callback": events.append} if name in EVENTS or name == "BayesianGPRegressor" else {}
            est = est.fit(X, client=client, **kw) if kind == "digits1" else est.fit(X, y, client=client, **kw)
            out[name] = (est, X, events)
            TARGETS[name] = y
    return out


@pytest.mark.parametrize("name", list(EVENTS))
def test_every_fit_reports_one_event_type(fitted, name):
    """One FitEvent per step, in order, of the method that made it, its objective named, the last one the
    fitted objective; the clock never runs backwards."""
    from daskgp import FitEvent

    est, _, events = fitted[name]
    method, objective, attr = EVENTS[name]
    assert events and all(isinstance(e, FitEvent) for e in events)
    assert [e.step for e in events] == list(range(1, len(events) + 1))
    assert {e.method for e in events} == {method} and {e.objective_name for e in events} == {objective}
    assert all(np.isfinite(e.objective) for e in events)
    assert all(b.seconds >= a.seconds for a, b in zip(events, events[1:], strict=False))
    # SGPR's bound_ is at the returned point, and so is ADVGP's objective_ after its refine (q(w) re-made
    # from every row: tests/advgp/test_estimator.py checks it against −L of the rows)
    if attr is not None and name not in ("SparseGPRegressor", "ADVGPRegressor"):
        assert events[-1].objective == getattr(est, attr)
    if name == "BayesianGPLVM":
        assert [e.objective for e in events] == est.bound_trace_


def _outputs(est, X, what: list[str], client) -> dict:
    out = {}
    for w in what:
        if w == "predict" and isinstance(est, dg.SparseGPClassifier | dg.GPLVMClassifier):
            out[w] = est.predict(X)
        elif w == "predict":
            out[w] = est.predict(X, return_std=True)
        elif w == "predict_proba":
            out[w] = est.predict_proba(X, client=client) if isinstance(est, dg.GPLVMClassifier) \
                else est.predict_proba(X)
        elif w == "predict_latent":
            out[w] = est.predict_latent(est.embedding_[:20])
        else:
            out[w] = getattr(est, w)
    return out


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return all(_same(x, y) for x, y in zip(a, b, strict=True))
    return np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
@pytest.mark.parametrize("name", list(CASES))
def test_save_and_load_round_trip_predicts_identically(fitted, client, tmp_path, name, suffix):
    est, X, _ = fitted[name]
    _, _, outputs, attrs = CASES[name]
    path = tmp_path / f"model{suffix}"
    est.save(path)
    back = type(est).load(path)
    assert back.get_params() == {**est.get_params(), **({"scheduler": None} if "scheduler" in
                                                          est.get_params() else {})}
    assert all(_same(x, y) for x, y in zip(_outputs(est, X, outputs, client).values(),
                                           _outputs(back, X, outputs, client).values(), strict=True))
    for a in attrs:
        assert _same(getattr(est, a), getattr(back, a)), a
    assert back.n_features_in_ == est.n_features_in_
    # a second save over the first is the overwrite rule: refused without overwrite, done with it
    with pytest.raises(FileExistsError, match="exists; pass overwrite=True"):
        back.save(path)
    back.save(path, overwrite=True)


@pytest.mark.parametrize("name", list(CASES))
def test_every_fitted_estimator_names_its_kernel_and_likelihood_in_the_datas_units(fitted, name):
    from daskgp.model.likelihoods import Gaussian, Probit

    est, _, _ = fitted[name]
    models = est.models_ if isinstance(est, dg.GPLVMClassifier) else [est]
    for m in models:
        assert isinstance(m.kernel_, Kernel)
        assert np.all(np.isfinite(m.kernel_.lengthscale)) and m.kernel_.variance > 0
        if isinstance(m, dg.SparseGPClassifier):
            assert isinstance(m.likelihood_, Probit)
        else:  # the regressions' noise, the same number as their noise_variance_ (y units²)
            assert isinstance(m.likelihood_, Gaussian) and m.likelihood_.noise_variance == m.noise_variance_
        # the fitted parameters are the family's named structure (standardised units): their unconstrained
        # vector has the structure's size and reads back to the same named values
        from daskgp.model.params import Parameters

        p = m.params_
        assert isinstance(p, Parameters)
        v = p.to_vector()
        assert v.shape == (p.structure().size,) and np.all(np.isfinite(v))
        assert np.allclose(p.with_vector(v).to_vector(), v, rtol=1e-14, atol=1e-14)
    if isinstance(est, dg.BayesianGPRegressor):  # the posterior medians, in the data's units via the scalers
        assert est.params_.noise * est.y_scale_**2 == est.noise_variance_
        assert est.params_.structure().entry_names() == est.param_names_
    if isinstance(est, dg.SparseGPRegressor):  # the same numbers the labelled attributes give
        assert est.kernel_.variance == est.kernel_variance_
        assert np.array_equal(est.kernel_.lengthscale, est.lengthscales_)


def test_a_sampled_regressors_events_are_the_runs_status(fitted):
    """The chains' fit reports the same event type: iterations per chain as its step (never backwards, the
    last the run's length), the smallest ESS of the kept draws as its objective (NaN before there are
    any), its R-hat among the values and the run's status as its record."""
    from daskgp import FitEvent
    from daskgp.mcmc.diagnostics import RunStatus

    est, _, events = fitted["BayesianGPRegressor"]
    assert events and all(isinstance(e, FitEvent) for e in events)
    assert {e.method for e in events} == {"hmc"} and {e.objective_name for e in events} == {"min ESS"}
    steps = [e.step for e in events]
    assert steps == sorted(steps) and steps[-1] == est.n_iter_ and events[-1].total == est.n_iter_
    assert all(isinstance(e.record, RunStatus) and "r_hat" in e.values for e in events)
    assert np.isfinite(events[-1].objective) and events[-1].objective == min(
        events[-1].record.ess_bulk, events[-1].record.ess_tail)


def test_a_saved_model_of_another_class_is_refused_naming_it(fitted, tmp_path):
    est, _, _ = fitted["ADVGPRegressor"]
    path = tmp_path / "advgp.nc"
    est.save(path)
    with pytest.raises(ValueError, match=r"advgp.nc holds no daskgp.saved.SparseGPClassifier \(attribute "
                                         r"'model' is 'daskgp.saved.ADVGPRegressor'\)"):
        dg.SparseGPClassifier.load(path)
    # nor may a save of another class replace it
    other, _, _ = fitted["SparseGPClassifier"]
    with pytest.raises(ValueError, match="refusing to overwrite"):
        other.save(path, overwrite=True)


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_a_damaged_copy_is_refused_naming_what_differs(fitted, tmp_path, suffix):
    """A value changed after saving (as a lost chunk reads back as fill values) must not predict."""
    import xarray as xr

    est, _, _ = fitted["SparseGPClassifier"]
    path = tmp_path / f"gpc{suffix}"
    est.save(path)
    ds = (xr.load_dataset(path) if suffix == ".nc" else xr.open_zarr(path, consolidated=False).load())
    ds["factor_c"].values[0] += 1.0
    bad = tmp_path / f"bad{suffix}"
    ds.to_netcdf(bad) if suffix == ".nc" else ds.to_zarr(bad, consolidated=False)
    with pytest.raises(ValueError, match=r"bad\.(nc|zarr) is damaged: factor_c differ"):
        dg.SparseGPClassifier.load(bad)
    ds = (xr.load_dataset(path) if suffix == ".nc" else xr.open_zarr(path, consolidated=False).load())
    ds.attrs["state"] = ds.attrs["state"].replace('"n_iter": 4', '"n_iter": 5')
    bad2 = tmp_path / f"bad2{suffix}"
    ds.to_netcdf(bad2) if suffix == ".nc" else ds.to_zarr(bad2, consolidated=False)
    with pytest.raises(ValueError, match="is damaged: the attributes differ"):
        dg.SparseGPClassifier.load(bad2)


def test_a_missing_or_foreign_file_is_one_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="no saved model at"):
        dg.ADVGPRegressor.load(tmp_path / "absent.nc")
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"not netcdf")
    with pytest.raises(ValueError, match="junk.nc is not a readable netcdf file"):
        dg.ADVGPRegressor.load(junk)
    with pytest.raises(ValueError, match="a saved model is a netCDF file"):
        dg.ADVGPRegressor.load(tmp_path / "model.pkl")


def test_an_unfitted_estimator_does_not_save(tmp_path):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        dg.ADVGPRegressor().save(tmp_path / "m.nc")
    assert not os.listdir(tmp_path)


def test_a_kernel_object_parameter_survives_the_round_trip(fitted, tmp_path, concrete):
    """``kernel=`` given as an object (its type and hyperparameters) is stored as plain data and rebuilt."""
    from daskgp.model.kernels import Matern32

    est, _, _ = fitted["ADVGPRegressor"]
    k = Matern32(variance=2.0, lengthscale=[1.0, 2.0], ard=True)
    est2 = dg.ADVGPRegressor.load(_saved(est.set_params(kernel=k), tmp_path / "k.nc"))
    est.set_params(kernel="rbf")
    assert isinstance(est2.kernel, Matern32) and est2.kernel.variance == 2.0
    assert np.array_equal(est2.kernel.lengthscale, [1.0, 2.0])


def _saved(est, path):
    est.save(path)
    return path


def test_a_two_argument_callback_still_gets_its_04_pair(client, concrete):
    """daskgp 0.4's callback shapes keep working for one more release, with a FutureWarning: SGPR's
    (iteration, bound) — the same numbers as the events of a one-argument callback on the same fit."""
    X, y = _regression(concrete)
    pairs, events = [], []
    def old(iteration, bound):
        pairs.append((iteration, bound))

    with pytest.warns(FutureWarning, match="SparseGPRegressor.fit: a callback of two arguments"):
        dg.SparseGPRegressor(n_inducing=10, max_iter=4).fit(X, y, client=client, callback=old)
    dg.SparseGPRegressor(n_inducing=10, max_iter=4).fit(X, y, client=client, callback=events.append)
    assert pairs and pairs == [(e.step, e.objective) for e in events]


@pytest.mark.parametrize("name", list(CASES))
def test_every_fit_takes_its_runtime_as_one_object(fitted, client, name):
    """``fit(X, y, runtime=FitRuntime(...))`` is the keywords' fit: the same predictions, bit for bit, and
    the same events; giving a runtime field also as a keyword, or one the family's fit has no use for, is
    refused in one line before anything is fitted."""
    import inspect

    from daskgp import FitRuntime

    est, X, events = fitted[name]
    make, kind, outputs, _ = CASES[name]
    assert inspect.signature(type(est).fit).parameters["runtime"].kind is inspect.Parameter.KEYWORD_ONLY
    y = None if kind == "digits1" else TARGETS[name]
    seen = []
    rt = FitRuntime(client=client, callback=seen.append if name in EVENTS else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = make().fit(X, runtime=rt) if y is None else make().fit(X, y, runtime=rt)
    first, second = _outputs(est, X, outputs, client), _outputs(again, X, outputs, client)
    for out in outputs:
        assert np.array_equal(np.asarray(first[out]), np.asarray(second[out])), out
    if name in EVENTS:
        assert [(e.step, e.objective) for e in seen] == [(e.step, e.objective) for e in events]
    args = (X,) if y is None else (X, y)
    with pytest.raises(ValueError, match=r"\.fit: give client in the runtime or as keywords, not both"):
        make().fit(*args, client=client, runtime=rt)
    if name in ("GPLVMClassifier", "BayesianGPRegressor", "BayesianGPLVM", "SparseGPRegressor"):
        with pytest.raises(ValueError, match=rf"{name}\.fit takes no time_budget"):
            make().fit(*args, runtime=FitRuntime(client=client, time_budget=5.0))

