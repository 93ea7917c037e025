"""Gaussian filters, Gaussian-filter proposals and the Rao-Blackwellised particle filter: exact identities on linear
models, the unscented transform against exact moments and Monte Carlo, guided and RBPF estimates against exact
references within their Monte Carlo error, and bad input."""
import itertools

import autograd.numpy as anp
import numpy as np
import pytest
from scipy import stats

from bayesnotes.filters import (GaussianProposalFK, OutlierSSM, RBPFModel, SwitchingLGSSM, ekf, pendulum_ssm, rbpf,
                                sigma_points, switching_example, switching_exact, ukf, unscented_transform)
from bayesnotes.smc import LinearGaussianSSM, NonlinearGaussianSSM, bootstrap_filter, bootstrap_model, nonmarkov_ssm, smc

# t quantile for a two-sided false alarm of 1e-6 with 29 and 39 degrees of freedom
T29, T39 = stats.t.ppf(1 - 5e-7, 29), stats.t.ppf(1 - 5e-7, 39)


def _linear_models():
    return [LinearGaussianSSM(A=0.9, C=1.0, Q=1.0, R=0.5, P0=1 / 0.19),
            nonmarkov_ssm(),                                      # singular Q and P0
            LinearGaussianSSM(A=[[1, 0.1], [0, 1]], C=[[1., 0], [0.5, 1], [0, 2]], Q=[[0.1, 0.02], [0.02, 0.2]],
                              R=np.diag([0.5, 1, 2.]), m0=[1, 2], P0=np.eye(2))]


@pytest.mark.parametrize("k", range(3))
def test_ekf_and_ukf_are_the_kalman_filter_on_linear_models(k):
    "Exact identity: on a linear-Gaussian model both Gaussian filters equal `kalman_filter` (to rounding)."
    ssm = _linear_models()[k]
    _, y = ssm.simulate(40, rng=k)
    kf = ssm.kalman_filter(y)
    for res in (ekf(ssm, y), ukf(ssm, y), ukf(ssm, y, alpha=0.5, beta=0.0, kappa=3.0 - ssm.dim_x),
                ukf(ssm, y, alpha=0.1, kappa=1.0)):
        assert abs(res.log_evidence - kf.log_evidence) < 1e-10
        np.testing.assert_allclose(res.log_lik_steps, kf.log_lik_steps, rtol=0, atol=1e-10)
        np.testing.assert_allclose(res.means, kf.means, rtol=0, atol=1e-10)
        np.testing.assert_allclose(res.covs, kf.covs, rtol=0, atol=1e-10)


def test_sigma_points_match_mean_and_covariance():
    m, P = np.array([0.5, -1.0, 2.0]), np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
    for a, b, kap in ((1.0, 2.0, 0.0), (1e-2, 2.0, 0.0), (0.7, 0.0, 2.0)):
        sp = sigma_points(m, P, a, b, kap)
        assert sp.points.shape == (7, 3) and np.isclose(sp.wm.sum(), 1.0)
        np.testing.assert_allclose(sp.wm @ sp.points, m, atol=1e-9)
        d = sp.points - m
        np.testing.assert_allclose((sp.wm[:, None] * d).T @ d, P, atol=1e-9)


def test_unscented_mean_of_polynomials_up_to_degree_three_is_exact():
    "A known identity: symmetric sigma points with the right covariance give exact means of quadratic and cubic maps."
    m, P = np.array([0.3, -1.0]), np.array([[1.0, 0.4], [0.4, 0.5]])
    B = np.array([[2.0, 0.3], [0.3, -1.0]])
    def g(X):   # x^T B x, x1 x2 and x1^3
        return np.column_stack([np.einsum("ni,ij,nj->n", X, B, X), X[:, 0] * X[:, 1], X[:, 0] ** 3])
    exact = [m @ B @ m + np.trace(B @ P), m[0] * m[1] + P[0, 1], m[0] ** 3 + 3 * m[0] * P[0, 0]]
    for kw in ({}, {"alpha": 0.3, "kappa": 1.0}, {"alpha": 2.0, "beta": 0.0}):
        mean, cov, cross = unscented_transform(g, m, P, **kw)
        np.testing.assert_allclose(mean, exact, rtol=1e-10)
        # and the cross-covariance of a linear part is exact: Cov(x, x1 x2) = P (m2, m1)^T for a Gaussian x
        np.testing.assert_allclose(cross[:, 1], P @ m[::-1], rtol=1e-10)


