"""Checks of bayesnotes.decision that must hold across refactors: exact Bayes actions, closed-form thresholds and
risks, properness of scoring rules, the finite-sample conformal guarantee, exact A/B-test losses, and a clear
ValueError for bad input. Statistical checks take their seeds from the `seed` fixture; every tolerance is a stated
multiple of a Monte Carlo standard error (with its false-alarm probability), an exact law, or a discretisation bound."""
import math
import warnings

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from matplotlib.figure import Figure
from bayesnotes import decision
from bayesnotes.plotting import figure_functions
from bayesnotes.decision import (REJECT, ab_test_expected_loss, ab_test_study, accuracy_vs_confidence,
                                 ambulance_routes, bayes_action, bayes_estimator, brier_score, calibration_curve,
                                 classify_with_reject, conformal_bayes_regression, conformal_quantile,
                                 conformal_quantile_regression, credible_interval, digits_logits, evpi,
                                 expected_calibration_error, expected_loss, frequentist_risk, histogram_binning,
                                 interval_score, isotonic_calibration, platt_scale,
                                 james_stein, james_stein_risk, joint_predictive, log_score, logistic_map,
                                 marginal_calibration_error, moderated_predictive, pinball_loss, prob_beta_greater,
                                 quantile_regression, reject_thresholds, separable_data, sequential_ab_test, softmax,
                                 split_conformal_classification, split_conformal_regression, stopping_rule_pvalues,
                                 temperature_scale, weighted_quantile)


# ---------------------------------------------------------------- Bayes actions and estimators
def test_bayes_estimators_match_known_mean_median_mode(seed):
    g = stats.gamma(3.0)
    n = 100_000
    x = g.rvs(size=n, random_state=np.random.default_rng(seed(0)))
    # tolerances: 4.9 Monte Carlo SEs of the sample mean (sd/sqrt n) and median (1 / (2 f(m) sqrt n))
    assert abs(bayes_estimator(x, "squared") - 3.0) < 4.9 * g.std() / np.sqrt(n)   # CLT: 4.9 se, false alarm 1e-6
    assert abs(bayes_estimator(x, "absolute") - g.median()) < 4.9 / (2 * g.pdf(g.median()) * np.sqrt(n))   # CLT: 1e-6
    q = 0.9
    assert abs(bayes_estimator(x, "pinball", level=q) - g.ppf(q)) < 4.9 * np.sqrt(q * (1 - q) / n) / g.pdf(g.ppf(q))   # CLT: 4.9 se, false alarm 1e-6
    # 0-1 loss with window eps: exact Bayes action solves f(a - eps) = f(a + eps); evenly spaced quantiles
    # remove sampling noise, leaving a discretisation error (flat maximum of the window mass) well below 0.03
    eps = 0.5
    grid = g.ppf((np.arange(n) + 0.5) / n)
    exact = optimize.brentq(lambda a: g.pdf(a - eps) - g.pdf(a + eps), eps + 1e-9, 10.0)
    assert abs(bayes_estimator(grid, "zero_one", eps=eps) - exact) < 0.03
    # small eps on a symmetric unimodal law: the mode 0 of N(0, 1) (window bias O(eps^2) is zero by symmetry)
    z = stats.norm.ppf((np.arange(n) + 0.5) / n)
    assert abs(bayes_estimator(z, "zero_one", eps=0.3)) < 0.03
    # discrete draws: the most frequent value (Poisson(3.5) mode is 3; P(3) - P(4) is 13 SEs at this n)
    assert bayes_estimator(np.random.default_rng(seed(1)).poisson(3.5, n), "zero_one") == 3


