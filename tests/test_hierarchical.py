"""Tests of bayesnotes.hierarchical: the eight schools targets (exact identities), the quadrature reference against
independent integrations (2-d numerical and 10-d importance sampling), NUTS on the non-centred form against the
exact posterior, the failure of the centred form, and input validation.

Statistical bounds: importance-sampling estimates are compared at 5.5 delta-method standard errors (two-sided
p = 3.8e-8 each); NUTS means are compared through the spread of the means of independent chains (Student t with
R - 1 degrees of freedom). Each test states its family-wise false-alarm probability. The claims about the centred
run are claims about a *failure*; their thresholds come from a sweep over 47 seeds, reported next to them."""
import numpy as np
import pytest
from scipy import integrate, stats

from bayesnotes.hierarchical import (MU_SD, TAU_SCALE, eight_schools, eight_schools_data, eight_schools_exact,
                                     run_eight_schools, school_effects)
from bayesnotes.hierarchical import _tau_conditionals


@pytest.fixture(scope="module")
def exact():
    return eight_schools_exact()


def test_data_are_the_published_table():
    "BDA3 Table 5.2 (Rubin 1981 rounded): eight schools, effects and standard errors."
    y, sigma = eight_schools_data()
    assert y.tolist() == [28, 8, -3, 7, -1, 1, 18, 12] and sigma.tolist() == [15, 10, 16, 11, 9, 11, 10, 18]


def test_parameterisations_are_one_distribution(seed):
    "log pi_nc(mu, lam, eta) = log pi_c(mu, lam, mu + e^lam eta) + J lam, and pi_c is the model's joint density times tau."
    rng = np.random.default_rng(seed(1))
    y, sigma = rng.normal(0, 10, 5), rng.uniform(1, 20, 5)          # any data, J = 5
    tc, tn = eight_schools(True, y, sigma), eight_schools(False, y, sigma)
    X = rng.normal(0, 2, (40, 7))
    th = X[:, :1] + np.exp(X[:, 1:2]) * X[:, 2:]
    Xc = np.column_stack([X[:, :2], th])
    vn, vc = tn.value_and_grad_batch(X)[0], tc.value_and_grad_batch(Xc)[0]
    assert np.allclose(vn, vc + 5 * X[:, 1], rtol=1e-12, atol=1e-9)
    tau = np.exp(Xc[:, 1])
    joint = (stats.norm.logpdf(Xc[:, 0], 0, MU_SD) + stats.halfcauchy.logpdf(tau, scale=TAU_SCALE)
             + stats.norm.logpdf(th, Xc[:, :1], tau[:, None]).sum(1) + stats.norm.logpdf(y, th, sigma).sum(1))
    assert np.allclose(vc, joint + Xc[:, 1], rtol=1e-12, atol=1e-9)
    for t, P in ((tc, Xc), (tn, X)):                                 # closed-form gradient = autograd's
        v, g = t.value_and_grad_batch(P)
        v2, g2 = t.with_autograd().value_and_grad_batch(P)
        assert np.allclose(v, v2, rtol=1e-12, atol=1e-9) and np.allclose(g, g2, rtol=1e-9, atol=1e-9)
        assert np.isclose(t.logdensity(P[0]), v[0])


def test_quadrature_matches_2d_integration(exact):
    """Evidence and posterior moments of (mu, tau) from the closed form (mu integrated analytically) against scipy's
    adaptive quadrature in 2-d over (mu, log tau), which integrates out only theta. Deterministic: no false alarm."""
    y, sigma = eight_schools_data()
    c = -exact.log_evidence - 8 * 0.5 * np.log(2 * np.pi) - np.log(MU_SD) - 0.5 * np.log(2 * np.pi) + np.log(2 / np.pi / TAU_SCALE)

    def f(mu, lam):       # p(mu) p(tau) tau prod_j N(y_j; mu, sigma_j^2 + tau^2) / p(y), written out by hand
        v = sigma ** 2 + np.exp(2 * lam)
        return np.exp(c - 0.5 * (mu / MU_SD) ** 2 - np.log1p(np.exp(2 * lam) / TAU_SCALE ** 2) + lam
                      - 0.5 * np.sum(np.log(v) + (y - mu) ** 2 / v))
    opts = dict(epsabs=1e-9, epsrel=1e-7)
    lims = (-20, 8, -40, 50)                                          # lam, then mu; mass outside < 1e-8
    Z = integrate.dblquad(f, *lims, **opts)[0]
    assert abs(np.log(Z)) < 1e-6                                      # log p(y) agrees
    E_tau = integrate.dblquad(lambda m, l: np.exp(l) * f(m, l), *lims, **opts)[0] / Z
    E_mu = integrate.dblquad(lambda m, l: m * f(m, l), *lims, **opts)[0] / Z
    assert abs(E_tau - exact.tau_mean) < 1e-6 and abs(E_mu - exact.mu_mean) < 1e-6


def test_quantiles_and_density(exact):
    """The reported quantiles are those of the closed-form density (adaptive quad of the CDF), the reported density
    integrates to 1, and it decreases from its mode at tau = 0. Deterministic."""
    dens = lambda t: np.exp(_tau_conditionals(np.atleast_1d(t), *eight_schools_data())[0][0] - exact.log_evidence)
    assert abs(integrate.quad(dens, 0, np.inf)[0] - 1) < 1e-7
    assert abs(integrate.trapezoid(exact.density, exact.tau) - 1) < 1e-4    # coarse in tau far out: a scale check
    for p, q in zip(exact.probs, exact.tau_quantiles):
        assert abs(integrate.quad(dens, 0, q)[0] - p) < 1e-5, (p, q)
    assert np.all(np.diff(exact.density) < 1e-12)