def test_unscented_transform_matches_monte_carlo_on_a_nonlinear_map(seed):
    """Polar to Cartesian, (r, theta) -> (r cos theta, r sin theta): the UT mean matches a Monte Carlo mean of 400000
    draws (5 standard errors per coordinate, two-sided, 2 comparisons: false alarm < 1.2e-6), while the linearised
    mean f(m) does not (it misses E[cos theta] = cos(m_theta) exp(-var/2) by more than 20 standard errors)."""
    m, P = np.array([1.0, 0.6]), np.diag([0.02, 0.25])
    polar = lambda X: np.column_stack([X[:, 0] * np.cos(X[:, 1]), X[:, 0] * np.sin(X[:, 1])])
    mean, _, _ = unscented_transform(polar, m, P, kappa=1.0)      # d + kappa = 3 matches the Gaussian kurtosis
    rng = np.random.default_rng(seed(1))
    Y = polar(m + rng.standard_normal((400_000, 2)) @ np.sqrt(P))
    se = Y.std(0, ddof=1) / np.sqrt(len(Y))
    assert np.all(np.abs(mean - Y.mean(0)) < 5 * se), (mean, Y.mean(0), se)
    assert np.all(np.abs(polar(m[None])[0] - Y.mean(0)) > 20 * se)