def test_bayes_estimators_multivariate_and_weighted(seed):
    rng = np.random.default_rng(seed(2))
    X = rng.normal([1.0, -2.0], [1.0, 3.0], size=(50_000, 2))
    assert np.allclose(bayes_estimator(X, "squared"), X.mean(0))
    assert np.allclose(bayes_estimator(X, "absolute"), np.sort(X, 0)[len(X) // 2 - 1])   # lower median
    # self-normalised importance sampling: draws from N(0, 2^2), target N(1, 1)
    d = rng.normal(0, 2, 200_000)
    logw = stats.norm.logpdf(d, 1, 1) - stats.norm.logpdf(d, 0, 2)
    w = np.exp(logw - logw.max())
    ess = w.sum() ** 2 / np.sum(w ** 2)
    # SNIS errors: sd/sqrt(ESS) for the mean, 1/(2 f(median) sqrt(ESS)) for the median (f = N(0,1) density at 0)
    assert abs(bayes_estimator(d, "squared", weights=w) - 1) < 4.9 / np.sqrt(ess)   # CLT: 4.9 se, false alarm 1e-6
    assert abs(bayes_estimator(d, "absolute", weights=w) - 1) < 4.9 * np.sqrt(2 * np.pi) / 2 / np.sqrt(ess)   # CLT: 4.9 se, false alarm 1e-6
    # integer weights = repeated draws
    v = np.array([3.0, 1.0, 2.0])
    assert weighted_quantile(v, 0.5, [1, 1, 5]) == weighted_quantile(np.array([3.0, 1, 2, 2, 2, 2, 2]), 0.5)


def test_expected_loss_identities_and_bayes_action(seed):
    x = np.random.default_rng(seed(3)).gamma(2.0, size=5000)
    acts = np.array([0.5, 1.0, 2.0, 3.0])
    # on the empirical distribution, E(theta - a)^2 = Var + (mean - a)^2 exactly
    assert np.allclose(expected_loss(x, acts, "squared"), x.var() + (x.mean() - acts) ** 2)
    assert np.allclose(expected_loss(x, acts, "absolute"), [np.mean(np.abs(x - a)) for a in acts])
    assert np.allclose(expected_loss(x, acts, lambda a, s: (a - s) ** 2), expected_loss(x, acts, "squared"))
    assert bayes_action(x, acts, "squared").action == 2.0
    # cost-matrix mode: rho = p @ C^T, rows of probabilities give one decision each
    C = np.array([[0.0, 10.0], [1.0, 0.0]])
    P = np.array([[0.95, 0.05], [0.5, 0.5]])
    assert np.allclose(expected_loss(P, loss=C), P @ C.T)
    assert list(bayes_action(P, ["no", "yes"], C).action) == ["no", "yes"]
    # 2-d states with a callable that reduces over the last axis
    S = np.random.default_rng(seed(4)).normal(size=(1000, 2))
    A = np.array([[0.0, 0.0], [1.0, 1.0]])
    rho = expected_loss(S, A, lambda a, s: np.sum((a - s) ** 2, -1))
    assert np.allclose(rho, [np.mean(np.sum((S - a) ** 2, 1)) for a in A])


def test_credible_intervals(seed):
    post = stats.beta(3, 12)
    n = 100_000
    d = post.rvs(size=n, random_state=np.random.default_rng(seed(5)))
    se_q = lambda q: np.sqrt(q * (1 - q) / n) / post.pdf(post.ppf(q))    # MC SE of a sample quantile
    lo, hi = credible_interval(d, 0.1)
    assert abs(lo - post.ppf(0.05)) < 4.9 * se_q(0.05) and abs(hi - post.ppf(0.95)) < 4.9 * se_q(0.95)   # CLT: 4.9 se, false alarm 1e-6
    # HPD = shortest interval with 90% of the draws: brute force over all index pairs on a small sample
    small = np.sort(d[:300])
    m = math.ceil(0.9 * len(small))
    widths = small[m - 1:] - small[:len(small) - m + 1]
    l, u = credible_interval(small, 0.1, "hpd")
    assert np.isclose(u - l, widths.min())
    # and close to the exact HPD (equal density at both ends). The ends are quantiles at an estimated level, so
    # noisier than a plain quantile (cube-root rate): over 200 replications at this n their sd was ~0.0016 and the
    # largest deviation 0.0042, so 0.01 is ~6 sd (the errors have lighter tails than a Gaussian: excess kurtosis < 0)
    l_ex = optimize.brentq(lambda t: post.pdf(post.ppf(post.cdf(t) + 0.9)) - post.pdf(t), 1e-6, post.ppf(0.0999))
    l, u = credible_interval(d, 0.1, "hpd")
    assert abs(l - l_ex) < 0.01 and abs(u - post.ppf(post.cdf(l_ex) + 0.9)) < 0.01


def test_interval_score_bayes_action_is_central_interval(seed):
    mu, s, alpha = 1.0, 2.0, 0.2
    def expected(lu):           # exact E S_alpha under N(mu, s^2), via E(l - X)_+ = (l - mu) Phi(z) + s phi(z)
        l, u = lu
        zl, zu = (l - mu) / s, (u - mu) / s
        below = (l - mu) * stats.norm.cdf(zl) + s * stats.norm.pdf(zl)
        above = (mu - u) * stats.norm.sf(zu) + s * stats.norm.pdf(zu)
        return (u - l) + 2 / alpha * (below + above)
    best = optimize.minimize(expected, [0.0, 2.0], method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-12})
    assert np.allclose(best.x, stats.norm.ppf([alpha / 2, 1 - alpha / 2], mu, s), atol=1e-4)
    # the empirical version agrees with the closed form on a sample
    x = np.random.default_rng(seed(6)).normal(mu, s, 200_000)
    assert abs(interval_score(-1.0, 3.0, x, alpha).mean() - expected([-1.0, 3.0])) < \
        4.9 * interval_score(-1.0, 3.0, x, alpha).std() / np.sqrt(len(x))   # CLT: 4.9 se, false alarm 1e-6


# ---------------------------------------------------------------- classification, reject, value of information
@pytest.mark.parametrize("c_fn,c_fp,lam", [(5.0, 1.0, 0.5), (1.0, 1.0, 0.2), (2.0, 3.0, 2.0), (1.0, 4.0, 0.0)])
def test_reject_rule_matches_closed_form_thresholds(c_fn, c_fp, lam):
    lo, hi = reject_thresholds(c_fn, c_fp, lam)
    if lam >= c_fn * c_fp / (c_fn + c_fp):
        assert lo == hi == pytest.approx(c_fp / (c_fp + c_fn))       # abstaining never pays
    else:
        assert (lo, hi) == pytest.approx((lam / c_fn, 1 - lam / c_fp))
    p = np.linspace(0, 1, 200_001)
    res = classify_with_reject(np.column_stack([1 - p, p]), [[0, c_fn], [c_fp, 0]], lam)
    want = np.where(p < lo, 0, np.where(p > hi, 1, REJECT))
    away = (np.abs(p - lo) > 1e-9) & (np.abs(p - hi) > 1e-9)
    assert np.array_equal(res.labels[away], want[away])
    assert np.allclose(res.expected_loss, np.minimum.reduce([c_fn * p, c_fp * (1 - p), np.full_like(p, lam)]))


def test_multiclass_reject_and_costs(seed):
    P = np.random.default_rng(seed(7)).dirichlet(np.ones(4), size=2000)
    res = classify_with_reject(P, reject_cost=0.35)
    assert np.array_equal(res.rejected, P.max(1) < 0.65)
    assert np.array_equal(res.labels[~res.rejected], P.argmax(1)[~res.rejected])
    assert np.array_equal(classify_with_reject(P).labels, P.argmax(1))
    C = np.ones((4, 4)) - np.eye(4)
    C[:, 3] *= 10                                                   # missing class 3 is ten times worse
    lab = classify_with_reject(P, C).labels
    assert np.array_equal(lab, np.argmin(P @ C.T, 1)) and np.mean(lab == 3) > np.mean(P.argmax(1) == 3)


def test_evpi_closed_form_and_properties(seed):
    mu, sigma, c = 15.0, 4.0, 17.0
    T = np.random.default_rng(seed(8)).normal(mu, sigma, 400_000)
    U = np.column_stack([-T, np.full_like(T, -c)])
    z = (c - mu) / sigma
    exact = sigma * stats.norm.pdf(z) - (c - mu) * stats.norm.sf(z)          # E[(T - c)_+]
    gain = U.max(1) - U[:, 0]                                               # EVPI is the mean of this
    assert abs(evpi(U) - exact) < 4.9 * gain.std() / np.sqrt(len(T))   # CLT: 4.9 se, false alarm 1e-6
    assert evpi([[3.0, 1.0], [2.0, 0.0]]) == 0.0                            # a dominant action: worthless info
    assert evpi([[1.0, 0.0], [0.0, 1.0]], [0.25, 0.75]) == pytest.approx(0.25)
    r = ambulance_routes()
    assert r["A"].mean() == pytest.approx(15) and r["A"].std() == pytest.approx(4) and r["B"].cdf(20) == 1


# ---------------------------------------------------------------- risk, James-Stein, minimax
def _sim_normal(d, s2):
    return lambda th, n, rng: th + np.sqrt(s2) * rng.standard_normal((n, d))


def test_james_stein_risk_below_mle_by_known_amount_d10(seed):
    d, s2 = 10, 1.0
    rng = np.random.default_rng(seed(9))
    X = _sim_normal(d, s2)(np.zeros(d), 20_000, rng)
    # paired: per data set, loss(MLE) - loss(JS); at theta = 0 the mean saving is (d - 2) sigma^2 = 8
    saving = np.sum(X ** 2, 1) - np.sum(james_stein(X, s2) ** 2, 1)
    assert abs(saving.mean() - (d - 2) * s2) < 4.9 * saving.std() / np.sqrt(len(saving))   # CLT: 4.9 se, false alarm 1e-6
    assert james_stein_risk(0.0, d, s2) == pytest.approx(2.0)
    for t2 in (1.0, 9.0, 49.0):
        th = np.full(d, np.sqrt(t2 / d))
        est = frequentist_risk(lambda Y: james_stein(Y, s2), _sim_normal(d, s2), th, 20_000, rng=seed(10))
        assert abs(est.risk - james_stein_risk(t2, d, s2)) < 5.3 * est.stderr   # false alarm <= 1e-6: 5.3 se covers up to 10 comparisons
        assert james_stein_risk(t2, d, s2) < d * s2
    # the positive-part version has smaller risk (not pointwise smaller loss): paired comparison near theta = 0
    th = np.full(d, np.sqrt(1.0 / d))
    Y = _sim_normal(d, s2)(th, 20_000, np.random.default_rng(seed(11)))
    diff = np.sum((james_stein(Y, s2) - th) ** 2, 1) - np.sum((james_stein(Y, s2, True) - th) ** 2, 1)
    assert diff.mean() > 4 * diff.std() / np.sqrt(len(diff))


def test_james_stein_exact_risk_matches_quadrature():
    for d, s2, t2 in ((3, 1.0, 0.5), (10, 2.0, 30.0), (25, 0.5, 200.0)):
        lam = t2 / s2
        top = d + lam + 40 * np.sqrt(2 * (d + 2 * lam))                 # 40 sd above the mean: no mass left
        e_inv = integrate.quad(lambda v: stats.ncx2.pdf(v, d, lam) / v, 0, top, points=[d + lam], limit=200)[0]
        assert james_stein_risk(t2, d, s2) == pytest.approx(d * s2 - (d - 2) ** 2 * s2 * e_inv, rel=1e-6)


def test_binomial_minimax_estimator_has_constant_risk(seed):
    n = 20
    a = np.sqrt(n) / 2
    est = lambda x: (x + a) / (n + 2 * a)
    sim = lambda th, m, rng: rng.binomial(n, th, size=m).astype(float)
    target = 1 / (4 * (1 + np.sqrt(n)) ** 2)
    for th in (0.05, 0.3, 0.5, 0.9):
        r = frequentist_risk(est, sim, th, 50_000, rng=seed(12))
        assert abs(r.risk - target) < 5.3 * r.stderr   # false alarm <= 1e-6: 5.3 se covers up to 10 comparisons


# ---------------------------------------------------------------- foundations
def test_stopping_rule_same_posterior_different_pvalues():
    pv = stopping_rule_pvalues(9, 3)
    assert pv.binomial == pytest.approx(299 / 4096, abs=1e-15)              # P(Bin(12, 1/2) >= 9)
    assert pv.negative_binomial == pytest.approx(67 / 2048, abs=1e-15)      # P(Bin(11, 1/2) <= 2 tails)
    th = np.linspace(0.01, 0.99, 50)
    r = stats.binom.logpmf(9, 12, th) - stats.nbinom.logpmf(9, 3, 1 - th)
    assert np.allclose(r, r[0])


def test_joint_predictive_coin_agents():
    a1 = dict(thetas=[2 / 3])
    a2 = dict(thetas=[0.0, 1.0], weights=[1 / 3, 2 / 3])
    for a in (a1, a2):
        assert joint_predictive([0], **a) == pytest.approx(1 / 3)
    assert joint_predictive([1, 1], **a1) == pytest.approx(4 / 9)
    assert joint_predictive([1, 1], **a2) == pytest.approx(2 / 3)
    tau = 5
    assert joint_predictive(np.zeros(tau), **a1) == pytest.approx(3.0 ** -tau)
    assert joint_predictive(np.zeros(tau), **a2) == pytest.approx(1 / 3)


def test_logistic_map_prior_variance_limits():
    X, y = separable_data()
    norms = [np.linalg.norm(logistic_map(X, y, s2)) for s2 in (1e-4, 1.0, 1e2, 1e4)]
    assert np.all(np.diff(norms) > 0) and norms[0] < 0.01
    w = logistic_map(X, y, 1.0)
    grad = X.T @ (y - special.expit(X @ w)) - w / 1.0                      # stationarity of the log posterior
    assert np.max(np.abs(grad)) < 1e-5


def test_moderated_predictive_close_to_monte_carlo(seed):
    rng = np.random.default_rng(seed(13))
    mean, cov = np.array([1.0, -0.5]), np.array([[2.0, 0.3], [0.3, 0.5]])
    Xn = rng.normal(size=(20, 2)) * 2
    W = rng.multivariate_normal(mean, cov, size=200_000)
    mc = special.expit(Xn @ W.T)
    # the probit approximation is accurate to about 0.02 here; add 5.3 MC SEs
    err = np.abs(moderated_predictive(Xn, mean, cov) - mc.mean(1))
    assert np.all(err < 0.02 + 5.3 * mc.std(1) / np.sqrt(W.shape[0]))   # false alarm <= 1e-6: 5.3 se covers up to 10 comparisons


def test_moderated_predictive_along_rays_without_intercept():
    "No intercept: along x = c u the moderated logit c m_u / sqrt(1 + pi c^2 v_u / 8) rises to m_u / sqrt(pi v_u / 8)."
    X, y = separable_data()
    from bayesnotes.decision import _laplace_logistic
    w, S = _laplace_logistic(X, y, 100.0)
    # the Laplace fit (the VI chapter's `laplace`) is centred at the MAP, with covariance the inverse Hessian
    p = special.expit(X @ w)
    H = (X * (p * (1 - p))[:, None]).T @ X + np.eye(2) / 100.0
    assert np.allclose(w, logistic_map(X, y, 100.0), atol=1e-4) and np.allclose(S @ H, np.eye(2), atol=1e-6)
    c = np.geomspace(0.1, 1e4, 30)
    for ang in np.linspace(0.1, np.pi, 9):
        u = np.array([np.cos(ang), np.sin(ang)])
        m, v = u @ w, u @ S @ u
        pr = moderated_predictive(c[:, None] * u, w, S)
        assert np.allclose(special.logit(pr), c * m / np.sqrt(1 + np.pi * c ** 2 * v / 8), rtol=1e-6, atol=1e-9)
        assert np.all(np.diff(np.sign(m) * pr) > 0)
        assert pr[-1] == pytest.approx(special.expit(m / np.sqrt(np.pi * v / 8)), abs=1e-6)


# ---------------------------------------------------------------- scoring rules and calibration
def test_scoring_rules_are_proper(seed):
    rng = np.random.default_rng(seed(14))
    C = 5
    y = np.arange(C)
    exp_score = lambda score, q, p: np.sum(p * score(np.tile(q, (C, 1)), y, reduce="none"))
    for _ in range(100):
        p = rng.dirichlet(np.ones(C) * 0.7)
        qs = np.vstack([rng.dirichlet(np.ones(C), 30), np.abs(p + 1e-4 * rng.normal(size=(30, C)))])
        qs /= qs.sum(1, keepdims=True)
        for score in (log_score, brier_score):
            assert np.all([exp_score(score, q, p) > exp_score(score, p, p) for q in qs])
        # the excess log score is exactly KL(p || q) (scipy's relative entropy), zero only at q = p
        q = qs[0]
        assert exp_score(log_score, q, p) - exp_score(log_score, p, p) == pytest.approx(stats.entropy(p, q))
    # Brier decomposition ||q - p||^2 + 1 - ||p||^2
    p, q = rng.dirichlet(np.ones(C)), rng.dirichlet(np.ones(C))
    assert exp_score(brier_score, q, p) == pytest.approx(np.sum((q - p) ** 2) + 1 - np.sum(p ** 2))


def test_score_values_and_infinite_log_score():
    # one definition: sum over classes; a (n,) vector of P(y=1) means the two-class table (1 - p, p)
    assert brier_score([0.8, 0.3], [1, 0]) == pytest.approx((0.08 + 0.18) / 2)
    assert brier_score([[0.2, 0.8]], [1]) == pytest.approx(0.08)
    assert log_score([[0.25, 0.75], [0.5, 0.5]], [1, 0]) == pytest.approx(-(np.log(0.75) + np.log(0.5)) / 2)
    assert log_score([[1.0, 0.0]], [1]) == np.inf                         # a confident miss is infinitely bad


def test_binary_vector_and_two_class_table_agree(seed):
    "brier_score, calibration_curve and the ECE give one answer whether P(y=1) comes as (n,) or as (n, 2)."
    # (failed before: brier_score([0.8], [1]) was 0.04 but [[0.2, 0.8]] gave 0.08, and calibration_curve binned
    # P(y=1) for (n,) input but the top-label confidence for (n, 2) input; `cls` did not exist)
    rng = np.random.default_rng(seed(30))
    p = rng.random(500)
    y = (rng.random(500) < p).astype(int)
    table = np.column_stack([1 - p, p])
    assert brier_score([0.8], [1]) == pytest.approx(brier_score([[0.2, 0.8]], [1])) == pytest.approx(0.08)
    assert np.allclose(brier_score(p, y, reduce="none"), brier_score(table, y, reduce="none"))
    assert np.allclose(brier_score(p, y, reduce="none"), 2 * (p - y) ** 2)
    for cls in (None, 0, 1):
        a, b = calibration_curve(p, y, 10, cls=cls), calibration_curve(table, y, 10, cls=cls)
        assert np.array_equal(a.counts, b.counts) and np.allclose(a.confidence, b.confidence, equal_nan=True)
        assert np.allclose(a.accuracy, b.accuracy, equal_nan=True)
        assert expected_calibration_error(p, y, 10, cls) == pytest.approx(expected_calibration_error(table, y, 10, cls))
    # cls=1 is the curve of P(y=1) against the frequency of y=1; cls=None the top-label curve, by hand
    c1 = calibration_curve(p, y, 10, cls=1)
    b = np.clip(np.ceil(p * 10).astype(int) - 1, 0, 9)
    assert np.allclose(c1.accuracy, [y[b == j].mean() for j in range(10)])
    top = calibration_curve(p, y, 10)
    conf = np.maximum(p, 1 - p)
    bt = np.clip(np.ceil(conf * 10).astype(int) - 1, 0, 9)
    hit = (p > 0.5).astype(int) == y
    assert np.all(top.counts[:4] == 0) and np.array_equal(top.counts, np.bincount(bt, minlength=10))
    ok = top.counts > 0
    assert np.allclose(top.accuracy[ok], [hit[bt == j].mean() for j in np.flatnonzero(ok)])
    with pytest.raises(ValueError, match="cls"):
        calibration_curve(p, y, 10, cls=2)


def test_expected_calibration_error_known_values(seed):
    # two bins by hand: confidences 0.3 (2 points, 1 right) and 0.8 (2 points, both right)
    P = np.array([[0.3, 0.35, 0.35], [0.3, 0.35, 0.35], [0.8, 0.1, 0.1], [0.8, 0.1, 0.1]])
    y = np.array([1, 0, 0, 0])        # top labels: 1, 1, 0, 0 -> bin 0.35: 1/2 right; bin 0.8: 2/2 right
    cc = calibration_curve(P, y, 10)
    assert cc.counts.sum() == 4 and np.isnan(cc.accuracy[0])
    assert expected_calibration_error(P, y, 10) == pytest.approx(0.5 * abs(0.5 - 0.35) + 0.5 * abs(1 - 0.8))
    assert expected_calibration_error(np.tile([0.9, 0.1], (100, 1)), np.arange(100) % 2) == pytest.approx(0.4)
    # labels drawn from the predicted probabilities: calibrated; E[ECE] <= bound (Jensen on each |bin gap|)
    rng = np.random.default_rng(seed(15))
    P = rng.dirichlet(np.full(3, 0.5), size=50_000)
    y = (rng.random(len(P))[:, None] > np.cumsum(P, 1)).sum(1)
    cc = calibration_curve(P, y, 15)
    ok = cc.counts > 0
    bound = np.sum(cc.counts[ok] / len(y) * np.sqrt(cc.confidence[ok] * (1 - cc.confidence[ok]) / cc.counts[ok]))
    # McDiarmid: one label moves the ECE by at most 1/N, so P(ECE >= E[ECE] + t) <= exp(-2 N t^2) = 1e-6 for this t
    assert expected_calibration_error(P, y, 15) < bound + np.sqrt(np.log(1e6) / (2 * len(y)))
    # marginal calibration error: a binary problem always predicting (0.7, 0.3) with 50% class 0
    P2 = np.tile([0.7, 0.3], (1000, 1))
    y2 = np.arange(1000) % 2
    assert marginal_calibration_error(P2, y2) == pytest.approx(0.5 * (0.2 ** 2) + 0.5 * (0.2 ** 2))


def test_softmax_numbers():
    a = [3.0, 0.0, 1.0]
    assert np.allclose(softmax(a, 1), [0.8438, 0.0420, 0.1142], atol=5e-5)
    assert np.allclose(softmax(a, 2), [0.6285, 0.1402, 0.2312], atol=5e-5)
    assert np.allclose(softmax(a, 100), [0.3389, 0.3289, 0.3322], atol=5e-5)
    assert np.allclose(softmax(np.array([[1000.0, 0.0]])), [[1.0, 0.0]])    # stable for huge logits


def test_temperature_scale_recovers_known_temperature(seed):
    rng = np.random.default_rng(seed(16))
    N, C, T_true = 20_000, 5, 3.0
    z = rng.normal(size=(N, C)) * 2
    y = (rng.random(N)[:, None] > np.cumsum(special.softmax(z, 1), 1)).sum(1)   # labels from softmax(z)
    T = temperature_scale(T_true * z, y)                                      # over-confident logits
    # MLE of beta = 1/T: sd = 1 / sqrt(N I) with Fisher information I = mean Var_q[logit] at the truth
    Z = T_true * z
    q = special.softmax(Z / T_true, 1)
    info = np.mean(np.sum(q * Z ** 2, 1) - np.sum(q * Z, 1) ** 2)
    assert abs(1 / T - 1 / T_true) < 4.9 / np.sqrt(N * info)   # asymptotic normality of the MLE: false alarm 1e-6
    nll = lambda t: log_score(softmax(Z, t), y)
    assert all(nll(T) <= nll(t) + 1e-12 for t in np.linspace(1.5, 5, 36))


def test_platt_scaling_recovers_known_map(seed):
    rng = np.random.default_rng(seed(24))
    n, a, b = 20_000, 0.5, -0.3
    s = rng.normal(0, 3, n)
    y = (rng.random(n) < special.expit(a * s + b)).astype(int)
    fit = platt_scale(s, y)
    # MLE standard errors from the inverse Fisher information of logistic regression on (s, 1)
    Phi = np.column_stack([s, np.ones(n)])
    p = special.expit(Phi @ [a, b])
    se = np.sqrt(np.diag(np.linalg.inv((Phi * (p * (1 - p))[:, None]).T @ Phi)))
    assert abs(fit.a - a) < 4.9 * se[0] and abs(fit.b - b) < 4.9 * se[1]   # CLT: 4.9 se, false alarm 1e-6


def test_histogram_and_isotonic_calibrators(seed):
    rng = np.random.default_rng(seed(25))
    p = rng.random(3000)
    y = (rng.random(3000) < p ** 2).astype(int)          # true calibration map p -> p^2
    hb = histogram_binning(p, y, 5)
    cc = calibration_curve(p, y, 5, cls=1)          # frequency of y = 1 in each bin of P(y = 1)
    assert np.allclose(hb.values, cc.accuracy) and np.allclose(hb(p), cc.accuracy[np.clip(np.ceil(p * 5) - 1, 0, 4).astype(int)])
    iso = isotonic_calibration(p, y)
    fitted = iso(p)
    assert np.all(np.diff(iso.y) >= -1e-12)
    assert np.isclose(fitted.sum(), y.sum())             # pool-adjacent-violators preserves the mean
    sse = np.sum((fitted - y) ** 2)
    for cand in (p ** 2, np.sort(rng.random(3000))[np.argsort(np.argsort(p))], np.full(3000, y.mean())):
        assert sse <= np.sum((cand - y) ** 2) + 1e-9     # no monotone map of p fits the labels better


def test_accuracy_vs_confidence_by_hand():
    P = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.55, 0.45]])
    y = np.array([0, 1, 1, 0])
    sa = accuracy_vs_confidence(P, y, [0.0, 0.58, 0.85, 0.95])
    assert np.allclose(sa.kept, [1.0, 0.75, 0.25, 0.0])
    assert np.allclose(sa.accuracy[:3], [0.75, 2 / 3, 1.0]) and np.isnan(sa.accuracy[3])


