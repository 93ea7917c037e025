"""Tests for bayesnotes.ep: projections, ADF, EP (probit, logistic, clutter, noise precision), power EP.

References are exact identities, closed forms, quadrature (converged to ~1e-8, checked by refinement in the
notebook) or importance sampling with tolerances from its own Monte Carlo standard error."""
import time

import warnings
import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from bayesnotes.core import kl_gauss
from bayesnotes.datasets import load_breast_cancer
from bayesnotes import ep as E
from bayesnotes.ep import (adf_noise_precision, adf_probit, alpha_projection, clutter_data, clutter_exact_1d,
                           ep_clutter, ep_logistic, ep_noise_precision, ep_probit, gamma_from_mean_log,
                           gamma_from_mean_var, i_projection_diag, importance_reference, m_projection_diag,
                           moment_match_gamma, moment_match_gaussian, noise_precision_data, noise_precision_exact,
                           power_ep, probit_toy_data, tilted_moments)



@pytest.fixture(scope="module")
def toy():
    X, y = probit_toy_data()
    return X, y, E._grid_posterior_2d(X, y, 1.0)


# ---------------------------------------------------------------- projections

def _random_spd(rng, d):
    A = rng.standard_normal((d, d))
    return A @ A.T + 0.3 * np.eye(d)

@pytest.mark.parametrize("case", [0, 1])
def test_kl_projections_match_numerical_minimisation(case, seed):
    # closed forms vs a generic optimiser of the closed-form Gaussian KL from core (independent code path)
    rng = np.random.default_rng(seed(case))
    d = 3
    mean, cov = rng.standard_normal(d), _random_spd(rng, d)
    for direction, proj in (("forward", m_projection_diag), ("reverse", i_projection_diag)):
        def kl(z):
            m, v = z[:d], np.exp(z[d:])
            return kl_gauss(mean, cov, m, np.diag(v)) if direction == "forward" else kl_gauss(m, np.diag(v), mean, cov)
        z = optimize.minimize(kl, np.zeros(2 * d), method="BFGS", options={"gtol": 1e-10}).x
        m_cf, v_cf = proj(mean, cov)
        assert np.allclose(z[:d], m_cf, atol=1e-5) and np.allclose(np.exp(z[d:]), v_cf, rtol=1e-5)
    # the exact statements of the chapter
    assert np.allclose(m_projection_diag(mean, cov)[1], np.diag(cov), rtol=1e-14)
    assert np.allclose(i_projection_diag(mean, cov)[1], 1 / np.diag(np.linalg.inv(cov)), rtol=1e-10)
    assert np.all(i_projection_diag(mean, cov)[1] <= np.diag(cov))   # invariant: the diagonal I-projection variance 1 / Lambda_ii is at most Sigma_ii


def test_alpha_projection_limits_and_family():
    g = np.linspace(-12, 12, 4001)
    lp = E._mixture_logpdf(g, 3.0)
    m1, v1 = alpha_projection(lp, g, 1.0)
    assert abs(m1 - 0.6) < 1e-9 and abs(v1 - (1 + 0.96 * 9)) < 1e-8       # exact mixture moments
    m0, v0 = alpha_projection(lp, g, 0.0)
    assert abs(m0 - 3) < 0.05 and abs(v0 - 1) < 0.1                        # mode seeking
    # alpha slightly below 1 is close to the forward projection (continuity of the family)
    m9, v9 = alpha_projection(lp, g, 0.999, init=(m1, v1))
    assert abs(m9 - m1) < 0.05 and abs(v9 / v1 - 1) < 0.02


def test_moment_matching_helpers(seed):
    g = np.linspace(1e-6, 40, 200001); lw = np.log(np.gradient(g))
    lp = stats.gamma.logpdf(g, 2.5, scale=1 / 1.5) + lw
    for match in ("kl", "mean_var"):
        a, b = moment_match_gamma(g, lp, match)
        assert abs(a - 2.5) < 1e-4 and abs(b - 1.5) < 1e-4
    # KL projection is the minimiser of the forward KL over the Gamma family: perturbations increase it
    lq = stats.lognorm.logpdf(g, 0.7)
    a, b = moment_match_gamma(g, lq + lw, "kl")
    def ce(a_, b_): return -np.exp(lq + lw) @ stats.gamma.logpdf(g, a_, scale=1 / b_)
    base = ce(a, b)
    for da, db in ((0.02, 0), (-0.02, 0), (0, 0.02), (0, -0.02)):
        assert ce(a + da, b + db) > base
    a, b = gamma_from_mean_var(3.0, 1.5)
    assert np.isclose(a / b, 3.0) and np.isclose(a / b**2, 1.5)
    a, b = gamma_from_mean_log(2.0, 0.5)
    assert np.isclose(np.log(a) - special.digamma(a), np.log(2.0) - 0.5) and np.isclose(a / b, 2.0)
    x = np.random.default_rng(seed(0)).standard_normal((50000, 2)) @ np.array([[1.0, 0.0], [0.5, 2.0]])
    m, C = moment_match_gaussian(x)
    assert np.allclose(m, x.mean(0)) and np.allclose(C, np.cov(x.T, bias=True))


