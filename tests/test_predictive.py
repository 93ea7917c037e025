"""Posterior predictive checks and LOO-PIT (bayesnotes.predictive, nbs/09c_predictive_checks.ipynb).

Exact references: the conjugate normal model with known variance, whose posterior predictive law of the sample mean
is normal and of the maximum a one-dimensional integral, and whose leave-one-out predictive is normal in closed form;
the Poisson-gamma model, whose leave-one-out predictive is negative binomial. Every statistical assert states its
false-alarm probability; seeds come from the `seed` fixture (tests/conftest.py).
"""
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from bayesnotes.workflow import psis

from bayesnotes.predictive import (count_data, loo_pit, negbin_fit, pit_band, pit_uniformity, poisson_fit,
                                   ppc_pvalue, replicate, statistic)


def _normal_posterior(y, sigma, m0, s0):
    "Posterior mean and variance of mu for y_i ~ N(mu, sigma^2), mu ~ N(m0, s0^2)."
    prec = 1 / s0 ** 2 + y.size / sigma ** 2
    return (m0 / s0 ** 2 + y.sum() / sigma ** 2) / prec, 1 / prec


def _normal_replicates(y, sigma, m0, s0, S, rng):
    "Exact posterior draws of mu, replicated data (S, n) and log likelihoods (S, n) of the conjugate normal model."
    m, v = _normal_posterior(y, sigma, m0, s0)
    mu = rng.normal(m, np.sqrt(v), size=S)
    y_rep = replicate(lambda th, g: g.normal(th[:, :1], sigma, size=(th.shape[0], y.size)), mu[:, None], rng=rng)
    return mu, y_rep, stats.norm.logpdf(y, mu[:, None], sigma)


# ------------------------------------------------------------------------------------------------ replicate
def test_replicate_shapes_rng_and_loop(seed):
    sim_all = lambda th, g: g.normal(th[:, :1], 1.0, size=(th.shape[0], 7))
    sim_one = lambda th, g: g.normal(th[0], 1.0, size=7)
    d = np.linspace(-1, 1, 9)[:, None]
    a = replicate(sim_all, d, rng=seed(1))
    assert a.shape == (9, 7) and np.array_equal(a, replicate(sim_all, d, rng=seed(1)))      # an int seed repeats
    assert np.allclose(a, replicate(sim_one, d, vectorised=False, rng=seed(1)))            # same stream, row by row
    assert not np.array_equal(replicate(sim_all, d), replicate(sim_all, d))                 # None: fresh entropy


# ------------------------------------------------------------------------------------- p-values, exact answers
def test_pvalue_of_the_mean_is_exact(seed):
    """T = mean: y_rep-bar ~ N(m_n, v_n + sigma^2 / n) given y, so p_B = 1 - Phi((y-bar - m_n) / sqrt(v_n + sigma^2/n)).
    The estimate is a mean of S = 20000 independent indicators: 5 binomial sd, false alarm 6e-7."""
    y = np.random.default_rng(3).normal(1.0, 1.0, size=20)
    sigma, m0, s0 = 1.0, 0.0, 0.3                       # an informative prior: p_B is far from 1/2
    m, v = _normal_posterior(y, sigma, m0, s0)
    exact = stats.norm.sf((y.mean() - m) / np.sqrt(v + sigma ** 2 / y.size))
    _, y_rep, _ = _normal_replicates(y, sigma, m0, s0, 20000, np.random.default_rng(seed(2)))
    r = ppc_pvalue("mean", y, y_rep)
    assert 0.02 < exact < 0.2
    assert abs(r.pvalue - exact) < 5 * np.sqrt(exact * (1 - exact) / 20000), (r.pvalue, exact)
    assert np.isclose(r.stderr, np.sqrt(r.pvalue * (1 - r.pvalue) / 20000))