def test_digits_logits_deterministic_and_copy_safe(seed):
    a = digits_logits(rng=seed(3))
    a.test[0][:] = 0.0                                                       # mutate the returned copy
    b = digits_logits(rng=seed(3))
    assert not np.allclose(b.test[0], 0.0)
    assert len(b.train[1]) == 400 and len(b.calib[1]) + len(b.test[1]) == 1797 - 400
    assert np.mean(b.test[0].argmax(1) == b.test[1]) > 0.9


# ---------------------------------------------------------------- conformal prediction
def test_conformal_coverage_is_exactly_k_over_n_plus_1(seed):
    n, alpha, R = 100, 0.1, 4000
    k = math.ceil((n + 1) * (1 - alpha))
    assert k / (n + 1) == pytest.approx(0.90099, abs=5e-6)
    rng = np.random.default_rng(seed(17))
    # coverage given the calibration set is known exactly here: P(|Y| <= qhat) = 2 Phi(qhat) - 1, Y ~ N(0, 1)
    cov = np.array([2 * stats.norm.cdf(split_conformal_regression(rng.standard_normal(n), np.zeros(n),
                                                                  np.zeros(1), alpha).qhat) - 1
                    for _ in range(R)])
    beta_k = stats.beta(k, n + 1 - k)
    assert abs(cov.mean() - k / (n + 1)) < 4.9 * beta_k.std() / np.sqrt(R)   # CLT: 4.9 se, false alarm 1e-6
    assert stats.kstest(cov, beta_k.cdf).pvalue > 1e-6   # p ~ U(0,1) under H0: false alarm 1e-6