def test_tilted_moments_against_adaptive_quadrature():
    for link, alpha in (("probit", 1.0), ("logistic", 1.0), ("probit", 0.3)):
        for y, mu, v in ((1, 0.5, 2.0), (-1, 3.0, 0.2), (1, -2.0, 50.0)):
            f = lambda s, k: s**k * np.exp(alpha * E._loglink(link, y * s)) * stats.norm.pdf(s, mu, np.sqrt(v))
            lo, hi = mu - 12 * np.sqrt(v), mu + 12 * np.sqrt(v)
            Z, m1, m2 = (integrate.quad(f, lo, hi, args=(k,), epsabs=0, epsrel=1e-11, limit=200)[0] for k in range(3))
            got = tilted_moments(y, mu, v, link, alpha)
            assert np.allclose(got, (np.log(Z), m1 / Z, m2 / Z - (m1 / Z) ** 2), rtol=1e-8, atol=1e-10)
            # the scalar fast path used inside the EP loop agrees with the vectorised one
            sc = E._moments_scalar_fn(link, alpha)(float(y), mu, v)
            assert np.allclose(sc, got, rtol=1e-12, atol=1e-12)


def _dense_tilted(link, alpha, y, mu, v):
    "Reference (log Z, mean, var) of t(y s)^alpha N(s | mu, v): trapezoid rule on 400001 points over mu +- 40 sd."
    s = np.linspace(mu - 40 * np.sqrt(v), mu + 40 * np.sqrt(v), 400001)
    lf = alpha * E._loglink(link, y * s) + stats.norm.logpdf(s, mu, np.sqrt(v))
    w = np.exp(lf - lf.max()); m = (w @ s) / w.sum()
    return lf.max() + np.log(w.sum() * (s[1] - s[0])), m, (w @ (s - m) ** 2) / w.sum()


@pytest.mark.parametrize("link, alpha, y, mu, v", [("logistic", 1.0, 1, -100.0, 100.0), ("logistic", 1.0, 1, -400.0, 400.0),
                                                   ("probit", 0.5, 1, -100.0, 100.0), ("logistic", 0.3, -1, 117.3, 44.2),
                                                   ("logistic", 1.0, -1, 1e3, 1e4)])
def test_tilted_moments_when_the_factor_moves_the_mass_far(link, alpha, y, mu, v):
    # A factor that disagrees with its cavity moves the tilted mode many cavity sds away. Catches a quadrature window
    # fixed around the cavity mean (u in [-9, 9]), which cut the mass off: (logistic, 1, -100, 100) gave variance 20.2
    # instead of 38.3, and (probit, 0.5) 0.035 instead of 2.70. Deterministic: the reference is converged to ~1e-10.
    ref = _dense_tilted(link, alpha, y, mu, v)
    got = tilted_moments(y, mu, v, link, alpha)
    assert np.allclose(got, ref, rtol=1e-8, atol=1e-8), (got, ref)
    sc = E._moments_scalar_fn(link, alpha)(float(y), mu, v)                 # the scalar path of the EP loops
    assert np.allclose(sc, ref, rtol=1e-8, atol=1e-8), (sc, ref)


def test_ep_logistic_with_a_high_leverage_outlier():
    # 500 points of 1-d logistic data and one point at x = 40 with the "wrong" label, prior variance 100. At the fixed
    # point the outlier's cavity is N(117.3, 6.6^2) and its tilted mass sits ~7 cavity sds away. With correct tilted
    # moments EP's variance is 0.9% below the exact one (0.02760 vs 0.02786, measured with a +-30 sd window); the
    # window fixed at the cavity mean made it 0.02612, 6.2% below, with no warning. The data are fixed (not a seed),
    # so this is a deterministic check; 2.5% lies between the two.
    rng = np.random.default_rng(0)
    x = rng.standard_normal(500); y = (rng.uniform(size=500) < special.expit(4 * x)).astype(float)
    x, y = np.r_[x, 40.0], np.r_[y, 0.0]
    r = ep_logistic(x[:, None], y, 100.0)
    g = np.linspace(-1, 5, 6001)              # exact posterior on a grid: mean 1.83, sd 0.167, so +-17 sd
    lp = -np.logaddexp(0, -np.outer(g, x) * (2 * y - 1)).sum(1) - g**2 / 200
    W = np.exp(lp - lp.max()); W /= W.sum(); m = W @ g; v = W @ (g - m) ** 2
    assert r.converged and abs(r.mean[0] - m) < 0.02 * np.sqrt(v)
    assert abs(r.cov[0, 0] / v - 1) < 0.025