def test_exact_matches_importance_sampling(seed, exact):
    """Self-normalised importance sampling from the prior in all 10 dimensions (mu, tau, theta), weights = likelihood:
    evidence, means and second moments of tau, mu and the 8 theta_j. 21 comparisons at 5.5 standard errors
    (two-sided 3.8e-8 each): family-wise false alarm < 1e-6. The weights are bounded, so the CLT applies."""
    rng = np.random.default_rng(seed(2))
    y, sigma = eight_schools_data()
    N = 200_000
    mu = rng.normal(0, MU_SD, N)
    tau = TAU_SCALE * np.abs(rng.standard_cauchy(N))
    theta = mu[:, None] + tau[:, None] * rng.standard_normal((N, 8))
    lw = stats.norm.logpdf(y, theta, sigma).sum(1)
    w = np.exp(lw - lw.max())
    W = w / w.sum()

    def z(f, target):                                                 # delta-method standard error of sum W f
        m = W @ f
        return (m - target) / np.sqrt((W ** 2) @ ((f - m) ** 2))
    Zhat = w.mean()
    zs = [(np.log(Zhat) + lw.max() - exact.log_evidence) / (w.std() / np.sqrt(N) / Zhat),
          z(tau, exact.tau_mean), z(tau ** 2, exact.tau_sd ** 2 + exact.tau_mean ** 2),
          z(mu, exact.mu_mean), z(mu ** 2, exact.mu_sd ** 2 + exact.mu_mean ** 2)]
    zs += list(z(theta, exact.theta_mean)) + list(z(theta ** 2, exact.theta_sd ** 2 + exact.theta_mean ** 2))
    assert len(zs) == 21 and np.all(np.abs(zs) < 5.5), np.round(zs, 2)


def test_noncentred_nuts_matches_exact(seed, exact):
    """16 independent non-centred NUTS chains (each with its own warm-up): the t statistic of their means of tau, mu and
    theta_1 against the exact values, at the two-sided t_15 quantile for 1e-6 / 3 (family-wise false alarm < 1e-6).
    Divergences: at most 0.5% of the 8000 transitions; every chain's E-BFMI above 0.5. (Sweep of 17 seeds with 16 chains:
    at most 11 divergences in 8000; over 47 runs, per-chain E-BFMI mean 0.99, sd 0.08, minimum 0.75.)"""
    res = run_eight_schools(False, n_chains=16, rng=seed(3))
    p = school_effects(res.draws, centred=False)
    t = []
    for x, e in ((p.tau, exact.tau_mean), (p.mu, exact.mu_mean), (p.theta[..., 0], exact.theta_mean[0])):
        m = x.mean(1)
        t.append((m.mean() - e) / (m.std(ddof=1) / 4))
    assert np.all(np.abs(t) < stats.t.isf(1e-6 / 3 / 2, 15)), np.round(t, 2)
    assert res.stats.divergent.sum() <= 0.005 * res.stats.divergent.size, res.stats.divergent.sum(1)
    assert res.e_bfmi.min() > 0.5, res.e_bfmi
    # the left tail is explored: the share of draws below the exact 5% quantile is 0.05 +- 0.03. The 16 per-chain
    # shares have an sd of about 0.02 (sweep), so their mean has sd ~0.005 and 0.03 is 6 of those
    q05 = exact.tau_quantiles[list(exact.probs).index(0.05)]
    f = np.mean(p.tau < q05, 1)
    assert abs(f.mean() - 0.05) < 0.03, f


def test_centred_nuts_is_biased(seed, exact):
    """8 centred chains with the chapter's settings: more than 10 divergent transitions in 4000, at least half of the
    chains never below the exact 5% quantile of tau (an unbiased chain of 500 draws has ~25 there), and the median
    chain E-BFMI below 0.5. These are claims about a failure, so their margins come from a sweep (47 seeds): at least
    38 divergences per run, 5 of 376 chains with any draw below the quantile, median E-BFMI 0.29 (sd 0.034, max 0.39)."""
    res = run_eight_schools(True, rng=seed(4))
    p = school_effects(res.draws, centred=True)
    q05 = exact.tau_quantiles[list(exact.probs).index(0.05)]
    assert res.stats.divergent.sum() > 10, res.stats.divergent.sum(1)
    assert np.median(np.mean(p.tau < q05, 1)) == 0
    assert np.median(res.e_bfmi) < 0.5, res.e_bfmi


def test_bad_input():
    for kw in (dict(y=[1.0, 2.0], sigma=[1.0]), dict(y=[1.0, np.nan], sigma=[1.0, 1.0]),
               dict(y=[1.0, 2.0], sigma=[1.0, -1.0]), dict(y=[[1.0, 2.0]], sigma=[[1.0, 2.0]])):
        for f in (eight_schools, eight_schools_exact):
            with pytest.raises(ValueError, match="y|sigma"):
                f(**kw)
    with pytest.raises(ValueError, match="together"):
        eight_schools(y=[1.0, 2.0])
    with pytest.raises(ValueError, match="probs"):
        eight_schools_exact(probs=(0.5, 1.0))
    with pytest.raises(ValueError, match="n_grid"):
        eight_schools_exact(n_grid=10)
    with pytest.raises(ValueError, match="draws"):
        school_effects(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="draws"):
        school_effects([[0.0, np.inf, 1.0]])
