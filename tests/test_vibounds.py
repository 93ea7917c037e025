"""Tests for bayesnotes.vibounds (bounds beyond the ELBO: IWAE, CUBO, EUBO by quadrature and Monte Carlo; chi-VI).

References are exact: the closed-form evidence and posterior of the mixture-prior model, a closed-form CUBO_2 for a
Gaussian-mixture posterior and a Gaussian q (derived below, independent of the module's quadrature), 2-d adaptive
quadrature for IWAE_2, and the Gaussian-mean model of the VI chapter, where q = p is possible and every bound is exact.
Monte Carlo comparisons use 5.3 standard errors (two-sided 1.2e-7 per comparison by the CLT); each test states its
count, so every test's false-alarm probability is below 1e-6. Seeds come from the `seed` fixture.
"""
import numpy as np
import pytest
from scipy import integrate, optimize, special

import autograd.numpy as anp

from bayesnotes.vi import MeanFieldGaussian, FullRankGaussian, elbo, iwae_bound, _gaussian_mean_model
from bayesnotes.vibounds import (bounds_quadrature, chivi, cubo, eubo, fig_bounds, fig_chivi, mixture_prior_model,
                                 _cubo_step)

LIM = (-12.0, 12.0)
Q_ELBO = (0.93, 0.35)      # (mean, sd) near the ELBO fit of the notebook: sits on the right mode
Q_CHI = (0.43, 0.90)       # near the chi-VI fit: covers both modes
Q_OFF = (-0.2, 0.6)        # neither


def gauss(m, s):
    return MeanFieldGaussian(1, np.r_[m, np.log(s)])


def cubo2_closed_form(post, m, s):
    """CUBO_2 of q = N(m, s^2) for a Gaussian-mixture posterior sum_j w_j N(m_j, v_j) with evidence Z:
    E_q[w^2] = Z^2 int p^2 / q = Z^2 sum_jk w_j w_k s / sqrt(v_j v_k A) exp(-(C - B^2 / A) / 2), with
    A = 1/v_j + 1/v_k - 1/s^2 (> 0, else infinite), B = m_j/v_j + m_k/v_k - m/s^2, C = m_j^2/v_j + m_k^2/v_k - m^2/s^2."""
    w, mu, v = post.weights, post.means, post.variances
    W, M, V = w[:, None] * w[None], (mu[:, None], mu[None]), (v[:, None], v[None])
    A = 1 / V[0] + 1 / V[1] - 1 / s**2
    if np.any(A <= 0):
        return np.inf
    B = M[0] / V[0] + M[1] / V[1] - m / s**2
    C = M[0]**2 / V[0] + M[1]**2 / V[1] - m**2 / s**2
    terms = np.log(W) + np.log(s) - 0.5 * np.log(V[0] * V[1] * A) - 0.5 * (C - B**2 / A)
    return post.log_evidence + 0.5 * special.logsumexp(terms)


# ---------------------------------------------------------------- the model
def test_mixture_model_exact_posterior_and_evidence(seed):
    t, post = mixture_prior_model()
    z = np.linspace(-4, 4, 17)[:, None]
    v, g = t.value_and_grad_batch(z)
    assert np.allclose(v - post.logpdf(z[:, 0]), post.log_evidence, atol=1e-10)
    assert np.allclose(g[:, 0], (t.fn(z + 1e-6) - t.fn(z - 1e-6)) / 2e-6, atol=1e-6)
    # one prior component: the mixture model is the Gaussian-mean model of the VI chapter (independent closed form)
    x, tg, mN, vN, logZ = _gaussian_mean_model(N=7, sigma=1.3, tau=2.0, theta=0.4, seed=3)
    t1, p1 = mixture_prior_model(x, 1.3, [1.0], [0.0], [2.0])
    assert abs(p1.log_evidence - logZ) < 1e-10 and abs(p1.means[0] - mN) < 1e-12 and abs(p1.variances[0] - vN) < 1e-12
    assert np.allclose(t1.fn(z), tg.fn(z), atol=1e-10)
    # exact draws: mean and P(z < 0) within 5.3 se (2 comparisons: < 3e-7)
    d = post.sample(40000, rng=seed(0))[:, 0]
    assert abs(d.mean() - post.mean) < 5.3 * np.sqrt(post.var / d.size)
    p0 = float(post.cdf(0.0))
    assert abs(np.mean(d < 0) - p0) < 5.3 * np.sqrt(p0 * (1 - p0) / d.size)