def test_unconverged_ep_warns():
    # Every EP function stops at n_iter; a stop before tol is reached must warn (catches a silent converged=False)
    X, y = probit_toy_data()
    xn, yn = noise_precision_data()
    for run in (lambda: ep_probit(X, y, n_iter=2), lambda: ep_logistic(X, y, n_iter=2),
                lambda: power_ep(X, y, alpha=0.5, n_iter=2), lambda: ep_noise_precision(xn, yn, n_iter=2),
                lambda: ep_clutter(E._clutter_oscillating()),               # ep_clutter's defaults oscillate here
                lambda: E.ep_glm(X, 2 * y - 1, np.eye(2), E.EPPlan("probit", n_iter=1))):   # the engine itself too
        with pytest.warns(E.EPConvergenceWarning, match="n_iter"):
            r = run()
        assert not r.converged
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", E.EPConvergenceWarning)              # converged runs stay silent
        assert ep_probit(X, y).converged and ep_clutter(E._clutter_oscillating(), damping=0.5, n_iter=300).converged
        # a run stopped on purpose by max_updates (as fig_ep_steps does) is not reported as unconverged
        assert not E.ep_glm(X, 2 * y - 1, np.eye(2), E.EPPlan("probit", n_iter=10**6, tol=1e-300, max_updates=7)).converged


def test_parallel_step_halvings_are_recorded(monkeypatch):
    # Tilted variances 50 times the cavity's make the proposed site precisions negative, so the full parallel step
    # would leave q with an indefinite precision and the step is halved; the history must count the halvings.
    X, y = probit_toy_data()
    fake = lambda link, alpha=1.0, n_quad=None: (lambda y_, mu, v: (np.zeros_like(mu), mu, 50.0 * v))
    monkeypatch.setattr(E, "_moments_fn", fake)
    with pytest.warns(E.EPConvergenceWarning):                            # one sweep cannot converge here
        r = E.ep_glm(X, 2 * y - 1, np.eye(2), E.EPPlan("probit", n_iter=1, schedule="parallel"))
    assert r.history.n_halvings.shape == (1,) and r.history.n_halvings[0] > 0
    assert np.all(np.linalg.eigvalsh(r.cov) > 0)
    monkeypatch.undo()
    assert np.all(ep_probit(X, y, schedule="parallel", damping=0.5, n_iter=200).history.n_halvings == 0)


# ---------------------------------------------------------------- ADF and EP on the 2-d probit toy

def test_single_factor_is_exact(toy):
    # with one factor the tilted distribution is the posterior: ADF and EP are exact projections
    X, y, _ = toy
    r = E._grid_posterior_2d(X[:1], y[:1], 1.0)
    for fit in (adf_probit(X[:1], y[:1]), ep_probit(X[:1], y[:1])):
        assert np.allclose(fit.mean, r[0], atol=1e-7) and np.allclose(fit.cov, r[1], atol=1e-7)
        assert abs(fit.log_evidence - r[2]) < 1e-7


def test_ep_probit_agrees_with_grid(toy):
    # Grid quadrature error < 1e-8 (checked by refinement). What remains is EP's own approximation error, which is
    # small but not zero: tolerances are 1% of a posterior sd for means, 5% for variances, 0.01 nats for log Z.
    # ADF, the same projections without cavities, fails the mean and evidence tolerances on this data set, so
    # these bounds do discriminate.
    X, y, (m, C, lz, _) = toy
    sd = np.sqrt(np.diag(C))
    ep = ep_probit(X, y, 1.0)
    assert ep.converged
    assert np.all(np.abs(ep.mean - m) < 0.01 * sd)
    assert np.allclose(np.diag(ep.cov), np.diag(C), rtol=0.05) and abs(ep.cov[0, 1] - C[0, 1]) < 0.05 * sd.prod()
    assert abs(ep.log_evidence - lz) < 0.01
    adf = adf_probit(X, y, 1.0)
    assert np.any(np.abs(adf.mean - m) > 0.01 * sd) and abs(adf.log_evidence - lz) > 0.01


def test_ep_probit_brute_force_3d(seed):
    # a 3-d problem against a 3-d grid (brute force), with a non-isotropic prior given as a vector of variances
    X, y = probit_toy_data(12, theta=(1.0, -0.5, 0.5), rng=5)
    pv = np.array([1.0, 2.0, 0.5])
    t = np.linspace(-5, 5, 81); h = t[1] - t[0]          # converged: 121 points on +-6 agree to 1e-5
    P = np.stack(np.meshgrid(t, t, t, indexing="ij"), -1).reshape(-1, 3)
    lp = stats.norm.logpdf(P, 0, np.sqrt(pv)).sum(1) + special.log_ndtr((P @ X.T) * (2 * y - 1)).sum(1)
    lz = special.logsumexp(lp) + 3 * np.log(h)
    W = np.exp(lp - special.logsumexp(lp)); m = W @ P; C = (W * (P - m).T) @ (P - m)
    ep = ep_probit(X, y, pv)
    sd = np.sqrt(np.diag(C))
    assert np.all(np.abs(ep.mean - m) < 0.03 * sd) and np.allclose(np.diag(ep.cov), np.diag(C), rtol=0.1)
    assert abs(ep.log_evidence - lz) < 0.02


def test_order_dependence_adf_not_ep(toy, seed):
    X, y, _ = toy
    rng = np.random.default_rng(seed(0))
    adf_means, ep_means, ep_lz = [], [], []
    for _ in range(5):
        p = rng.permutation(len(y))
        adf_means.append(adf_probit(X[p], y[p]).mean)
        e = ep_probit(X[p], y[p], tol=1e-10)
        ep_means.append(e.mean); ep_lz.append(e.log_evidence)
    assert np.ptp(np.array(adf_means), axis=0).max() > 1e-3          # ADF answers differ with the order
    assert np.ptp(np.array(ep_means), axis=0).max() < 1e-8            # EP fixed point does not
    assert np.ptp(ep_lz) < 1e-9