def test_pvalue_of_the_maximum_by_quadrature(seed):
    """T = max: P(max y_rep >= t | y) = 1 - int Phi((t - mu) / sigma)^n N(mu | m_n, v_n) dmu, by quadrature.
    5 binomial sd of a mean of 20000 indicators: false alarm 6e-7."""
    y = np.r_[np.random.default_rng(4).normal(0.0, 1.0, size=24), 3.2]
    sigma, m0, s0 = 1.0, 0.0, 10.0
    m, v = _normal_posterior(y, sigma, m0, s0)
    t = y.max()
    inner = lambda mu: stats.norm.cdf((t - mu) / sigma) ** y.size * stats.norm.pdf(mu, m, np.sqrt(v))
    exact = 1 - integrate.quad(inner, m - 12 * np.sqrt(v), m + 12 * np.sqrt(v), epsabs=1e-12)[0]
    _, y_rep, _ = _normal_replicates(y, sigma, m0, s0, 20000, np.random.default_rng(seed(3)))
    r = ppc_pvalue("max", y, y_rep)
    assert 0.005 < exact < 0.2
    assert abs(r.pvalue - exact) < 5 * np.sqrt(exact * (1 - exact) / 20000), (r.pvalue, exact)


def test_ties_mid_upper_and_randomised(seed):
    "Exact identities on a discrete statistic; the randomised p-value averages to the mid-p (mean of 2000 draws: 8 sd)."
    rng = np.random.default_rng(seed(4))
    y = rng.poisson(2.0, size=30).astype(float)
    y_rep = rng.poisson(2.0, size=(500, 30)).astype(float)
    t, tr = statistic("zeros", y), statistic("zeros", y_rep)
    above, equal = np.mean(tr > t), np.mean(tr == t)
    assert equal > 0
    assert np.isclose(ppc_pvalue("zeros", y, y_rep).pvalue, above + equal / 2)
    assert np.isclose(ppc_pvalue("zeros", y, y_rep, ties="upper").pvalue, above + equal)
    rand = [ppc_pvalue("zeros", y, y_rep, ties="randomised", rng=rng).pvalue for _ in range(2000)]
    assert np.all((np.array(rand) >= above) & (np.array(rand) <= above + equal))
    assert abs(np.mean(rand) - (above + equal / 2)) < 8 * equal * np.sqrt(1 / 12 / 2000)
    # a continuous statistic: the three agree
    ys = rng.normal(size=30)
    yrs = rng.normal(size=(300, 30))
    assert len({ppc_pvalue("sd", ys, yrs, ties=k, rng=1).pvalue for k in ("mid", "upper", "randomised")}) == 1