# ---------------------------------------------------------------- exact bounds
@pytest.mark.parametrize("ms", [Q_ELBO, Q_CHI, Q_OFF])
def test_quadrature_bounds_exact_identities_and_ordering(ms):
    t, post = mixture_prior_model()
    q = gauss(*ms)
    b = bounds_quadrature(t, q, LIM, K=(1, 2, 5, 50))
    assert abs(b.log_evidence - post.log_evidence) < 1e-9
    assert abs(b.iwae[0] - b.elbo) < 1e-7                                   # Frullani route, K = 1
    assert abs(b.cubo - cubo2_closed_form(post, *ms)) < 1e-8                 # closed form above
    # ELBO and EUBO from their definitions with the exact posterior: E_q log p(x,z) + H[q]; log Z + KL(p || q)
    Hq = 0.5 * np.log(2 * np.pi * np.e * ms[1]**2)
    e = integrate.quad(lambda z: np.exp(q.log_prob(np.array([z]))) * t.fn(np.array([z])), *LIM, points=[-0.8, 0.9],
                       limit=200)[0] + Hq
    kl = integrate.quad(lambda z: np.exp(post.logpdf(z)) * (post.logpdf(z) - q.log_prob(np.array([z]))), *LIM,
                        points=[-0.8, 0.9], limit=200)[0]
    assert abs(b.elbo - e) < 1e-8 and abs(b.eubo - (post.log_evidence + kl)) < 1e-8
    # the exact ordering, and D_1 <= D_2 between the two upper bounds
    assert np.all(np.diff(np.r_[b.iwae, b.log_evidence]) > 0)
    assert b.cubo > b.log_evidence and b.eubo > b.log_evidence
    assert b.eubo - b.log_evidence <= 2 * (b.cubo - b.log_evidence)
    # CUBO_n increases with n
    cn = [bounds_quadrature(t, q, LIM, K=(), n=n).cubo for n in (1.2, 2.0, 3.0)]
    assert cn[0] < cn[1] < cn[2] and abs(cn[1] - b.cubo) < 1e-10


# q narrower than the posterior (on one mode), about as wide, and wider (sd 1.5 and 2.5 against the posterior's 0.87).
# The interval follows fig_bounds' rule for a q centred at the posterior mean. Before the fix the Frullani integral was
# cut off at u = 79 while, for wide q, log w has a left tail reaching u ~ 2500: IWAE_1 was -22.56 against an ELBO of
# -24.26 at sd 2.5, and IWAE_2 -13.335 against a Monte Carlo -13.371 +- 0.009.
Q_WIDE = [Q_ELBO, Q_CHI, (0.43, 1.5), (0.43, 2.5)]


def wide_lim(s):
    return (-6 - 12 * s, 6 + 12 * s)


@pytest.mark.parametrize("ms", Q_WIDE)
def test_iwae_one_is_the_elbo_for_narrow_and_wide_q(ms):
    # the Frullani route at K = 1 against the ELBO by adaptive quadrature of E_q[log w], both exact up to quadrature
    t, post = mixture_prior_model()
    b = bounds_quadrature(t, gauss(*ms), wide_lim(ms[1]), K=(1, 2))
    assert abs(b.iwae[0] - b.elbo) < 1e-7
    assert b.iwae[0] < b.iwae[1] < b.log_evidence