def test_adf_repeated_passes_overcount(toy):
    X, y, _ = toy
    # k passes count the likelihood k times and the prior once: the variances shrink, but more slowly than 1/k
    # (variance ratios 0.38 and 0.32 at k = 5 on this problem), towards 1/k only where the likelihood dominates the prior
    v1 = np.diag(adf_probit(X, y).cov)
    v5 = np.diag(adf_probit(X, y, order=np.tile(np.arange(len(y)), 5)).cov)
    v20 = np.diag(adf_probit(X, y, order=np.tile(np.arange(len(y)), 20)).cov)
    assert np.all(v5 / v1 < 0.5) and np.all(v5 / v1 > 1 / 5)         # shrinks, but not as fast as 1/k
    assert np.all(v20 < v5 / 2) and np.all(v20 / v1 > 1 / 20)        # keeps shrinking with more passes


def test_parallel_schedule_and_logistic(toy):
    X, y, _ = toy
    seq = ep_probit(X, y, tol=1e-10)
    par = ep_probit(X, y, schedule="parallel", damping=0.7, n_iter=500, tol=1e-10)
    assert par.converged and np.allclose(par.mean, seq.mean, atol=1e-7) and np.allclose(par.cov, seq.cov, atol=1e-7)
    r = E._grid_posterior_2d(X, y, 1.0, link="logistic")
    lg = ep_logistic(X, y)
    sd = np.sqrt(np.diag(r[1]))
    assert lg.converged and np.all(np.abs(lg.mean - r[0]) < 0.01 * sd) and abs(lg.log_evidence - r[2]) < 0.01


def test_power_ep_limits(seed):
    # alpha = 1 is EP; small alpha approaches the variational (reverse-KL) Gaussian, computed here independently by
    # minimising KL(q || p) on a 1-d grid for a one-parameter probit model.
    rng = np.random.default_rng(seed(3))
    x = rng.standard_normal((8, 1)) * 2; y = (rng.uniform(size=8) < stats.norm.cdf(0.8 * x[:, 0])).astype(float)
    e1, p1 = ep_probit(x, y, 4.0), power_ep(x, y, 4.0, alpha=1.0)
    assert np.allclose(e1.mean, p1.mean) and np.allclose(e1.cov, p1.cov)
    g = np.linspace(-10, 10, 8001)
    lp = stats.norm.logpdf(g, 0, 2.0) + special.log_ndtr(np.outer(g, x[:, 0]) * (2 * y - 1)).sum(1)
    m_vb, v_vb = alpha_projection(lp, g, 0.0)
    pa = power_ep(x, y, 4.0, alpha=1e-3)
    assert abs(pa.mean[0] - m_vb) < 0.01 * np.sqrt(v_vb) and abs(pa.cov[0, 0] / v_vb - 1) < 0.01
    assert v_vb < power_ep(x, y, 4.0, alpha=0.5).cov[0, 0] < e1.cov[0, 0]


# ---------------------------------------------------------------- clutter and damping

def test_clutter_without_clutter_is_exact(seed):
    x = clutter_data(15, theta=np.array([1.0, -2.0]), rng=seed(1))
    r = ep_clutter(x, w=0.0, prior_var=50.0)
    prec = 15 + 1 / 50.0
    ev = sum(stats.multivariate_normal(np.zeros(15), np.eye(15) + 50.0).logpdf(x[:, j]) for j in range(2))
    assert np.allclose(r.mean, x.sum(0) / prec, atol=1e-10) and np.allclose(r.cov, np.eye(2) / prec, atol=1e-12)
    assert abs(r.log_evidence - ev) < 1e-9