def test_conformal_coverage_within_band_over_many_splits(seed):
    # misspecified predictor (wrong mean, heavy-tailed noise, non-constant scale): the guarantee still holds
    n, m, alpha, R = 100, 50, 0.1, 2000
    k = math.ceil((n + 1) * (1 - alpha))
    rng = np.random.default_rng(seed(18))
    hits = np.empty((R, m))
    for r in range(R):
        x = rng.uniform(0, 3, n + m)
        y = np.sin(x) * 2 + (0.2 + x) * rng.standard_t(3, n + m)
        f = 0.5 * x                                           # a poor predictor
        ci = split_conformal_regression(y[:n], f[:n], f[n:], alpha, 0.2 + x[:n], 0.2 + x[n:])
        hits[r] = (y[n:] >= ci.lower) & (y[n:] <= ci.upper)
    per_split = hits.mean(1)                                  # i.i.d. over splits
    se = per_split.std(ddof=1) / np.sqrt(R)
    assert 1 - alpha - 4.9 * se <= per_split.mean() <= 1 - alpha + 1 / (n + 1) + 4.9 * se   # CLT: 4.9 se, false alarm 1e-6
    assert abs(per_split.mean() - k / (n + 1)) < 4.9 * se   # CLT: 4.9 se, false alarm 1e-6