@pytest.mark.parametrize("ms", Q_WIDE)
def test_iwae_two_samples_against_2d_quadrature_and_monte_carlo(ms, seed):
    # IWAE_2 = E log((w1 + w2) / 2) as a 2-d integral, by a product rule of 1500 x 1500 nodes (composite 15-point
    # Gauss-Legendre, 100 panels on q's mean +- 9.5 sd: a different rule from the module's 20-point panels on +- 10 sd)
    t, post = mixture_prior_model()
    m, s = ms
    b = bounds_quadrature(t, gauss(m, s), wide_lim(s), K=2)
    x, wts = np.polynomial.legendre.leggauss(15)
    edges = np.linspace(m - 9.5 * s, m + 9.5 * s, 101)
    h = 0.5 * np.diff(edges)
    z = (0.5 * (edges[:-1] + edges[1:])[:, None] + h[:, None] * x).ravel()
    lq = -0.5 * ((z - m) / s)**2 - np.log(s) - 0.5 * np.log(2 * np.pi)
    lw = t.fn(z[:, None]) - lq
    wq = np.outer(h, wts).ravel() * np.exp(lq)
    ref = wq @ (np.logaddexp(lw[:, None], lw[None]) - np.log(2)) @ wq
    assert abs(wq.sum() - 1) < 1e-12 and abs(b.iwae[0] - ref) < 1e-7
    # Monte Carlo: iwae_bound averages 200000 independent log((w1 + w2) / 2); log w is a quadratic in z under q, so
    # every moment is finite and the CLT holds: 5.3 se, two-sided false alarm 1.2e-7 for each of the 4 cases
    est = iwae_bound(t, gauss(m, s), 2, 200000, rng=seed(0))
    assert abs(est.value - b.iwae[0]) < 5.3 * est.stderr


def test_every_bound_is_exact_at_q_equal_p(seed):
    _, tg, mN, vN, logZ = _gaussian_mean_model()
    qp = MeanFieldGaussian.from_moments([mN], vN)
    b = bounds_quadrature(tg, qp, (mN - 12 * np.sqrt(vN), mN + 12 * np.sqrt(vN)), K=(1, 10))
    assert np.allclose([b.log_evidence, b.elbo, *b.iwae, b.cubo, b.eubo], logZ, atol=1e-8)
    for est in (cubo(tg, qp, 2, 50, rng=seed(0)), cubo(tg, qp, 3.5, 50, rng=seed(1)),
                eubo(tg, qp, qp.sample(50, rng=seed(2)))):
        assert abs(est.value - logZ) < 1e-9 and est.stderr < 1e-9          # every weight equals p(x)


# ---------------------------------------------------------------- Monte Carlo estimators against the exact values
def test_monte_carlo_estimators_match_quadrature(seed):
    t, post = mixture_prior_model()
    q = gauss(*Q_CHI)
    b = bounds_quadrature(t, q, LIM, K=(5,))
    pairs = [(elbo(t, q, 40000, rng=seed(0)), b.elbo), (iwae_bound(t, q, 5, 8000, rng=seed(1)), b.iwae[0]),
             (eubo(t, q, post.sample(40000, rng=seed(2))), b.eubo)]
    for est, exact in pairs:                                                # 4 comparisons at 5.3 se: < 5e-7
        assert abs(est.value - exact) < 5.3 * est.stderr
    # w^2 is bounded under this q (it is wider than both posterior components), so the CLT applies; the downward
    # bias of the log of a mean is (n/2) se^2 to leading order (delta method), allowed for on the low side
    c = cubo(t, q, 2, 200000, rng=seed(3))
    assert b.cubo - 5.3 * c.stderr - c.stderr**2 < c.value < b.cubo + 5.3 * c.stderr