def test_clutter_against_quadrature(seed):
    """n = 30 points: on most data sets damped EP converges to within a small fraction of a posterior sd of the exact
    posterior (tolerances as in the probit grid test), but not on all. Over 2000 data sets (seeds 0-1999, damping 0.5,
    500 sweeps) 32 runs did not converge and 87 converged outside these tolerances (variance off by up to 98 %, once a
    fixed point 12 sds from the exact mean): 119 in 2000, 95 % upper bound 0.071. (The single-data-set version of this
    test failed at seed offset 115 of the sweep.) So 21 data sets are run and at least 12 must be converged and
    accurate: P(10 or more of 21 bad) < 5.2e-7 at the upper bound, while an implementation that is wrong on most data
    sets fails."""
    rng = np.random.default_rng(seed(11))
    good = 0
    for _ in range(21):
        x = clutter_data(30, theta=1.5, rng=rng)
        m, v, lz, _ = clutter_exact_1d(x[:, 0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", E.EPConvergenceWarning)      # counted below, not an error here
            r = ep_clutter(x, damping=0.5, n_iter=500)
        good += bool(r.converged and abs(r.mean[0] - m) < 0.05 * np.sqrt(v) and abs(r.cov[0, 0] / v - 1) < 0.1
                     and abs(r.log_evidence - lz) < 0.05)
    assert good >= 12, good


def test_damping_makes_oscillating_case_converge():
    x = E._clutter_oscillating()
    with pytest.warns(E.EPConvergenceWarning, match="damping"):         # the silent stop is reported
        und = ep_clutter(x, n_iter=300)
    dmp = ep_clutter(x, n_iter=300, damping=0.5)
    assert not und.converged
    assert np.all(und.history.max_change[-100:] > 1e-2)               # still oscillating after 200 sweeps
    assert np.ptp(und.history.mean[-100:, 0]) > 1.0                    # and the mean keeps jumping
    assert dmp.converged and dmp.history.max_change[-1] < 1e-6
    hc = dmp.history.max_change
    assert hc[-1] < hc[10] * 1e-3                                       # the history shows the decay


# ---------------------------------------------------------------- noise-precision model (seed 001, corrected)

def test_noise_precision_ep_against_quadrature(seed):
    x, y = noise_precision_data(30, rng=seed(4))
    m, v, lz, _ = noise_precision_exact(x, y)
    for match in ("mean_var", "kl"):
        r = ep_noise_precision(x, y, tilted="quadrature", match=match)
        assert r.converged
        assert abs(r.shape / r.rate - m) < 0.05 * np.sqrt(v)
        assert abs(np.sqrt(r.shape) / r.rate / np.sqrt(v) - 1) < 0.05 and abs(r.log_evidence - lz) < 0.02
    a1 = adf_noise_precision(x[:1], y[:1], tilted="quadrature")
    e1 = noise_precision_exact(x[:1], y[:1])
    assert abs(a1.shape / a1.rate - e1[0]) < 1e-8 and abs(a1.log_evidence - e1[2]) < 1e-8


def test_corrected_closed_form_equations():
    # With a very concentrated cavity (large shape) the Student-t is nearly Gaussian, so the source's closed form
    # (with the corrections) must agree with exact quadrature. The uncorrected shape update (K1 not squared)
    # does not, which is what the erratum is about.
    a, b, y, m, s2 = 400.0, 200.0, 0.9, 0.3, 0.2
    _, e1, var, _ = E.gamma_tilted_closed(y, m, s2, a, b)
    _, q1, qvar, _ = E._gamma_tilted_quad(y, m, s2, a, b)
    assert abs(e1 / q1 - 1) < 1e-4 and abs(var / qvar - 1) < 1e-2
    K = [stats.norm.pdf(y, m, np.sqrt(s2 + b / (a + j - 1))) for j in range(3)]
    shape_fixed = 1 / (K[0] * K[2] / K[1] ** 2 * (a + 1) / a - 1)
    shape_source = 1 / (K[0] * K[2] / K[1] * (a + 1) / a - 1)
    assert abs(shape_fixed - e1**2 / var) < 1e-6 * shape_fixed
    assert abs(shape_source / (q1**2 / qvar) - 1) > 0.5


def test_noise_precision_adf_order_dependence(seed):
    x, y = noise_precision_data(20, rng=seed(0))
    rng = np.random.default_rng(seed(1))
    adf = [adf_noise_precision(x, y, order=rng.permutation(20)).shape for _ in range(4)]
    ep = [ep_noise_precision(x[p], y[p], tol=1e-12).shape for p in (np.arange(20), rng.permutation(20))]
    assert np.ptp(adf) > 1e-3 and np.ptp(ep) < 1e-8


# ---------------------------------------------------------------- importance-sampling reference, real data

def test_importance_reference_within_mc_error(toy, seed):
    # 4 standard errors: a correct estimator fails with probability < 1e-4 per quantity (normal approximation)
    X, y, (m, C, lz, _) = toy
    r = importance_reference(X, y, 1.0, n_draws=20000, rng=seed(7))
    assert np.all(np.abs(r.mean - m) < 5.3 * r.mean_se) and abs(r.log_evidence - lz) < 5.3 * r.log_evidence_se   # false alarm <= 1e-6: 5.3 se covers up to 10 comparisons
    r2 = importance_reference(X, y, 1.0, n_draws=20000, rng=seed(7))
    assert np.array_equal(r.mean, r2.mean)                              # same seed, same result


def test_breast_cancer_ep_fast_and_accurate(seed):
    X, y = load_breast_cancer()
    ep_probit(X[:50], y[:50])                                           # warm up imports and caches
    t0 = time.perf_counter(); ep = ep_probit(X, y, 1.0); dt = time.perf_counter() - t0
    assert ep.converged and len(ep.history.max_change) < 20
    # the budget is 1 s on this machine; allow 3 s so that a busy shared machine does not fail the test
    assert dt < 3.0, dt
    # 20000 draws: the importance ESS fluctuates (heavy-tailed weights) and fell below 1000 at 1 seed in 20 with 10000
    ref = importance_reference(X, y, 1.0, "probit", (ep.mean, ep.cov), n_draws=20000, rng=seed(11))
    if ref.ess <= 1000:   # a precondition of the reference, not a property of EP: at 20000 draws the ESS fell to 675 at
        # seed offset 113 (long sweep); such a reference is redrawn with 4 times the draws
        ref = importance_reference(X, y, 1.0, "probit", (ep.mean, ep.cov), n_draws=80000, rng=seed(12))
    sd = np.sqrt(np.diag(ref.cov))
    assert ref.ess > 1000
    # EP within 0.1 posterior sd of the reference, allowing 5.6 of its standard errors (30 coordinates: 1e-6)
    assert np.all(np.abs(ep.mean - ref.mean) < 0.1 * sd + 5.6 * ref.mean_se)
    assert abs(ep.log_evidence - ref.log_evidence) < 0.2


# ---------------------------------------------------------------- bad input

def test_bad_input():
    X, y = probit_toy_data(10)
    with pytest.raises(ValueError, match="y"): ep_probit(X, y + 3)
    with pytest.raises(ValueError, match="y"): adf_probit(X, np.where(y > 0, 1.0, 0.5))
    with pytest.raises(ValueError, match="y must have shape"): ep_probit(X, y[:-1])
    with pytest.raises(ValueError, match="X"): ep_probit(X[:, 0], y)
    with pytest.raises(ValueError, match="X"): ep_probit(np.where(X > 1, np.nan, X), y)
    with pytest.raises(ValueError, match="prior_var"): ep_probit(X, y, prior_var=0.0)
    with pytest.raises(ValueError, match="prior_var"): ep_probit(X, y, prior_var=np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="prior_var"): ep_probit(X, y, prior_var=np.ones(3))
    with pytest.raises(ValueError, match="damping"): ep_probit(X, y, damping=1.5)
    with pytest.raises(ValueError, match="n_iter"): ep_logistic(X, y, n_iter=0)
    with pytest.raises(ValueError, match="tol"): ep_probit(X, y, tol=-1.0)
    with pytest.raises(ValueError, match="schedule"): ep_probit(X, y, schedule="random")
    with pytest.raises(ValueError, match="alpha"): power_ep(X, y, alpha=1.5)
    with pytest.raises(ValueError, match="link"): power_ep(X, y, link="cauchit")
    with pytest.raises(ValueError, match="order"): adf_probit(X, y, order=[0, 10])
    with pytest.raises(ValueError, match="w"): ep_clutter(np.zeros(5), w=-0.1)
    with pytest.raises(ValueError, match="prior_var"): ep_clutter(np.zeros(5), prior_var=-1.0)
    with pytest.raises(ValueError, match="x"): ep_clutter(np.zeros((2, 2, 2)))
    x, yy = noise_precision_data(5)
    with pytest.raises(ValueError, match="tau"): ep_noise_precision(x, yy, tau=0.0)
    with pytest.raises(ValueError, match="b0"): adf_noise_precision(x, yy, b0=-1.0)
    with pytest.raises(ValueError, match="tilted"): ep_noise_precision(x, yy, tilted="exact")
    with pytest.raises(ValueError, match="var"): tilted_moments(1, 0.0, 0.0)
    with pytest.raises(ValueError, match="cov"): m_projection_diag(np.zeros(2), np.eye(3))
    with pytest.raises(ValueError, match="logw"): moment_match_gaussian(np.zeros(3), np.array([0.0, np.nan, 0.0]))
    with pytest.raises(ValueError, match="x"): moment_match_gamma(np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="rng"): importance_reference(X, y, rng=1.5)
    with pytest.raises(ValueError, match="n_draws"): importance_reference(X, y, n_draws=1)
    with pytest.raises(ValueError, match="rng"): probit_toy_data(rng=1.5)


# ---------------------------------------------------------------- comparison with chapter 1 (Laplace, VB)

def test_grid_reference_refuses_truncating_limits():
    # the box (-1.5, 4.5)^2 cuts off the toy posterior (border only 0.5 nats below the peak; its mean would be off
    # by 0.16): refused, while the default (-7, 7)^2 (border 34 nats down) is accepted
    X, y = probit_toy_data()
    with pytest.raises(ValueError, match="truncates"):
        E._grid_posterior_2d(X, y, 1.0, lim=(-1.5, 4.5))
    E._grid_posterior_2d(X, y, 1.0)


@pytest.fixture(scope="module")
def separable(seed):
    return E.compare_separable(rng=seed(0))


def test_ep_laplace_and_vb_on_separable_example(separable):
    # exact reference: chapter 1's grid_posterior (limits placed from the Laplace fit and widened until the border
    # is >= 20 nats below the peak; tests/test_vi.py checks it against a fixed wide box to 1e-6)
    res = separable
    m, C, lz, _ = res["exact"]
    assert np.allclose(m, [14.52, 8.01], atol=0.005) and abs(lz + 4.113) < 0.0005   # not a truncated grid
    sd = np.sqrt(np.diag(C))
    err = {k: np.max(np.abs(res[k][0] - m) / sd) for k in ("EP", "Laplace", "VB")}
    assert err["EP"] < 0.05 and err["VB"] < 0.05 and err["Laplace"] > 0.5     # EP and converged VB find the mean
    assert np.all(np.diag(res["VB"][1]) < np.diag(res["EP"][1])) and np.all(np.diag(res["EP"][1]) < np.diag(C))
    assert abs(res["EP"][2] - lz) < 0.2
    assert res["VB"][2] < lz + 4.9 * res["VB_elbo_se"]                          # the ELBO is a lower bound; CLT: 4.9 se, false alarm 1e-6


def _vi_optimum_logistic(X, y, prior_scale, mean0, cov0, n_nodes=100):
    """Noise-free full-rank Gaussian VI for 2-d logistic regression with a N(0, s^2 I) prior: (mean, cov, ELBO).

    Each expected log-likelihood term depends on w only through the activation w.x ~ N(m.x, x'Sx), a 1-d
    Gauss-Hermite integral; the prior term and the entropy are closed-form. BFGS maximises this exact ELBO
    (an independent code path: no sampling, no Adam)."""
    import autograd
    import autograd.numpy as anp
    t, wq = np.polynomial.hermite.hermgauss(n_nodes)
    wq = wq / np.sqrt(np.pi)
    ys, s2 = 2 * np.asarray(y) - 1, float(prior_scale) ** 2
    def neg_elbo(p):
        m, L = p[:2], anp.array([[anp.exp(p[2]), 0.0], [p[4], anp.exp(p[3])]])
        S = anp.dot(L, L.T)
        mu, v = anp.dot(X, m) * ys, anp.sum(anp.dot(X, S) * X, 1)
        ell = -anp.sum(anp.dot(anp.logaddexp(0.0, -(mu[:, None] + anp.sqrt(2 * v)[:, None] * t)), wq))
        prior = -0.5 * (anp.dot(m, m) + anp.trace(S)) / s2 - anp.log(2 * np.pi * s2)
        return -(ell + prior + (1 + np.log(2 * np.pi)) + p[2] + p[3])
    L0 = np.linalg.cholesky(cov0)
    r = optimize.minimize(neg_elbo, np.r_[mean0, np.log(np.diag(L0)), L0[1, 0]], jac=autograd.grad(neg_elbo),
                          method="BFGS", options=dict(gtol=1e-9))
    assert r.success
    L = np.array([[np.exp(r.x[2]), 0.0], [r.x[4], np.exp(r.x[3])]])
    return r.x[:2], L @ L.T, -r.fun


def test_compare_separable_vb_is_converged(separable):
    # The VB fit must be the ELBO optimum, not wherever a fixed budget of Adam steps stopped (from N(0, I), 1500
    # steps at lr 0.05 with the other defaults end near mean (7.7, 4.3), 1.1-1.3 posterior sd short; 02_ep checks
    # it). Tolerances from runs of the same settings (5000 steps) with seeds 140-174: the means were within 0.0079
    # posterior sd of the optimum and the sds within 1.7%, so 0.02 sd and 5% are >= 2.5x the worst seen. (With the
    # former 1500 steps seed 151 - seed offset 151 of the long sweep - ended 0.034 sd short.)
    res = separable
    X, y = res["X"], res["y"]
    m_ex, C_ex, lz, _ = res["exact"]
    m, S, elbo_opt = _vi_optimum_logistic(X, y, 10.0, res["Laplace"][0], res["Laplace"][1])
    vb_m, vb_S, vb_elbo = res["VB"]
    sd = np.sqrt(np.diag(C_ex))
    assert np.all(np.abs(vb_m - m) / sd < 0.02)
    assert np.allclose(np.sqrt(np.diag(vb_S) / np.diag(S)), 1, atol=0.05)
    # ELBO estimate (4000 draws) vs the optimum: 4 standard errors, plus 0.002 for the (second-order) gap
    assert abs(vb_elbo - elbo_opt) < 4.9 * res["VB_elbo_se"] + 0.002   # CLT: 4.9 se, false alarm 1e-6
    assert elbo_opt < lz                                                      # the optimum is still a lower bound


# --- stochastic EP ---------------------------------------------------------------------------------------------------
# Exact references: identical observations (EP's sites are equal at its fixed point, so the shared site is exact),
# one observation (every method is the projection of prior x likelihood, i.e. ADF), and AEP's fixed-point equation
# recomputed here from the public `tilted_moments`.
from bayesnotes.ep import EPConvergenceWarning, stochastic_ep


@pytest.mark.parametrize("link", ["probit", "logistic"])
@pytest.mark.parametrize("schedule", ["stochastic", "averaged"])
def test_stochastic_ep_exact_on_identical_observations(seed, link, schedule):
    rng = np.random.default_rng(seed(60))
    X, y = np.repeat(rng.standard_normal((1, 3)), 15, axis=0), np.full(15, float(rng.integers(0, 2)))
    fit = ep_probit if link == "probit" else ep_logistic
    ref = fit(X, y, 2.0, n_iter=500, tol=1e-13)
    s = stochastic_ep(X, y, 2.0, link, n_epochs=150, schedule=schedule, rng=seed(61))
    assert np.allclose(s.mean, ref.mean, atol=1e-9) and np.allclose(s.cov, ref.cov, atol=1e-9)


def test_stochastic_ep_one_observation_is_adf(seed):
    rng = np.random.default_rng(seed(62))
    X, y = rng.standard_normal((1, 4)), np.array([1.])
    a = adf_probit(X, y, 1.5)
    for schedule in ("stochastic", "averaged"):
        s = stochastic_ep(X, y, 1.5, n_epochs=4, schedule=schedule, damping=1.0, rng=seed(63))   # one site: no oscillation
        assert np.allclose(s.mean, a.mean, atol=1e-12) and np.allclose(s.cov, a.cov, atol=1e-12)


def test_averaged_ep_solves_its_fixed_point_equation(seed):
    "At AEP's fixed point the shared site equals the average of the local sites computed from the cavity q / f~."
    rng = np.random.default_rng(seed(64))
    X = np.column_stack([np.ones(60), rng.standard_normal((60, 2))])
    y = (X @ np.array([0.3, 1.0, -1.5]) + rng.standard_normal(60) > 0).astype(float)
    s = stochastic_ep(X, y, 1.0, schedule="averaged", n_epochs=500, tol=1e-13)
    n = len(y)
    Pc = np.eye(3) + (n - 1) * s.site_precision
    Sc = np.linalg.inv(Pc)
    v, mu = np.einsum("ij,jk,ik->i", X, Sc, X), X @ Sc @ ((n - 1) * s.site_shift)
    _, mh, vh = tilted_moments(2 * y - 1, mu, v)
    tau, nu = 1 / vh - 1 / v, mh / vh - mu / v
    assert np.allclose((X.T * tau) @ X / n, s.site_precision, rtol=1e-9, atol=1e-11)
    assert np.allclose(X.T @ nu / n, s.site_shift, rtol=1e-9, atol=1e-11)
    P = np.eye(3) + n * s.site_precision                        # and q = p0 f~^n
    assert np.allclose(s.cov @ P, np.eye(3), atol=1e-10) and np.allclose(P @ s.mean, n * s.site_shift, atol=1e-10)


def test_stochastic_ep_seeded_and_checked():
    X, y = probit_toy_data()
    a, b = stochastic_ep(X, y, n_epochs=3, rng=5), stochastic_ep(X, y, n_epochs=3, rng=5)
    assert np.array_equal(a.mean, b.mean) and a.max_change.shape == (3,)
    assert not np.array_equal(a.mean, stochastic_ep(X, y, n_epochs=3, rng=6).mean)
    with pytest.raises(ValueError, match="link"): stochastic_ep(X, y, link="cauchit")
    with pytest.raises(ValueError, match="schedule"): stochastic_ep(X, y, schedule="parallel")
    with pytest.raises(ValueError, match="n_epochs"): stochastic_ep(X, y, n_epochs=0)
    with pytest.raises(ValueError, match="tol"): stochastic_ep(X, y, tol=-1.)
    with pytest.raises(ValueError, match="damping"): stochastic_ep(X, y, damping=0.)
    with pytest.raises(ValueError, match="y"): stochastic_ep(X, y[:-1])
    with pytest.warns(EPConvergenceWarning, match="n_epochs"): stochastic_ep(X, y, schedule="averaged", n_epochs=2)


def _sep_by_hand(X, y, prior_var, n_epochs, seed):
    "SEP written out from the definitions, with the same order: cavity, tilted moments, damped update of the site."
    n, d = X.shape
    ys, P0 = 2 * y - 1, np.eye(d) / prior_var
    L, e, iterates = np.zeros((d, d)), np.zeros(d), []
    rng = np.random.default_rng(seed)
    for _ in range(n_epochs):
        for i in rng.permutation(n):
            C = np.linalg.inv(P0 + (n - 1) * L)                      # cavity: q / f~
            v, mu = X[i] @ C @ X[i], X[i] @ C @ ((n - 1) * e)
            _, mh, vh = tilted_moments(ys[i], mu, v)
            L = (1 - 1 / n) * L + (1 / vh - 1 / v) / n * np.outer(X[i], X[i])
            e = (1 - 1 / n) * e + (mh / vh - mu / v) / n * X[i]
            iterates.append((L.copy(), e.copy()))
    return iterates


def test_stochastic_ep_matches_a_hand_written_pass(seed):
    "On distinct observations, SEP's last iterate and its second-half average equal the definitions run by hand."
    rng = np.random.default_rng(seed(65))
    X = np.column_stack([np.ones(7), rng.standard_normal((7, 2))])
    y = (rng.uniform(size=7) < 0.5).astype(float)
    its = _sep_by_hand(X, y, 1.5, 4, seed(66))
    last = stochastic_ep(X, y, 1.5, n_epochs=4, average=False, rng=seed(66))
    avg = stochastic_ep(X, y, 1.5, n_epochs=4, rng=seed(66))
    assert np.allclose(last.site_precision, its[-1][0], atol=1e-12) and np.allclose(last.site_shift, its[-1][1], atol=1e-12)
    half = its[2 * 7:]                                              # the steps of epochs 3 and 4
    assert np.allclose(avg.site_precision, np.mean([L for L, _ in half], 0), atol=1e-12)
    assert np.allclose(avg.site_shift, np.mean([e for _, e in half], 0), atol=1e-12)
    P = np.eye(3) / 1.5 + 7 * its[-1][0]                           # q = p0 f~^n, from the last iterate
    assert np.allclose(avg.last_cov @ P, np.eye(3), atol=1e-10) and np.allclose(P @ avg.last_mean, 7 * its[-1][1])