def test_unscented_transform_and_the_cubature_rule():
    """alpha = 1, kappa = 0 puts the sigma points at m +- sqrt(d) L_i with zero mean weight on the centre, as the spherical
    cubature rule (2d points, equal weights 1/(2d)): mean and cross-covariance agree for any beta, the covariance only for
    beta = 0; otherwise it gains beta (g(m) - mean)(g(m) - mean)^T. Catches a central covariance weight that drops the
    1 - alpha^2 + beta term, or a cubature claim that holds only for the mean."""
    m, P = np.array([1.0, 0.6, -0.3]), np.array([[0.3, 0.05, 0.0], [0.05, 0.25, 0.1], [0.0, 0.1, 0.4]])
    g = lambda X: np.column_stack([X[:, 0] * np.cos(X[:, 1]), X[:, 0] * np.sin(X[:, 1]), np.exp(X[:, 2])])
    d, L = len(m), np.linalg.cholesky(P)
    X = np.vstack([m + np.sqrt(d) * L.T, m - np.sqrt(d) * L.T])
    Y = g(X)
    c_mean = Y.mean(0)
    c_cov, c_cross = (Y - c_mean).T @ (Y - c_mean) / (2 * d), (X - m).T @ (Y - c_mean) / (2 * d)
    mean, cov, cross = unscented_transform(g, m, P, alpha=1.0, beta=0.0, kappa=0.0)
    np.testing.assert_allclose(mean, c_mean, rtol=1e-12)
    np.testing.assert_allclose(cov, c_cov, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cross, c_cross, rtol=1e-12, atol=1e-14)
    dev = g(m[None])[0] - c_mean
    for beta in (2.0, 0.5):
        mean, cov, cross = unscented_transform(g, m, P, alpha=1.0, beta=beta, kappa=0.0)
        np.testing.assert_allclose(mean, c_mean, rtol=1e-12)
        np.testing.assert_allclose(cross, c_cross, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(cov, c_cov + beta * np.outer(dev, dev), rtol=1e-12, atol=1e-14)
        assert np.abs(cov - c_cov).max() > 1e-3               # a real difference, not rounding
    assert sigma_points(m, P, 1.0, 2.0, 0.0).wc[0] == 2.0 and sigma_points(m, P, 1.0, 2.0, 0.0).wm[0] == 0.0


def test_ekf_jacobians_by_autograd_on_the_pendulum():
    "The EKF's prediction covariance uses the exact Jacobian of the pendulum map: F P F^T + Q at one step."
    ssm = pendulum_ssm(delta=0.05, g=9.81)
    y = np.array([[0.9], [0.8]])
    res = ekf(ssm, y)
    # redo step 1 by hand with the analytic Jacobian [[1, D], [-g D cos x1, 1]]
    m, P = res.means[0], res.covs[0]
    F = np.array([[1.0, 0.05], [-9.81 * 0.05 * np.cos(m[0]), 1.0]])
    mb, Pb = ssm.f(m[None])[0], F @ P @ F.T + ssm._LQ @ ssm._LQ.T
    H = np.array([[np.cos(mb[0]), 0.0]])
    S = H @ Pb @ H.T + 0.01
    K = Pb @ H.T / S
    np.testing.assert_allclose(res.means[1], mb + (K * (y[1] - np.sin(mb[0])))[:, 0], rtol=1e-12)
    np.testing.assert_allclose(res.covs[1], Pb - K @ S @ K.T, rtol=1e-10, atol=1e-14)


def test_guided_potentials_are_the_optimal_ones_on_a_linear_model(seed):
    "Identity: EKF, UKF and Laplace proposals are the locally optimal proposal of a linear-Gaussian model, G_t = p(y_t | x_{t-1})."
    ssm = _linear_models()[2]
    _, y = ssm.simulate(10, rng=0)
    rng = np.random.default_rng(seed(2))
    xp, x = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    for method in ("ekf", "ukf", "laplace"):
        fk = GaussianProposalFK(ssm, y, method)
        for t in (0, 4):
            want = np.broadcast_to(ssm.log_predictive(t, None if t == 0 else xp, y[t]), (6,))   # t = 0: one value
            np.testing.assert_allclose(fk.logG(t, None if t == 0 else xp, x), want, rtol=0, atol=1e-10)


def test_guided_filters_are_unbiased_for_the_kalman_evidence(seed):
    """E[Z_hat / Z] = 1 on a linear-Gaussian model. log Z_hat is biased downwards (Jensen), so compare on the exp scale:
    40 runs of N = 100, one-sample t bound at a two-sided false alarm of 1e-6 per method (3 comparisons: < 3e-6)."""
    ssm = _linear_models()[2]
    _, y = ssm.simulate(30, rng=1)
    log_z = ssm.kalman_filter(y).log_evidence
    rng = np.random.default_rng(seed(3))
    for method in ("ekf", "ukf", "laplace"):
        fk = GaussianProposalFK(ssm, y, method)
        ratio = np.exp([smc(fk, 100, rng).log_evidence - log_z for _ in range(40)])
        assert abs(ratio.mean() - 1) < T39 * ratio.std(ddof=1) / np.sqrt(40), (method, ratio.mean())


@pytest.mark.slow   # over ~10 s quiet: in `make test-slow` (keeps `make test` inside its time budget)
def test_guided_and_bootstrap_filters_estimate_the_same_likelihood(seed):
    """Pendulum (nonlinear): the EKF-, UKF- and Laplace-guided filters and the bootstrap filter estimate the same Z. With
    N = 400 and T = 30, sd(log Z_hat) is about 0.2-0.3, so Z_hat / c (c a common constant) has light tails; Welch
    two-sample z-test on the exp scale, 30 runs each (20 for the slower Laplace proposal), 5.3 standard errors
    (two-sided, 3 comparisons: false alarm < 3.6e-7, normal approximation)."""
    ssm = pendulum_ssm(r=0.05)
    _, y = ssm.simulate(30, rng=4)
    rng = np.random.default_rng(seed(4))
    lz = {name: np.array([smc(fk, 400, rng).log_evidence for _ in range(20 if name == "laplace" else 30)])
          for name, fk in (("boot", bootstrap_model(ssm, y)), ("ekf", GaussianProposalFK(ssm, y, "ekf")),
                           ("ukf", GaussianProposalFK(ssm, y, "ukf")), ("laplace", GaussianProposalFK(ssm, y, "laplace")))}
    c = np.median(lz["boot"])
    zb = np.exp(lz["boot"] - c)
    for name in ("ekf", "ukf", "laplace"):
        zg = np.exp(lz[name] - c)
        se = np.sqrt(zb.var(ddof=1) / len(zb) + zg.var(ddof=1) / len(zg))
        assert abs(zg.mean() - zb.mean()) < 5.3 * se, (name, zg.mean(), zb.mean(), se)


def _exact_by_joint_gaussian(model, y):
    """Exact filter of a 1-d switching model WITHOUT the Kalman recursion: for each regime path, the joint Gaussian of
    (x_{0:T-1}, y_{0:T-1}) built from x_t = a x_{t-1} + e_t, conditioned on each prefix y_{0:t}."""
    T, K = len(y), model.K
    yv = y[:, 0]
    lw_all, means_all, paths = [], [], list(itertools.product(range(K), repeat=T))
    for s in paths:
        a, q, c, r = (model.A[list(s), 0, 0], model.Q[list(s), 0, 0], model.C[list(s), 0, 0], model.R[list(s), 0, 0])
        G = np.zeros((T, T))          # x = G e with e ~ N(0, diag(P0, q_1, ..., q_{T-1}))
        for t in range(T):
            for u in range(t + 1):
                G[t, u] = np.prod(a[u + 1:t + 1])
        var_e = np.concatenate([[model.P0[0, 0]], q[1:]])
        Sxx = G @ np.diag(var_e) @ G.T
        mx = G[:, 0] * model.m0[0]
        Syy, Sxy, my = c[:, None] * Sxx * c[None, :] + np.diag(r), Sxx * c[None, :], c * mx
        lp = np.log(model.pi0[s[0]]) + sum(np.log(model.Pi[s[t - 1], s[t]]) for t in range(1, T))
        lw, mt = [], []
        for t in range(T):
            sl = slice(0, t + 1)
            lw.append(lp + stats.multivariate_normal(my[sl], Syy[sl, sl]).logpdf(yv[sl]))
            mt.append(mx[t] + Sxy[t, sl] @ np.linalg.solve(Syy[sl, sl], yv[sl] - my[sl]))
        lw_all.append(lw); means_all.append(mt)
    lw_all, means_all, S = np.array(lw_all), np.array(means_all), np.array(paths)
    W = np.exp(lw_all - lw_all.max(0)); W /= W.sum(0)
    from scipy.special import logsumexp
    probs = np.array([[W[S[:, t] == k, t].sum() for k in range(K)] for t in range(T)])
    return logsumexp(lw_all[:, -1]), (W * means_all).sum(0), probs


def test_switching_exact_against_joint_gaussian_conditioning():
    "Two exact computations, one by batched Kalman filters and one by conditioning joint Gaussians, agree."
    model, _, _, y = switching_example(T=6, rng=5)
    ex = switching_exact(model, y)
    log_z, means, probs = _exact_by_joint_gaussian(model, y)
    assert abs(ex.log_evidence - log_z) < 1e-9
    np.testing.assert_allclose(ex.means[:, 0], means, atol=1e-9)
    np.testing.assert_allclose(ex.regime_probs, probs, atol=1e-9)


@pytest.mark.parametrize("proposal", ["prior", "optimal"])
def test_rbpf_against_exact_enumeration(seed, proposal):
    """2 regimes, T = 8: 256 Kalman filters give the exact answer. 30 RBPF runs with N = 300: E[Z_hat / Z] = 1 within the
    t bound (false alarm 1e-6), and the filtered mean and P(s_t = 2 | y) at each of the 8 steps, averaged over runs,
    within 6 standard errors of the exact values (16 comparisons at 2e-9 each under normality). The O(1/N) bias of a
    self-normalised estimate is small next to the standard error of a 30-run mean: over 200 runs the mean deviations
    from the exact values were below 0.6 of it, their own noise included. Total false alarm < 2e-6."""
    model, _, _, y = switching_example(T=8, rng=6)
    ex = switching_exact(model, y)
    rng = np.random.default_rng(seed(5 if proposal == "prior" else 6))
    runs = [rbpf(model, y, 300, rng, proposal=proposal) for _ in range(30)]
    ratio = np.exp([r.log_evidence - ex.log_evidence for r in runs])
    assert abs(ratio.mean() - 1) < T29 * ratio.std(ddof=1) / np.sqrt(30), ratio.mean()
    for est, exact in ((np.array([r.means[:, 0] for r in runs]), ex.means[:, 0]),
                       (np.array([r.regime_probs[:, 1] for r in runs]), ex.regime_probs[:, 1])):
        se = est.std(0, ddof=1) / np.sqrt(30) + 1e-12          # + tiny: steps where every particle agrees exactly
        assert np.all(np.abs(est.mean(0) - exact) < 6 * se + 1e-9), (est.mean(0), exact, se)


def test_bootstrap_filter_on_the_joint_switching_state(seed):
    "The SwitchingLGSSM as a plain StateSpaceModel: the bootstrap filter's Z_hat is unbiased for the exact Z (t bound, 1e-6)."
    model, _, _, y = switching_example(T=8, rng=6)
    log_z = switching_exact(model, y).log_evidence
    rng = np.random.default_rng(seed(7))
    ratio = np.exp([bootstrap_filter(model, y, 500, rng).log_evidence - log_z for _ in range(30)])
    assert abs(ratio.mean() - 1) < T29 * ratio.std(ddof=1) / np.sqrt(30), ratio.mean()


def test_outlier_model_simulates_the_stated_fraction(seed):
    "Outlier fraction: 4000 observations with p = 0.4; those outside the Gaussian's reach (|y| > 1.5) estimate 0.4 * 1/4."
    base = pendulum_ssm(r=0.05)
    out = OutlierSSM(base, p=0.4)
    x = np.zeros((4000, 2))
    y = out.sample_obs(np.random.default_rng(seed(8)), 0, x)[:, 0]
    frac = np.mean(np.abs(y) > 1.5)          # sin(0) + N(0, 0.05^2) never exceeds 1.5; uniform on [-2, 2] does w.p. 1/4
    p = 0.4 / 4
    assert abs(frac - p) < 5 * np.sqrt(p * (1 - p) / 4000)      # 5 binomial SEs: false alarm < 6e-7


def test_bad_input():
    lin = _linear_models()[0]
    y = np.zeros((5, 1))
    with pytest.raises(ValueError, match="ssm"):
        ekf(object(), y)
    with pytest.raises(ValueError, match="y"):
        ukf(lin, np.zeros((5, 2)))
    with pytest.raises(ValueError, match="y"):
        ekf(lin, [np.nan, 1.0])
    with pytest.raises(ValueError, match="alpha"):
        ukf(lin, y, alpha=0.0)
    with pytest.raises(ValueError, match="kappa"):
        ukf(lin, y, kappa=-1.5)                 # d + lambda = alpha^2 (d + kappa) = -0.5
    with pytest.raises(ValueError, match="P"):
        sigma_points([0.0, 0.0], [[1.0, 2.0], [2.0, 1.0]])      # indefinite
    with pytest.raises(ValueError, match="m"):
        sigma_points([0.0, np.inf], np.eye(2))
    plain = NonlinearGaussianSSM(lambda z: np.column_stack([np.sin(z[:, 0])]), lambda z: z, 1.0, 1.0, [0.0])
    with pytest.raises(ValueError, match="autograd"):
        ekf(plain, y)
    with pytest.raises(ValueError, match="p"):
        OutlierSSM(pendulum_ssm(), p=1.0)
    with pytest.raises(ValueError, match="low"):
        OutlierSSM(pendulum_ssm(), low=2.0, high=-2.0)
    with pytest.raises(ValueError, match="method"):
        GaussianProposalFK(lin, y, method="iekf")
    with pytest.raises(ValueError, match="n_newton"):
        GaussianProposalFK(lin, y, method="laplace", n_newton=0)
    with pytest.raises(ValueError, match="P0 must be positive definite"):
        GaussianProposalFK(nonmarkov_ssm(), y)                    # singular P0 and Q: no proposal density
    with pytest.raises(ValueError, match="Q must be positive definite"):
        GaussianProposalFK(LinearGaussianSSM(A=np.eye(2), C=[[1.0, 0.0]], Q=np.ones((2, 2)), R=1.0, P0=np.eye(2)), y)
    with pytest.raises(ValueError, match="delta"):
        pendulum_ssm(delta=0.0)
    good = dict(Pi=[[0.9, 0.1], [0.2, 0.8]], A=[[[0.9]], [[0.5]]], C=[[[1.0]], [[1.0]]], Q=[[[1.0]], [[2.0]]],
                R=[[[0.5]], [[0.5]]], m0=[0.0], P0=[[1.0]])
    with pytest.raises(ValueError, match="Pi"):
        SwitchingLGSSM(**{**good, "Pi": [[0.9, 0.2], [0.2, 0.8]]})
    with pytest.raises(ValueError, match="Q"):
        SwitchingLGSSM(**{**good, "Q": [[[1.0]], [[-2.0]]]})
    with pytest.raises(ValueError, match="C"):
        SwitchingLGSSM(**{**good, "C": [[[1.0, 0.0]], [[1.0, 0.0]]]})
    with pytest.raises(ValueError, match="pi0"):
        SwitchingLGSSM(**good, pi0=[0.5, 0.6])
    model = SwitchingLGSSM(**good)
    with pytest.raises(ValueError, match="y"):
        switching_exact(model, np.zeros(30))                     # 2^30 sequences
    with pytest.raises(ValueError, match="proposal"):
        RBPFModel(model, y, proposal="bootstrap")
    with pytest.raises(ValueError, match="model"):
        rbpf(lin, y, 10)
    with pytest.raises(ValueError, match="N"):
        rbpf(model, y, 0)