@pytest.mark.parametrize("method,rand", [("lac", None), ("aps", None), ("aps", 0)])
def test_conformal_classification_coverage(method, rand, seed):
    n, m, alpha, R, C = 200, 20, 0.1, 1000, 6
    k = math.ceil((n + 1) * (1 - alpha))
    rng = np.random.default_rng(seed(19))
    cover = np.empty(R)
    for r in range(R):
        true = rng.dirichlet(np.ones(C), n + m)
        y = (rng.random(n + m)[:, None] > np.cumsum(true, 1)).sum(1)
        model = special.softmax(3 * np.log(true) + rng.normal(size=true.shape), 1)   # over-confident, noisy
        cs = split_conformal_classification(model[:n], y[:n], model[n:], alpha, method,
                                            rng=None if rand is None else rng)
        cover[r] = cs.sets[np.arange(m), y[n:]].mean()
    se = cover.std(ddof=1) / np.sqrt(R)
    assert abs(cover.mean() - k / (n + 1)) < 4.9 * se   # CLT: 4.9 se, false alarm 1e-6


def test_conformal_variants_identities(seed):
    rng = np.random.default_rng(seed(20))
    y, m = rng.normal(size=300), rng.normal(size=300) * 0.1
    mt = rng.normal(size=40)
    # equal predictive sds: -log N(y|m,s) is increasing in |y - m|, so conformal Bayes = split conformal
    cb = conformal_bayes_regression(y, m, np.full(300, 1.3), mt, np.full(40, 1.3), 0.1)
    sc = split_conformal_regression(y, m, mt, 0.1)
    assert np.allclose(cb.lower, sc.lower) and np.allclose(cb.upper, sc.upper)
    # CQR with exact quantiles of N(0,1) data: scores max(lo - y, y - hi); interval = band +/- qhat
    lo, hi = np.full(300, stats.norm.ppf(0.05)), np.full(300, stats.norm.ppf(0.95))
    cq = conformal_quantile_regression(y, lo, hi, lo[:40], hi[:40], 0.1)
    qh = conformal_quantile(np.maximum(lo - y, y - hi), 0.1)
    assert cq.qhat == qh and np.allclose(cq.upper, hi[:40] + qh)
    assert conformal_quantile(np.arange(5.0), 0.1) == np.inf
    assert conformal_quantile(np.arange(1.0, 101.0), 0.1) == 91.0           # k = ceil(101 * 0.9) = 91