def test_named_statistics():
    y = np.array([[0.0, 3.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    assert statistic("zeros", y).tolist() == [2, 0] and statistic("min", y).tolist() == [0, 2]
    assert np.isclose(statistic("sd", y[0]), np.std(y[0], ddof=1)) and statistic("autocorr", y)[1] == 0.0
    assert np.isclose(statistic("autocorr", np.arange(5.0)), 0.4)    # (-2*-1 + -1*0 + 0*1 + 1*2) / 10
    assert np.allclose(statistic(lambda a: a.sum(-1), y), [4, 8])


# -------------------------------------------------------------------------------------------- LOO-PIT, exact
def _wrong_pits(y_rep, log_lik, h):
    """Two wrong LOO-PITs the exact tests must reject: unweighted draws (the full-posterior PIT, the double use of the
    data) and PSIS weights of the ratios p(y_i | theta) instead of 1 / p(y_i | theta)."""
    return (h.mean(0), (np.exp(psis(log_lik).log_weights) * h).sum(0))


def test_loo_pit_equals_exact_leave_one_out_normal(seed):
    """Against the exact LOO-PIT Phi((y_i - m_-i) / sqrt(sigma^2 + v_-i)) of n refits in closed form. Five points, so that
    leaving one out matters: the exact LOO-PIT minus the full-posterior PIT is [-0.029, -0.034, -0.013, 0.046, 0.034].
    With k-hat below 0.7 the PSIS estimate is a weighted mean of S = 40000 indicators: 6 of its standard errors (false
    alarm 2e-9 per point if normal) plus 0.005 for the PSIS bias. Measured over seeds 0-19: k-hat 0.32-0.49, largest
    error/bound 0.06-0.25. The bound has power: the unweighted PIT gives error/bound 3.1-3.6 and the flipped weights
    6.6-7.4 (a deterministic gap of at least 0.03 beyond the bound, against a Monte Carlo sd of about 0.003), so the
    asserts that they fail have a false-alarm probability far below 1e-9."""
    y = np.array([-1.2, 0.1, 0.4, 1.3, 2.2])
    sigma, m0, s0 = 1.0, 0.0, 10.0
    _, y_rep, ll = _normal_replicates(y, sigma, m0, s0, 40000, np.random.default_rng(seed(5)))
    r = loo_pit(y, y_rep, ll)
    prec = 1 / s0 ** 2 + (y.size - 1) / sigma ** 2
    m_loo = (m0 / s0 ** 2 + (y.sum() - y) / sigma ** 2) / prec
    exact = stats.norm.cdf(y, m_loo, np.sqrt(sigma ** 2 + 1 / prec))
    assert not r.randomised and np.all(r.khat < 0.7)
    bound = 6 * r.stderr + 0.005
    err = np.abs(r.pit - exact)
    assert np.all(err < bound), (err.max(), r.stderr[err.argmax()])
    for wrong in _wrong_pits(y_rep, ll, (y_rep <= y).astype(float)):
        assert np.any(np.abs(wrong - exact) > bound), np.abs(wrong - exact).max()


def test_loo_pit_equals_exact_leave_one_out_poisson(seed):
    """Counts: the randomised LOO-PIT of the Poisson-gamma model (a = 1, b = 0.1) of y = [1, 2, 3, 5, 8] against its exact
    negative binomial LOO predictive, F(y_i - 1) + V_i f(y_i), with the same V_i (loo_pit draws them first from its
    rng). Bound as above: 6 standard errors + 0.005 per point, S = 40000. Measured over seeds 0-19: k-hat 0.36-0.66
    (asserted below the threshold 0.78 for S = 40000), error/bound 0.04-0.26; unweighted PIT 3.2-4.5, flipped weights
    6.8-9.8 times the bound (a deterministic gap, as above: the asserts that they fail practically never false-alarm)."""
    y = np.array([1.0, 2.0, 3.0, 5.0, 8.0])
    a, b = 1.0, 0.1
    fit = poisson_fit(y, a, b, 40000, rng=seed(6))
    r = loo_pit(y, fit.y_rep, fit.log_lik, rng=seed(7))
    V = np.random.default_rng(seed(7)).uniform(size=y.size)
    sh, pr = a + y.sum() - y, (b + y.size - 1) / (b + y.size)
    exact = stats.nbinom.cdf(y - 1, sh, pr) + V * stats.nbinom.pmf(y, sh, pr)
    assert r.randomised and np.all(r.khat < r.threshold)
    bound = 6 * r.stderr + 0.005
    err = np.abs(r.pit - exact)
    assert np.all(err < bound), (err.max(), r.stderr[err.argmax()])
    h = (fit.y_rep < y) + V * (fit.y_rep == y)
    for wrong in _wrong_pits(fit.y_rep, fit.log_lik, h):
        assert np.any(np.abs(wrong - exact) > bound), np.abs(wrong - exact).max()


def test_loo_pit_warns_above_the_khat_threshold_and_scales_stderr_by_reff():
    "21 draws of a Poisson fit put some k-hat above the threshold 0.24; a constant log_lik gives k-hat inf. Both warn."
    y = np.array([1.0, 2.0, 3.0, 4.0])
    fit = poisson_fit(y, n_draws=21, rng=0)
    with pytest.warns(UserWarning, match="k-hat above"):
        r = loo_pit(y, fit.y_rep, fit.log_lik, rng=0)
    assert np.any(r.khat > r.threshold)
    with pytest.warns(UserWarning, match=r"indices 0, 1, 2"):
        loo_pit(np.zeros(3), np.zeros((30, 3)), np.zeros((30, 3)), rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # warn=False: silent
        loo_pit(y, fit.y_rep, fit.log_lik, rng=0, warn=False)
    g = np.random.default_rng(1)
    yc, yrc = g.normal(size=4), g.normal(size=(2000, 4))
    ll = -0.5 * (yrc - yc) ** 2 * 0.1
    r1, r4 = loo_pit(yc, yrc, ll), loo_pit(yc, yrc, ll, reff=0.25)
    assert np.allclose(r1.pit, r4.pit, atol=0.02) and np.allclose(r4.stderr, 2 * np.sqrt(
        (np.exp(psis(-ll, 0.25).log_weights) ** 2 * ((yrc <= yc) - r4.pit) ** 2).sum(0)))


# ---------------------------------------------------------------------------------- uniformity and its power
def _normal_prior_predictive_pit(rng, n=100, S=2000):
    "LOO-PIT of the conjugate normal model on data drawn from its own prior predictive (a correct model)."
    mu0 = rng.normal(0.0, 2.0)
    y = rng.normal(mu0, 1.0, size=n)
    _, y_rep, ll = _normal_replicates(y, 1.0, 0.0, 2.0, S, rng)
    return loo_pit(y, y_rep, ll).pit


def test_loo_pit_uniform_under_the_correct_model(seed):
    """One data set of 100 from the model's prior predictive: uniformity p-value > 0.001. For independent uniform
    values the false alarm is 0.001 (the p-value's law). LOO-PIT values of one data set are negatively dependent, which
    makes the test conservative: the 95% band was left by 3 of 1000 such data sets (measured), so the false alarm
    here is below 0.001."""
    rng = np.random.default_rng(seed(8))
    u = pit_uniformity(_normal_prior_predictive_pit(rng), rng=rng)
    assert u.pvalue > 0.001, u.pvalue


def test_loo_pit_rejects_a_poisson_model_of_overdispersed_counts(seed):
    """Negative binomial data (mean 3, shape 1.5, n = 200) fitted by a Poisson: uniformity p-value < 0.01. Measured:
    300 of 300 such data sets rejected, every one at the smallest p-value 1/4001, so the miss probability is below
    0.01 with 95% confidence (and likely far below: at n = 80 the power at 0.01 was already 0.97)."""
    rng = np.random.default_rng(seed(9))
    y = count_data(200, rng=rng)
    fit = poisson_fit(y, rng=rng)
    u = pit_uniformity(loo_pit(y, fit.y_rep, fit.log_lik, rng=rng).pit, rng=rng)
    assert u.pvalue < 0.01 and not u.inside, u.pvalue


def test_pit_band_has_its_simultaneous_level(seed):
    """400 samples of 80 uniform values against one band of level 0.95. gamma is the 100th smallest of 2000 simulated
    statistics, so the band's true exit rate p is random, about Beta(100, 1901): sd 0.005, 0.038-0.063 with
    probability 0.99 (30 bands measured on 20000 uniform samples each: 0.036-0.058). Given p, exits ~ Bin(400, p);
    averaged over the law of p, 4 <= exits <= 42 fails with probability 3e-5."""
    rng = np.random.default_rng(seed(10))
    band = pit_band(80, 0.95, rng=rng)
    exits = sum(not pit_uniformity(u, band=band).inside for u in rng.uniform(size=(400, 80)))
    assert 4 <= exits <= 42, exits
    # the band is consistent with the p-value: inside exactly when the p-value exceeds 1 - level (up to ties)
    for u in rng.uniform(size=(50, 80)) ** 1.3:
        r = pit_uniformity(u, band=band)
        assert r.inside == (r.pvalue > 0.05) or abs(r.pvalue - 0.05) < 0.01


@pytest.mark.slow
def test_loo_pit_false_alarm_rate_and_power(seed):
    """Rejection rates of the 95% band. Correct model: 100 prior-predictive data sets of the normal model; if the
    LOO-PIT values behaved like independent uniforms the count would be Bin(100, 0.05), and P(count > 14) = 2e-4
    (measured rate 0.003 over 1000 data sets: the test is conservative). Misspecified: 40 negative binomial data sets
    of 80 counts fitted by a Poisson; measured power at level 0.95 is 0.997 (299 of 300), at 0.99 0.94-0.97; at least
    36 of 40 at level 0.95 fails with probability 7e-6 if the power is 0.99."""
    rng = np.random.default_rng(seed(11))
    band = pit_band(100, 0.95, rng=rng)
    false_alarms = sum(not pit_uniformity(_normal_prior_predictive_pit(rng), band=band).inside for _ in range(100))
    assert false_alarms <= 14, false_alarms
    band80 = pit_band(80, 0.95, rng=rng)
    hits = 0
    for _ in range(40):
        y = count_data(rng=rng)
        fit = poisson_fit(y, n_draws=2000, rng=rng)
        hits += not pit_uniformity(loo_pit(y, fit.y_rep, fit.log_lik, rng=rng).pit, band=band80).inside
    assert hits >= 36, hits


def test_negbin_fit_recovers_the_generating_law(seed):
    """The grid posterior of one fixed data set of 400 negative binomial counts (count_data(400, rng=7), not moved by the
    seed) covers the true (mu, r) = (3, 1.5): its posterior mean is within 4 posterior sd of the truth. This is an
    assert on that one data set's posterior, not a coverage rate over data sets; the seed moves only the 4000 draws,
    whose mean has Monte Carlo sd of about sd / sqrt(4000) = 0.016 sd, negligible against the 4-sd margin."""
    y = count_data(400, rng=7)
    fit = negbin_fit(y, n_draws=4000, rng=seed(12))
    m, s = fit.draws.mean(0), fit.draws.std(0)
    assert np.all(np.abs(m - np.log([3.0, 1.5])) < 4 * s), (m, s)
    assert fit.y_rep.shape == (4000, 400) and fit.log_lik.shape == (4000, 400)


# ------------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, match", [
    (lambda: replicate("not a function", np.zeros((3, 1))), "simulate"),
    (lambda: replicate(lambda th, g: np.zeros((2, 4)), np.zeros((3, 1))), "one data set per draw"),
    (lambda: replicate(lambda th, g: th, np.zeros((2, 2, 2))), "draws"),
    (lambda: ppc_pvalue("median", np.zeros(3), np.zeros((5, 3))), "T must be one of"),
    (lambda: ppc_pvalue(3, np.zeros(3), np.zeros((5, 3))), "T must be"),
    (lambda: ppc_pvalue("mean", np.zeros((2, 3)), np.zeros((5, 3))), "y must be"),
    (lambda: ppc_pvalue("mean", np.zeros(3), np.zeros((5, 4))), "y_rep"),
    (lambda: ppc_pvalue("mean", np.zeros(3), np.full((5, 3), np.nan)), "y_rep"),
    (lambda: ppc_pvalue("mean", np.zeros(3), np.zeros((5, 3)), ties="lower"), "ties"),
    (lambda: ppc_pvalue("sd", np.array([1.0]), np.ones((10, 1))), "T = sd is not finite"),
    (lambda: ppc_pvalue(lambda a: np.log(a.min(-1)), np.zeros(3), np.ones((5, 3))), "is not finite"),
    (lambda: loo_pit(np.zeros(3), np.zeros((30, 3)), np.zeros((30, 2))), "log_lik"),
    (lambda: loo_pit(np.zeros(3), np.zeros((30, 4)), np.zeros((30, 4))), "y_rep"),
    (lambda: loo_pit(np.zeros(3), np.zeros(30), np.zeros(30)), "y_rep"),
    (lambda: loo_pit([np.inf, 0, 0], np.zeros((30, 3)), np.zeros((30, 3))), "y must be finite"),
    (lambda: pit_band(0), "n must be"),
    (lambda: pit_band(50, level=1.5), "level"),
    (lambda: pit_band(50, n_sim=10), "n_sim"),
    (lambda: pit_uniformity([0.2, 1.3]), "pit"),
    (lambda: pit_uniformity(np.full(30, 0.5), band=pit_band(40, rng=0)), "band"),
    (lambda: poisson_fit([1.0, -2.0, 3.0]), "y must be"),
    (lambda: poisson_fit([1.0, 2.5, 3.0]), "y must be"),
    (lambda: poisson_fit([1.0, 2.0], b=0.0), "b must be"),
    (lambda: negbin_fit([1.0, 2.0, 3.0], n_grid=3), "n_grid"),
    (lambda: count_data(shape=-1.0), "shape"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
