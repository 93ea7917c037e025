"""bayesnotes.workflow against ArviZ (issue 33): PSIS log weights and k-hat equal `arviz.psislw` to 1e-8 on several
weight vectors and matrices, heavy-tailed ones included; elpd_loo, its se and p_loo (and the pointwise values) equal
`arviz.loo`, and WAIC equals `arviz.waic`. ArviZ is a test-only dependency (the optional extra that `make test-arviz`
installs): these tests are skipped where it is missing, like the comparisons of tests/test_arviz.py."""
import warnings

import numpy as np
import pytest
from scipy import stats

from bayesnotes.workflow import loo, psis, waic

TOL = 1e-8


@pytest.fixture(scope="module")
def az():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                     # ArviZ 0.2x announces its 1.0 refactor on import
        return pytest.importorskip("arviz")


def _weight_vectors(rng):
    "Log weight vectors from light to very heavy tails, short and long, with ties and zero weights."
    x = rng.normal(0, 0.5, 3000)
    t = rng.standard_t(3, 2000)
    w = {
        "normal": rng.normal(size=1000),
        "pareto k=0.3": np.log(stats.genpareto.rvs(0.3, size=4000, random_state=rng)),
        "pareto k=0.8": np.log(stats.genpareto.rvs(0.8, size=4000, random_state=rng)),
        "pareto k=1.5": np.log(stats.genpareto.rvs(1.5, size=500, random_state=rng)),
        "narrow normal proposal": stats.norm.logpdf(x) - stats.norm.logpdf(x, 0, 0.5),
        "cauchy target, t3 proposal": stats.cauchy.logpdf(t) - stats.t.logpdf(t, 3),
        "short (S=30)": rng.normal(size=30),
        "light tail (bounded)": np.log(rng.random(2000)),
        "zero weights": np.r_[np.full(50, -np.inf), rng.normal(size=950)],
        "rounded (ties)": np.round(rng.normal(size=1000), 1),
    }
    return w


@pytest.mark.parametrize("reff", [1.0, 0.4])
def test_psis_equals_arviz_psislw(az, reff, seed):
    rng = np.random.default_rng(seed(1))
    worst_w, worst_k = 0.0, 0.0
    for name, lw in _weight_vectors(rng).items():
        r = psis(lw, reff=reff)
        a_lw, a_k = az.psislw(lw.copy(), reff=reff)
        fin = np.isfinite(a_lw)
        assert np.array_equal(fin, np.isfinite(r.log_weights)), name
        if "ties" in name:      # tied weights in the tail get the smoothed values in an arbitrary order: compare the values
            r_lw, a_lw = np.sort(r.log_weights), np.sort(a_lw)
            r = r._replace(log_weights=r_lw)
            fin = np.isfinite(a_lw)
        worst_w = max(worst_w, np.abs(r.log_weights[fin] - a_lw[fin]).max())
        assert np.isclose(r.khat, a_k, rtol=0, atol=TOL) or (np.isinf(r.khat) and np.isinf(a_k)), (name, r.khat, a_k)
        if np.isfinite(a_k):
            worst_k = max(worst_k, abs(float(r.khat) - float(a_k)))
        assert np.abs(r.log_weights[fin] - a_lw[fin]).max() < TOL, name
    print(f"reff {reff}: largest difference from arviz.psislw: log weights {worst_w:.1e}, k-hat {worst_k:.1e}")


def test_psis_matrix_equals_arviz_column_by_column(az, seed):
    "A (draw, observation) matrix: ArviZ takes observations first and draws last, so its input is the transpose."
    rng = np.random.default_rng(seed(2))
    lw = rng.standard_t(2, size=(4000, 50)) * rng.uniform(0.2, 3, 50)
    r = psis(lw)
    a_lw, a_k = az.psislw(lw.T.copy())
    assert np.abs(r.log_weights - a_lw.T).max() < TOL
    assert np.allclose(r.khat, a_k, rtol=0, atol=TOL)        # equal infinities (a tail too short to fit) count as equal


def _idata(az, ll):
    return az.from_dict(posterior={"mu": np.zeros(ll.shape[:2])}, log_likelihood={"y": ll})


@pytest.mark.parametrize("case", ["normal", "outlier", "student"])
def test_loo_and_waic_equal_arviz(az, case, seed):
    """elpd_loo, se, p_loo, the pointwise elpd and k-hat equal arviz.loo (reff = 1 given to both: independent draws),
    and elpd_waic, se and p_waic equal arviz.waic, on (chain, draw, observation) log likelihoods."""
    rng = np.random.default_rng(seed(3))
    y = rng.normal(size=25)
    if case == "outlier":
        y[-1] = 8.0
    mu = rng.normal(y.mean(), 1 / np.sqrt(25), size=(4, 1000))
    ll = (stats.t.logpdf(y, 4, mu[..., None]) if case == "student" else stats.norm.logpdf(y, mu[..., None]))
    idata = _idata(az, ll)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = az.loo(idata, pointwise=True, reff=1.0)
        w = az.waic(idata, pointwise=True)
        m, mw = loo(ll, warn=False), waic(ll, warn=False)
    for mine, theirs in ((m.elpd_loo, a["elpd_loo"]), (m.se, a["se"]), (m.p_loo, a["p_loo"]),
                         (mw.elpd_waic, w["elpd_waic"]), (mw.se, w["se"]), (mw.p_waic, w["p_waic"])):
        assert abs(mine - float(theirs)) < TOL * max(1.0, abs(float(theirs))), (case, mine, float(theirs))
    assert np.abs(m.elpd_i - a["loo_i"].values).max() < TOL and np.abs(m.khat - a["pareto_k"].values).max() < TOL
    assert np.abs(mw.elpd_i - w["waic_i"].values).max() < TOL
    assert m.threshold == pytest.approx(a["good_k"]) and (m.n_bad > 0) == bool(a["warning"])


def test_loo_equals_arviz_default_only_given_arvizs_reff(az, seed):
    """`arviz.loo` on (chain, draw, n) estimates reff from the ESS of the posterior by default (the mean over its
    variables of ESS / S); `loo` takes reff = 1 unless told (as R's loo >= 2.7). On autocorrelated chains the two
    defaults differ (a longer tail is fitted with reff < 1), and the numbers agree once `loo` gets ArviZ's reff."""
    rng = np.random.default_rng(seed(4))
    mu = np.zeros((4, 1000))
    for t in range(1, 1000):                                   # AR(1) chains with coefficient 0.9: ESS / S about 0.05
        mu[:, t] = 0.9 * mu[:, t - 1] + np.sqrt(1 - 0.81) * rng.normal(size=4)
    y = np.r_[rng.normal(size=9), 3.0]
    ll = stats.norm.logpdf(y, mu[..., None], 1.0)
    idata = az.from_dict(posterior={"mu": mu}, log_likelihood={"y": ll})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = az.loo(idata, pointwise=True)
        reff = float(az.ess(idata.posterior, method="mean")["mu"]) / mu.size
        m1, m = loo(ll, warn=False), loo(ll, reff, warn=False)
    assert reff < 0.3
    assert np.abs(m.elpd_i - a["loo_i"].values).max() < TOL and np.abs(m.khat - a["pareto_k"].values).max() < TOL
    assert np.abs(m1.khat - a["pareto_k"].values).max() > 1e-4      # the defaults differ: the tails are of other lengths