def test_quantile_regression_and_pinball(seed):
    rng = np.random.default_rng(seed(21))
    x = rng.uniform(0, 2, 400)
    Phi = np.column_stack([np.ones_like(x), x])
    y = 1 + 2 * x + (0.5 + x) * rng.normal(size=400)
    for tau in (0.1, 0.5, 0.9):
        b = quantile_regression(Phi, y, tau)
        base = pinball_loss(y, Phi @ b, tau).sum()
        for db in rng.normal(scale=0.05, size=(20, 2)):                    # an LP optimum: no better neighbour
            assert pinball_loss(y, Phi @ (b + db), tau).sum() >= base - 1e-9   # invariant: the LP solution is optimal: no perturbation lowers the loss
        # a fitted quantile line leaves a fraction ~tau of the points below it (exact up to p/n for an LP fit)
        assert abs(np.mean(y < Phi @ b) - tau) <= 2 / len(y) + 1e-12


# ---------------------------------------------------------------- A/B test
def test_prob_beta_greater_series_vs_quadrature():
    for a1, b1, a2, b2 in ((1, 1, 1, 1), (3, 5, 2, 7), (1.5, 2.5, 2, 3), (2.5, 3.5, 4.5, 1.5), (0.7, 2.2, 3.3, 0.4),
                           (120, 880, 100, 900)):
        ref = integrate.quad(lambda x: stats.beta.pdf(x, a2, b2) * stats.beta.sf(x, a1, b1), 0, 1,
                             points=[a2 / (a2 + b2)], limit=500, epsabs=1e-13)[0]
        assert prob_beta_greater(a1, b1, a2, b2) == pytest.approx(ref, abs=1e-8)
    assert prob_beta_greater(1, 1, 1, 1) == pytest.approx(0.5)


def test_ab_expected_loss_exact_vs_monte_carlo(seed):
    res = ab_test_expected_loss(12, 200, 20, 210, prior=(1.0, 1.0))
    assert res.post_a == (13.0, 189.0) and res.post_b == (21.0, 191.0)
    rng = np.random.default_rng(seed(22))
    ta, tb = rng.beta(*res.post_a, 500_000), rng.beta(*res.post_b, 500_000)
    for exact, mc in ((res.loss_a, np.maximum(tb - ta, 0)), (res.loss_b, np.maximum(ta - tb, 0)),
                      (res.prob_b_better, (tb > ta).astype(float))):
        assert abs(exact - mc.mean()) < 5.3 * mc.std() / np.sqrt(len(mc))   # false alarm <= 1e-6: 5.3 se covers up to 10 comparisons
    ma, mb = 13 / 202, 21 / 212
    assert res.loss_a - res.loss_b == pytest.approx(mb - ma, abs=1e-12)
    # a non-integer prior goes through the quadrature branch and must agree with the same identity
    res2 = ab_test_expected_loss(12, 200, 20, 210, prior=(0.5, 0.5))
    assert res2.loss_a - res2.loss_b == pytest.approx(20.5 / 211 - 12.5 / 201, abs=1e-9)


def test_sequential_ab_test_wrong_arm_count_matches_posterior(seed):
    """The tower property at the stopping time, checked exactly on a 0/1 event. Given the data at the stops the rates
    are posterior draws, so the number W of tests that shipped the worse arm is Poisson-binomial(prob_worse).
    (The regret itself is 0 for most tests and a spike for a few: a t statistic of regret minus expected loss had sd
    1.6 instead of 1 over 400 seeds, so no CLT bound on it is valid.)"""
    st = ab_test_study(n_experiments=400, rng=seed(23))
    law = np.array([1.0])
    for p in st.prob_worse:
        law = np.convolve(law, [1 - p, p])
    W = int(np.sum(st.regret > 0))
    # two-sided, 5e-7 per tail: false alarm <= 1e-6 (exact law). Fails when prob_worse does not describe the shipped
    # arm: e.g. with the arms' counts swapped in the posterior W is near 376 against an expectation near 24.
    assert law[W:].sum() > 5e-7 and law[:W + 1].sum() > 5e-7, (W, st.prob_worse.sum())
    # prob_worse and final_loss are the posterior quantities of the shipped arm at the stop (exact formulas)
    for i in range(5):
        (aa, ba), (ab, bb) = st.posteriors[i]
        res = ab_test_expected_loss(int(aa - 2), int(aa + ba - 40), int(ab - 2), int(ab + bb - 40), prior=(2.0, 38.0))
        p_b = prob_beta_greater(ab, bb, aa, ba)
        assert st.prob_worse[i] == pytest.approx(p_b if st.chosen[i] == 0 else 1 - p_b, abs=1e-12)
        assert st.final_loss[i] == pytest.approx((res.loss_a, res.loss_b)[st.chosen[i]], abs=1e-15)
    assert np.all(st.final_loss[st.stopped] < 1e-3)
    a = sequential_ab_test(0.05, 0.06, rng=seed(5))
    b = sequential_ab_test(0.05, 0.06, rng=seed(5))
    assert a.choice == b.choice and np.array_equal(a.losses, b.losses)        # same seed, same run


# ---------------------------------------------------------------- figures and bad input
def test_every_figure_function_runs_without_arguments():
    figs = figure_functions(decision)
    assert len(figs) >= 14
    for name, fn in figs.items():
        if name in ("fig_conformal_coverage", "fig_ab_test"):
            continue                      # the two slowest; both run in the notebook
        assert isinstance(fn(), Figure), name