def test_cubo_estimate_is_biased_downwards_and_the_bias_shrinks_with_draws(seed):
    t, post = mixture_prior_model()
    q = gauss(*Q_CHI)
    exact = cubo2_closed_form(post, *Q_CHI)
    rng = np.random.default_rng(seed(0))
    means = []
    for S in (4, 64):
        vals = np.array([cubo(t, q, 2, S, rng=rng).value for _ in range(3000)])
        means.append((vals.mean(), vals.std(ddof=1) / np.sqrt(vals.size)))
    (m4, se4), (m64, se64) = means
    # Jensen: E[estimate] < CUBO_2. Measured over 3000 replicates (Var(w^2) / E[w^2]^2 = 1.35 under this q), the
    # bias is 0.15 nats at S = 4 (replicate-mean se 0.009) and 0.003 at S = 64 (se 0.0014), so the first two one-sided
    # checks have margins of more than 10 se; 3 comparisons at 5.3 se: false alarm < 2e-7
    assert m4 + 5.3 * se4 < exact
    assert m4 + 5.3 * np.hypot(se4, se64) < m64
    assert m64 < exact + 5.3 * se64


# ---------------------------------------------------------------- chi-VI
def test_cubo_step_gradient_is_a_positive_multiple_of_the_exact_gradient(seed):
    t, post = mixture_prior_model()
    q = gauss(*Q_OFF)
    rng = np.random.default_rng(seed(0))
    G = np.array([_cubo_step(t, q, rng.standard_normal((40, 1)), 2.0)[0] for _ in range(4000)])
    h = 1e-5
    f = lambda p: cubo2_closed_form(post, p[0], np.exp(p[1]))
    p0 = np.r_[Q_OFF[0], np.log(Q_OFF[1])]
    exact = np.array([(f(p0 + h * e) - f(p0 - h * e)) / (2 * h) for e in np.eye(2)])
    mean, se = G.mean(0), G.std(0, ddof=1) / np.sqrt(len(G))
    # E[g] = c V grad CUBO_2 with one scalar c V = E[1 / mean_B w^2] E[w^2] >= 1 (Jensen): the component orthogonal to
    # the exact gradient must vanish (5.3 se, two-sided) and the component along it must be at least the exact norm
    # (c V is about 5.7 here: a margin of ~16 se over the one-sided 5.3 se); 2 comparisons, false alarm < 2e-7
    u = exact / np.linalg.norm(exact)
    perp = np.array([-u[1], u[0]])
    Gp = G @ perp
    assert abs(Gp.mean()) < 5.3 * Gp.std(ddof=1) / np.sqrt(len(G))
    along = G @ u
    assert along.mean() - 5.3 * along.std(ddof=1) / np.sqrt(len(G)) > 0.999 * np.linalg.norm(exact)


def test_chivi_reaches_the_exact_cubo_minimiser_and_over_covers(seed):
    t, post = mixture_prior_model()
    f = lambda p: cubo2_closed_form(post, p[0], np.exp(p[1]))
    opt = optimize.minimize(f, [post.mean, 0.5 * np.log(post.var)], method="Nelder-Mead",
                            options=dict(xatol=1e-9, fatol=1e-12))
    m_opt, s_opt = opt.x[0], np.exp(opt.x[1])
    # the exact minimiser over-covers: wider than the posterior, and its 90% interval holds more than 90%
    assert s_opt > np.sqrt(post.var) + 0.02
    assert post.cdf(m_opt + 1.645 * s_opt) - post.cdf(m_opt - 1.645 * s_opt) > 0.92
    # the stochastic fit: Polyak-Juditsky standard errors of the averaged iterate, sqrt(diag(H^-1 Sigma H^-1) / n_avg),
    # H the exact Hessian in (m, log s), Sigma the covariance of one step's gradient at the optimum; 6.9 se per
    # parameter (5.3 se, two-sided 1.2e-7, times 1.3 for Adam and the finite run, as in tests/test_vi.py): < 3e-7
    res = chivi(t, rng=seed(1))
    h = 1e-4
    E = np.eye(2) * h
    H = np.array([[(f(opt.x + a + b) - f(opt.x + a - b) - f(opt.x - a + b) + f(opt.x - a - b)) / (4 * h * h)
                   for b in E] for a in E])
    rng = np.random.default_rng(seed(2))
    q_opt = gauss(m_opt, s_opt)
    G = np.array([_cubo_step(t, q_opt, rng.standard_normal((100, 1)), 2.0)[0] for _ in range(2000)])
    Hi = np.linalg.inv(H)
    se = np.sqrt(np.diag(Hi @ np.cov(G.T) @ Hi) / 1500)
    got = np.r_[res.q.mean[0], np.log(res.q.scale[0])]
    assert np.all(np.abs(got - opt.x) < 6.9 * se), (got, opt.x, se)
    # and the ADVI (ELBO) fit under-covers: 90% interval holds < 0.8 (its exact optimum holds 0.65)
    from bayesnotes.vi import advi
    a = advi(t, rng=seed(3))
    ma, sa = a.q.mean[0], a.q.scale[0]
    assert sa < np.sqrt(post.var) and post.cdf(ma + 1.645 * sa) - post.cdf(ma - 1.645 * sa) < 0.8


