"""Issue 31: SEP, EP and ADF at their defaults on real binary problems the fit has not been tuned on
(tests/gpc/binary_sets.py: hourly weather, house prices, the RAND health experiment, MNIST digits; 5–30
features, positive rates 3.5–69 %), against an exact Laplace GP classifier (scikit-learn's, RBF-ARD, on the
same standardised inputs) and logistic regression.

Per problem (1,200 rows: 800 to train, 400 held out) and method, on the held-out rows' log losses:

* never at the class prior when logistic regression beats it (by more than two standard errors of their
  paired per-row difference): the method gains on the prior at least half what logistic regression gains,
  up to two standard errors of the method's own paired difference with the prior;
* within 2 % of the Laplace classifier (SEP and EP): the paired mean difference (method − Laplace) is at most
  2 % of Laplace's NLL plus two standard errors of that difference. ADF is only held to the first check:
  the paper's baseline, its q holds every point in that point's own cavity and underestimates the variance,
  and the paper finds it worse than EP on data sets of this size.

Power: on every problem the class-prior predictor fails at least one of the checks (asserted), so a fit
that settles on the prior, as default SEP and ADF did before this issue, cannot pass.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from distributed import Client, LocalCluster
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

import daskgp as dg

from .binary_sets import load_problem

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

PROBLEMS = ("weather_rain", "house_price_high", "randhie_visit", "mnist_zero")
METHODS = ("sep", "ep", "adf")


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                      memory_limit="3GiB") as cluster, Client(cluster, set_as_default=False) as c:
        yield c


def _losses(p, y):
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return -(y * np.log(p) + (1 - y) * np.log1p(-p))


def _gap(a, b):
    """Paired mean of a − b and its standard error."""
    d = a - b
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))


def _at_prior(loss, prior):
    gap, se = _gap(loss, prior)
    return not gap < -2 * se


def _learnt(loss, prior, logreg):
    gap, se = _gap(loss, prior)
    return gap <= 0.5 * _gap(logreg, prior)[0] + 2 * se


def _within_laplace(loss, laplace):
    gap, se = _gap(loss, laplace)
    return gap <= 0.02 * laplace.mean() + 2 * se


@pytest.mark.parametrize("name", PROBLEMS)
def test_defaults_are_level_with_an_exact_laplace_classifier(name, client):
    P = load_problem(name, rows=1200)
    sc = StandardScaler().fit(P.X_train)
    Xtr, Xte, y = sc.transform(P.X_train), sc.transform(P.X_test), P.y_test
    prior = _losses(np.full(len(y), P.positive_rate), y)
    logreg = _losses(LogisticRegression(max_iter=5000).fit(Xtr, P.y_train).predict_proba(Xte)[:, 1], y)
    d = Xtr.shape[1]
    kernel = ConstantKernel(1.0, (1e-3, 1e4)) * RBF(np.full(d, np.sqrt(d)), (1e-2, 1e4))

    def fit(method):  # the three fits and the reference at once: they wait on the cluster, not on each other
        if method == "laplace":
            gpc = GaussianProcessClassifier(kernel, random_state=0).fit(Xtr, P.y_train)
            return gpc.predict_proba(Xte)[:, 1]
        est = dg.SparseGPClassifier(method=method).fit(P.X_train, P.y_train, client=client)
        return est.predict_proba(P.X_test)[:, 1]

    with ThreadPoolExecutor(4) as pool:
        probs = dict(zip(("laplace", *METHODS), pool.map(fit, ("laplace", *METHODS)), strict=True))
    laplace = _losses(probs["laplace"], y)
    learnable = not _at_prior(logreg, prior)
    # power: the class prior fails the checks below (the first where logistic regression learns, the second
    # where the Laplace classifier is clearly better than the prior)
    assert (learnable and not _learnt(prior, prior, logreg)) or not _within_laplace(prior, laplace)
    report = {}
    for method in METHODS:
        loss = _losses(probs[method], y)
        report[method] = (loss.mean(), _gap(loss, laplace))
        if learnable:
            assert _learnt(loss, prior, logreg), (name, method, loss.mean(), prior.mean(), logreg.mean())
        if method != "adf":  # ADF, the paper's baseline, underestimates the variance (its section 3)
            assert _within_laplace(loss, laplace), (name, method, report, laplace.mean())