BAD = [
    (lambda: expected_loss([1.0, np.nan], [0.0]), "samples_or_probs"),
    (lambda: expected_loss([1.0, 2.0], None, "squared"), "actions"),
    (lambda: expected_loss([0.5, 0.6], loss=np.eye(2)), "samples_or_probs"),
    (lambda: expected_loss([1.0, 2.0], [0.0], "huber"), "loss"),
    (lambda: expected_loss([1.0, 2.0], [0.0], weights=[1.0, -1.0]), "weights"),
    (lambda: bayes_estimator([1.0, 2.0], "median"), "loss"),
    (lambda: bayes_estimator(np.ones((3, 2)), "zero_one"), "zero_one"),
    (lambda: bayes_estimator([1.0, 2.0], "zero_one", eps=-1.0), "eps"),
    (lambda: bayes_estimator([1.0, 2.0], "pinball", level=1.0), "level"),
    (lambda: credible_interval([1.0, 2.0], 1.5), "alpha"),
    (lambda: credible_interval([1.0, 2.0], 0.1, "widest"), "kind"),
    (lambda: classify_with_reject([[0.5, 0.6]]), "probs"),
    (lambda: classify_with_reject([[0.5, 0.5]], np.eye(3)), "cost_matrix"),
    (lambda: classify_with_reject([[0.5, 0.5]], reject_cost=np.inf), "reject_cost"),
    (lambda: reject_thresholds(0.0, 1.0, 0.1), "c_fn"),
    (lambda: reject_thresholds(1.0, 1.0, -0.1), "reject_cost"),
    (lambda: evpi([1.0, 2.0]), "utility"),
    (lambda: evpi([[1.0, np.inf]]), "utility"),
    (lambda: james_stein([1.0, 2.0], 1.0), "x"),
    (lambda: james_stein([1.0, 2.0, 3.0], 0.0), "sigma2"),
    (lambda: james_stein_risk(1.0, 2), "d"),
    (lambda: frequentist_risk(lambda x: x, lambda t, n, r: r.normal(size=n), 0.0, 10, rng=1.5), "rng"),
    (lambda: log_score([[0.2, 0.8]], [2]), "labels"),
    (lambda: brier_score([1.2], [1]), "probs"),
    (lambda: expected_calibration_error([[0.5, 0.5]], [0], n_bins=0), "n_bins"),
    (lambda: softmax([1.0, 2.0], 0.0), "temperature"),
    (lambda: softmax([1.0, np.nan]), "logits"),
    (lambda: temperature_scale(np.zeros(5), np.zeros(5)), "logits"),
    (lambda: split_conformal_regression([1.0, 2.0], [1.0], [0.0]), "y_cal"),
    (lambda: split_conformal_regression([1.0], [1.0], [0.0], alpha=0.0), "alpha"),
    (lambda: split_conformal_regression([1.0], [1.0], [0.0], scale_cal=[1.0]), "scale_cal"),
    (lambda: split_conformal_classification([[0.5, 0.5]], [0], [[0.5, 0.5]], method="raps"), "method"),
    (lambda: split_conformal_classification([[0.5, 0.5]], [0], [[1.0, 0.0]], rng=0), "rng"),
    (lambda: conformal_bayes_regression([1.0], [0.0], [0.0], [0.0], [1.0]), "sd_cal"),
    (lambda: quantile_regression(np.ones((3, 1)), np.ones(3), 0.0), "level"),
    (lambda: prob_beta_greater(0.0, 1.0, 1.0, 1.0), "a1"),
    (lambda: ab_test_expected_loss(5, 3, 1, 10), "k_a"),
    (lambda: ab_test_expected_loss(1, 3, 1, 10, prior=(0.0, 1.0)), "prior"),
    (lambda: sequential_ab_test(1.5, 0.1, rng=0), "rate_a"),
    (lambda: sequential_ab_test(0.1, 0.1, rng=1.5), "rng"),
    (lambda: joint_predictive([0, 2], [0.5]), "outcomes"),
    (lambda: joint_predictive([0, 1], [1.5]), "thetas"),
    (lambda: stopping_rule_pvalues(9, 0), "tails"),
    (lambda: logistic_map(np.ones((3, 2)), np.ones(3), prior_var=-1.0), "prior_var"),
    (lambda: weighted_quantile([1.0, 2.0], 2.0), "level"),
    (lambda: digits_logits(n_train=5), "n_train"),
    (lambda: platt_scale(np.ones((2, 2)), [0, 1]), "scores"),
    (lambda: platt_scale([0.1, 0.2], [0, 2]), "labels"),
    (lambda: isotonic_calibration([0.1, 1.2], [0, 1]), "probs"),
    (lambda: histogram_binning([0.1, 0.2], [0, 1], n_bins=0), "n_bins"),
    # the integer, probability and sign checks go through bayesnotes.utils (check_count, check_probability, ...)
    (lambda: james_stein_risk(1.0, 3.5), "d"),
    (lambda: james_stein_risk(-1.0, 3), "theta_norm2"),
    (lambda: frequentist_risk(lambda x: x, lambda t, n, r: r.normal(size=n), 0.0, 1, rng=0), "n_rep"),
    (lambda: stopping_rule_pvalues(9.5, 3), "heads"),
    (lambda: calibration_curve([[0.5, 0.5]], [0], n_bins=2.5), "n_bins"),
    (lambda: sequential_ab_test(0.1, 0.1, batch_size=0, rng=0), "batch_size"),
    (lambda: sequential_ab_test(0.1, 0.1, batch_size=200, max_per_arm=100, rng=0), "max_per_arm"),
    (lambda: ab_test_expected_loss(1.5, 3, 1, 10), "k_a"),
    (lambda: ab_test_expected_loss(1, 3, 1, 10.5), "n_b"),
    (lambda: pinball_loss([1.0], [1.0], 1.0), "level"),
    (lambda: interval_score([0.0], [1.0], [0.5], 0.0), "alpha"),
    (lambda: conformal_quantile([1.0, 2.0], 1.0), "alpha"),
    (lambda: weighted_quantile([1.0, 2.0], 0.5, weights=[0.0, 0.0]), "weights"),
    (lambda: credible_interval([1.0, np.inf]), "samples"),
]


@pytest.mark.parametrize("call,name", BAD, ids=[f"{i}-{n}" for i, (_, n) in enumerate(BAD)])
def test_bad_input_raises_value_error_naming_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_debiased_calibration_error_is_unbiased(seed):
    """Kumar et al.'s debiased CE^2 is unbiased; the plug-in is biased up by sum_b mu_b (1 - mu_b) / n. A fixed
    5-value predictor on synthetic scores, exact CE^2 and mu_b by quadrature; 400 evaluation sets of 200 points.
    Each mean is compared with its exact expectation at 4.5 standard errors (2 comparisons: false alarm 1.4e-5)."""
    from bayesnotes.decision import _synthetic_calibration, binned_calibration_error
    cuts = stats.norm.ppf(np.arange(1, 5) / 5, 0, 2)
    values = special.expit(np.r_[-2.5, -0.8, 0.0, 0.8, 2.5] * 0.6)
    edges = np.r_[-np.inf, cuts, np.inf]
    mu = np.array([integrate.quad(lambda t: special.expit(0.5 * t + 0.3) * stats.norm.pdf(t, 0, 2), edges[b], edges[b + 1])[0] / 0.2
                   for b in range(5)])
    truth = np.sum(0.2 * (mu - values) ** 2)
    rng, n, R = np.random.default_rng(seed(21)), 200, 400
    est = np.array([[binned_calibration_error(values[np.searchsorted(cuts, s)], y, debiased).ce2 for debiased in (True, False)]
                    for s, y in (_synthetic_calibration(n, rng) for _ in range(R))])
    se = est.std(0, ddof=1) / np.sqrt(R)
    assert abs(est[:, 0].mean() - truth) < 4.5 * se[0]
    assert abs(est[:, 1].mean() - (truth + np.sum(mu * (1 - mu)) / n)) < 4.5 * se[1]
    assert est[:, 1].mean() - truth > 10 * se[1]       # the plug-in bias is large here (about 0.005 against CE^2 0.004)