# ---------------------------------------------------------------- chi-VI start and its failure modes (review 01b_01c, items 1-2)
def test_chivi_default_start_recovers_a_far_gaussian_target_and_a_far_start_is_flagged(seed):
    """Catches the old default (start at N(0, 1)): on a normalised N(3, 0.3^2) target it walked away from the target
    (fit mean -0.89 at the review's seed 1) with per-step CUBO estimates far below log p(x) = 0, silently. The new
    default starts from a widened ELBO fit and must recover the target; the old start must trigger the warning."""
    import warnings
    from bayesnotes.core import ConvergenceWarning
    from bayesnotes.targets import gaussian_target
    t = gaussian_target([3.0], [[0.09]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)             # the default fit must not warn
        res = chivi(t, n_iter=1000, rng=seed(0))
    # CUBO_2 gap 0.5 log(1 + chi^2): 0.05 sd off in the mean or 5% off in the scale costs ~1e-3 nats, while the
    # averaged iterate's errors are ~0.01 sd (the same fit on the Gaussian-mean model in the notebook): deterministic margins
    assert abs(res.q.mean[0] - 3.0) < 0.05 * 0.3 and abs(res.q.scale[0] / 0.3 - 1) < 0.05
    assert res.final_cubo.value >= res.elbo_floor.value - 4 * np.hypot(res.final_cubo.stderr, res.elbo_floor.stderr)
    # The old start ends far from the target at every seed tried (fit mean between -2 and 0.9 at 300 of 300 offsets;
    # the target is N(3, 0.3^2)), and the check warns exactly when the CUBO estimate lies below the ELBO floor: at 281 of
    # 300 offsets. At the other 19 (e.g. offset 87) the run ended wide (scale 1.0-2.2) with a CUBO estimate 1.2-2.6
    # above the floor: a poor q whose bounds do not contradict each other, which this check cannot see. So three
    # starts, and at least one must warn: false alarm (19/300)^3 = 2.5e-4 (8e-4 at the 95% upper bound of the rate).
    warned = []
    for k in range(3):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always", ConvergenceWarning)
            old = chivi(t, start="standard", n_iter=1000, rng=np.random.SeedSequence([seed(0), k]))
        flagged = any(issubclass(x.category, ConvergenceWarning) and "below an ELBO estimate" in str(x.message) for x in w)
        assert abs(old.q.mean[0] - 3.0) > 1.5, old.q.mean            # far from the target, flagged or not
        assert flagged == (old.final_cubo.value < 0), (flagged, old.final_cubo)   # flagged ones lie below log p(x) = 0
        warned.append(flagged)
    assert any(warned), warned


def test_cubo_step_in_log_space_and_no_overlap_error(seed):
    """The cross-fitted gradient computed half by half in log space equals the direct formula where that is safe, and
    where one half's weights underflow against the other's (the old code divided by 0 and then blamed the learning
    rate) chivi stops with an error that names the cause."""
    from bayesnotes.targets import gaussian_target
    t, post = mixture_prior_model()
    q = gauss(*Q_OFF)
    eps = np.random.default_rng(seed(0)).standard_normal((40, 1))
    g, val = _cubo_step(t, q, eps, 2.0)
    from bayesnotes.vi import path_terms
    G, lp = path_terms(t, q, eps)
    a = 2.0 * (lp - q.log_prob(q.transform(eps)))
    e = np.exp(a - a.max())
    ref = 0.5 * ((e[:20, None] * G[:20]).mean(0) / e[20:].mean() + (e[20:, None] * G[20:]).mean(0) / e[:20].mean())
    assert np.allclose(g, ref, rtol=1e-10, atol=0) and np.isclose(val, (a.max() + np.log(e.mean())) / 2, rtol=1e-12)
    # the review's case: N(10 * 1, 0.01 I) in d = 10 from N(0, I); the halves' log-means of w^2 differ by hundreds of nats
    t10 = gaussian_target(np.full(10, 10.0), 0.01 * np.eye(10))
    with pytest.raises(ValueError, match="does not overlap the target"):
        chivi(t10, start="standard", n_iter=50, rng=seed(1))
    # the default start has no such problem there: it recovers the target (same margins as above, sd 0.1)
    res = chivi(t10, n_iter=1000, rng=seed(2), n_check=0)
    assert np.all(np.abs(res.q.mean - 10.0) < 0.05 * 0.1) and np.all(np.abs(res.q.scale / 0.1 - 1) < 0.05)


# ---------------------------------------------------------------- bad input
def test_bad_input(seed):
    t, post = mixture_prior_model()
    q = gauss(*Q_CHI)
    with pytest.raises(ValueError, match="n must be > 1"):
        cubo(t, q, n=1.0)
    with pytest.raises(ValueError, match="n_mc"):
        cubo(t, q, n_mc=1, rng=seed(0))
    with pytest.raises(ValueError, match="q must be"):
        cubo(t, "gauss")
    with pytest.raises(ValueError, match="draws"):
        eubo(t, q, np.zeros((10, 2)))
    with pytest.raises(ValueError, match="draws"):
        eubo(t, q, np.full((10, 1), np.inf))
    with pytest.raises(ValueError, match="lim"):
        bounds_quadrature(t, q, (-2.0, 2.0))
    with pytest.raises(ValueError, match="lim"):
        bounds_quadrature(t, q, (np.nan, 12.0))
    with pytest.raises(ValueError, match="lim"):                           # CUBO_2 infinite: s^2 < v / 2
        bounds_quadrature(t, gauss(0.9, 0.2), LIM)
    with pytest.raises(ValueError, match="one-dimensional"):
        bounds_quadrature(t, FullRankGaussian(2), LIM)
    with pytest.raises(ValueError, match="K"):
        bounds_quadrature(t, q, LIM, K=(0,))
    with pytest.raises(ValueError, match="n must be > 1"):
        chivi(t, n=1.0)
    with pytest.raises(ValueError, match="n_mc"):
        chivi(t, n_mc=2)
    with pytest.raises(ValueError, match="dim"):
        chivi(lambda z: -anp.sum(z**2))
    with pytest.raises(ValueError, match="start"):
        chivi(t, start="prior")
    with pytest.raises(ValueError, match="spread"):
        chivi(t, spread=-1.0)
    with pytest.raises(ValueError, match="n_check"):
        chivi(t, n_check=1)
    for bad, name in ((dict(sigma=-1.0), "sigma"), (dict(sds=(0.5, 0.0)), "sds"), (dict(weights=(1.0,)), "weights"),
                      (dict(x=[0.1, np.nan]), "x"), (dict(means=(0.0, np.inf)), "means")):
        with pytest.raises(ValueError, match=name):
            mixture_prior_model(**bad)
    with pytest.raises(ValueError, match="n"):
        post.sample(0)