def test_scaling_binning_is_binned_means_of_platt(seed):
    from bayesnotes.decision import _synthetic_calibration, platt_scale, scaling_binning, binned_calibration_error
    s, y = _synthetic_calibration(1200, np.random.default_rng(seed(22)))
    sb = scaling_binning(s, y, n_bins=8)
    g = platt_scale(s[:400], y[:400])
    assert np.allclose(sb.scaler(s), g(s))                                       # Platt on the first third
    assert np.allclose(sb.cuts, np.quantile(g(s[400:800]), np.arange(1, 8) / 8))  # equal-mass bins on the second
    b = np.searchsorted(sb.cuts, g(s[800:]), side="right")
    assert np.allclose(sb.values, [g(s[800:])[b == k].mean() for k in range(8)])   # means of g on the third
    out = sb(np.sort(s))
    assert len(np.unique(out)) == 8 and np.all(np.diff(out) >= 0)
    with pytest.raises(ValueError, match="scores"):
        scaling_binning(s[:20], y[:20], n_bins=8)
    with pytest.raises(ValueError, match="n_bins"):
        scaling_binning(s, y, n_bins=0)
    with pytest.raises(ValueError, match="labels"):
        scaling_binning(s, y[:-1])
    with pytest.raises(ValueError, match="probs"):
        binned_calibration_error(np.ones((3, 2)) / 2, [0, 1, 1])


def test_ood_metrics_against_independent_computations(seed):
    "ood_auroc is the Mann-Whitney statistic (scipy) and accuracy_coverage the brute-force top-k accuracy."
    from bayesnotes.decision import accuracy_coverage, ood_auroc, ood_digits
    rng = np.random.default_rng(seed(23))
    a, b = rng.normal(1.0, 1.0, 300), np.round(rng.normal(0.0, 1.0, 200), 1)      # ties inside b
    assert np.isclose(ood_auroc(a, b), stats.mannwhitneyu(a, b).statistic / (300 * 200))
    c, ok = rng.random(50), rng.random(50) < 0.7
    cov, acc = accuracy_coverage(c, ok)
    for k in (1, 7, 50):
        assert np.isclose(acc[k - 1], ok[np.argsort(-c)[:k]].mean()) and np.isclose(cov[k - 1], k / 50)
    d = ood_digits(n_train=300, n_mc=50, rng=seed(24))
    assert d.map_in.shape == d.laplace_in.shape == (len(d.labels_in), 5) and np.all(d.labels_in < 5)
    assert np.allclose(d.map_out.sum(1), 1) and np.allclose(d.laplace_out.sum(1), 1)
    with pytest.raises(ValueError, match="prior_prec"):
        ood_digits(prior_prec=0.0)
    with pytest.raises(ValueError, match="confidence_in"):
        ood_auroc([], [0.5])


# ---------------------------------------------------------------- silent failures of the fits (review 06, items 4-6)
def test_temperature_scale_warns_when_no_finite_optimum(seed):
    # catches the old silent behaviour: when the label has the largest logit on every calibration point the NLL falls
    # all the way to 0 as T -> 0, and the search used to return a tiny T (about 6e-4) without a word
    from bayesnotes.core import ConvergenceWarning
    rng = np.random.default_rng(seed(40))
    z = rng.normal(size=(50, 3))
    with pytest.warns(ConvergenceWarning, match="no finite optimum"):
        temperature_scale(z, z.argmax(1))
    z = rng.normal(size=(2000, 3)) * 2
    y = (rng.random(2000)[:, None] > np.cumsum(special.softmax(z, 1), 1)).sum(1)    # labels drawn from softmax(z)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # an ordinary calibration set (many top labels wrong) must not warn
        temperature_scale(z, y)


def test_platt_scale_warns_on_separable_scores(seed):
    # catches the old silent divergence: on scores that separate the labels the MLE does not exist and BFGS returned a
    # slope in the hundreds with no warning
    from bayesnotes.core import ConvergenceWarning
    rng = np.random.default_rng(seed(41))
    s = rng.normal(size=60)
    with pytest.warns(ConvergenceWarning, match="separate"):
        platt_scale(s, (s > 0).astype(int))
    with pytest.warns(ConvergenceWarning, match="separate"):
        platt_scale(s, np.ones(60, int))         # one label missing: b runs off to infinity
    y = (rng.random(60) < special.expit(s)).astype(int)
    if 0 < y.sum() < 60 and s[y == 0].max() > s[y == 1].min():   # overlapping classes: a finite MLE exists
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            platt_scale(s, y)


def test_james_stein_risk_cost_does_not_grow_with_norm(monkeypatch):
    # catches the old series from k = 0 to about |theta|^2 / 2: for |theta|^2 = 1e7 it evaluated 5e6 Poisson terms per
    # value (8 s, and 0.8 GB for a vector of large norms); the windowed series evaluates about 24 sqrt(lambda / 2) terms
    sizes = []
    pmf = decision.stats.poisson.pmf
    def spy(k, mu, *a, **kw):
        sizes.append(np.size(k))
        return pmf(k, mu, *a, **kw)
    monkeypatch.setattr(decision.stats.poisson, "pmf", spy)
    r = james_stein_risk(np.array([0.0, 9.0, 1e7]), 10)
    assert max(sizes) < 3 * 60_000
    monkeypatch.undo()
    # values: each entry agrees with its own scalar call, and the large norm with quadrature against scipy's ncx2
    assert r[:2] == pytest.approx([james_stein_risk(0.0, 10), james_stein_risk(9.0, 10)], rel=1e-12)
    d, lam = 10, 1e6
    m, sd = d + lam, np.sqrt(2 * (d + 2 * lam))           # +/- 40 sd: no mass left outside
    e_inv = integrate.quad(lambda v: stats.ncx2.pdf(v, d, lam) / v, m - 40 * sd, m + 40 * sd, points=[m], limit=400)[0]
    assert (d - james_stein_risk(lam, d)) / (d - 2) ** 2 == pytest.approx(e_inv, rel=1e-6)
