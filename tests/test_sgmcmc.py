"""Tests of bayesnotes.sgmcmc: the minibatch gradient estimate, the exact transition laws of SGLD, pSGLD and SGHMC, their
stationary variances on Gaussian targets against the closed forms (3) and (6) of the notebook, the step schedule, the
sweep's bookkeeping, and input validation.

Statistical bounds. A long-run variance from a chain started in its stationary law is the mean of x_t^2 of a stationary
Gaussian (V)AR(1) process; its standard error is computed exactly from the autocovariances (no estimate), and the bound is
5.5 standard errors. The statistic is a mean of thousands of effectively independent squares, so its skewness is below
0.05 and the two-sided tail beyond 5.5 SEs stays below 1e-7 per comparison (normal: 3.8e-8). Where the innovations are
not Gaussian (minibatch noise), the spread over independent chains gives a Student-t bound instead. Transition checks
standardise every update with the exact mean and variance of its Gaussian noise and test the residuals for N(0, 1)."""
import inspect

import numpy as np
import pytest
from scipy import linalg, stats

from bayesnotes.sgmcmc import (MinibatchModel, cv_grad, gaussian_mean_model, logistic_example, logistic_model,
                               posterior_mode, psgld, sghmc, sghmc_variance, sgld, sgld_cv, sgld_variance, step_size_sweep)
from bayesnotes.targets import logistic_regression

Z = 5.5                                         # standard errors allowed for an exactly known SE (see the docstring)


def _gaussian(noise_sd=(1.0, 2.0), n=50):
    "The Gaussian-mean example (fixed data): two independent coordinates with different posterior precisions."
    y = np.random.default_rng(2024).normal(1.0, 1.5, size=(n, 2))
    return gaussian_mean_model(y, prior_sd=2.0, noise_sd=noise_sd)


def _se_mean_square(gamma, n, n_chains):
    "Exact SE of the mean of x_t^2 over n_chains independent stationary Gaussian chains of length n with autocovariances gamma[0..n-1]."
    k = np.arange(1, n)
    var_sum = 2 * (n * gamma[0] ** 2 + 2 * np.sum((n - k) * gamma[1:n] ** 2))     # Var(sum_t x_t^2) for one chain
    return np.sqrt(var_sum / n ** 2 / n_chains)


# ---------------------------------------------------------------- the minibatch gradient

def test_minibatch_gradient_is_unbiased_with_the_exact_variance(seed):
    "Mean and variance of 20000 estimates against the full gradient and N^2 / n Var_i(per-example gradient)."
    gm = _gaussian()
    th = np.array([[0.3, -0.2]])
    R, n, N = 20000, 7, 50
    G = gm.model.grad(np.repeat(th, R, axis=0), batch_size=n, rng=seed(1))
    exact = gm.model.grad(th)[0]
    v = gm.noise_var / n                                                   # variance of one estimate, exact
    # its fourth central moment, exact: the noise is (N/n) times a sum of n iid draws u from the centred y / sigma^2
    u = gm.model.data[0] / np.array([1.0, 4.0])
    u = u - u.mean(0)
    mu4 = (N / n) ** 4 * (n * np.mean(u ** 4, 0) + 3 * n * (n - 1) * np.mean(u ** 2, 0) ** 2)
    # 2 means and 2 variances, each within 5.5 SEs (the sample variance's SE is sqrt((mu4 - v^2) / R) to O(1/R));
    # 4 comparisons, false alarm < 2e-7
    assert np.all(np.abs(G.mean(0) - exact) < Z * np.sqrt(v / R)), (G.mean(0), exact)
    assert np.all(np.abs(G.var(0) - v) < Z * np.sqrt((mu4 - v ** 2) / R)), (G.var(0), v)

def test_full_batch_gradient_and_target_match_closed_forms():
    "MinibatchModel of logistic regression = targets.logistic_regression (values, gradients), and the Gaussian model's -P (theta - mean)."
    X, y = logistic_example(300)
    mod, t = logistic_model(X, y, 1.5), logistic_regression(X, y, 1.5)
    W = np.random.default_rng(0).standard_normal((6, 3))
    v, g = t.value_and_grad_batch(W)
    assert np.allclose(mod.grad(W), g, atol=1e-9)
    assert np.allclose(mod.target().value_and_grad_batch(W)[0], v, atol=1e-9)
    assert np.isclose(mod.target().logdensity(W[0]), v[0], atol=1e-9)
    gm = _gaussian()
    assert np.allclose(gm.model.grad(W[:, :2]), -gm.precision * (W[:, :2] - gm.mean), atol=1e-10)


# ---------------------------------------------------------------- exact transitions (full batch)

def _residual_check(r, alpha=1e-7):
    "Residuals r (any shape) are iid N(0, 1): mean (z), variance (chi-square) and KS, each at alpha / 3."
    r = r.ravel()
    M = r.size
    assert abs(r.mean()) * np.sqrt(M) < stats.norm.isf(alpha / 6)
    lo, hi = stats.chi2.ppf([alpha / 6, 1 - alpha / 6], M)
    assert lo < np.sum(r ** 2) < hi
    assert stats.kstest(r, "norm").pvalue > alpha / 3


def test_sgld_transition_with_decaying_step(seed):
    "Full batch: (x' - x - eps/2 grad) / sqrt(eps) is iid N(0, 1) at every update of a decaying schedule."
    gm = _gaussian()
    x0 = np.array([0.5, 2.0])
    r = sgld(gm.model, step_size=0.02, decay=(10., 0.6), batch_size=None, x0=x0, n_draws=400, n_warmup=0,
             n_chains=50, rng=seed(2))
    t = np.arange(400)
    assert np.allclose(r.step_size, 0.02 * (10. + t) ** -0.6)             # every chain, every update: the schedule
    x = np.concatenate([np.broadcast_to(x0, (50, 1, 2)), r.draws], axis=1)
    eps = r.step_size[..., None]
    grad = -gm.precision * (x[:, :-1] - gm.mean)
    _residual_check((x[:, 1:] - x[:, :-1] - eps / 2 * grad) / np.sqrt(eps))   # 3 tests, false alarm < 1e-7


def test_psgld_transition_replays_the_rmsprop_recursion(seed):
    "Full batch, alpha = 0.9: replaying V_t = alpha V_{t-1} + (1 - alpha) gbar_t^2 independently, the standardised updates are iid N(0, 1)."
    gm = _gaussian()
    N, s2 = 50, np.array([1.0, 4.0])
    y = gm.model.data[0]
    x0, a, lam, eps = np.array([0.5, 2.0]), 0.9, 1e-5, 2e-3
    r = psgld(gm.model, step_size=eps, alpha=a, lam=lam, batch_size=None, x0=x0, n_draws=400, n_warmup=0,
              n_chains=50, rng=seed(3))
    x = np.concatenate([np.broadcast_to(x0, (50, 1, 2)), r.draws], axis=1)
    gbar = (y.mean(0) - x) / s2                                           # mean per-example gradient, closed form
    V = np.empty_like(gbar[:, 1:])
    v = gbar[:, 0] ** 2                                                   # V starts at the squared gradient at x0
    for t in range(400):
        v = a * v + (1 - a) * gbar[:, t] ** 2
        V[:, t] = v
    G = 1 / (lam + np.sqrt(V))
    full = -x[:, :-1] / 4.0 + N * gbar[:, :-1]                            # prior sd 2: -theta / 4
    _residual_check((x[:, 1:] - x[:, :-1] - eps / 2 * G * full) / np.sqrt(eps * G))


def test_sghmc_transition(seed):
    "Full batch: with p_t = (x_{t+1} - x_t) / eps, (p_{t+1} - (1 - eps C) p_t - eps grad(x_{t+1})) / sqrt(2 C eps) is iid N(0, 1)."
    gm = _gaussian()
    eps, C, x0 = 0.02, 8.0, np.array([0.5, 2.0])
    r = sghmc(gm.model, step_size=eps, friction=C, batch_size=None, x0=x0, n_draws=400, n_warmup=0, n_chains=50,
              rng=seed(4))
    x = np.concatenate([np.broadcast_to(x0, (50, 1, 2)), r.draws], axis=1)
    p = np.diff(x, axis=1) / eps                                          # p_0 .. p_{T-1}
    # p_{t+1} is updated with the gradient at x_{t+1}, the point p_t moved to: x_1 .. x_{T-1}. (This read x_2 .. x_T
    # before, one step late: the residual then had variance (1 + eps^2 P)^2, 1.04 for the first coordinate, and the
    # test failed at seed offset 110, z = 5.8; over 20 seeds the z of the sum of squares is now 0.3 +- 0.7)
    grad = -gm.precision * (x[:, 1:-1] - gm.mean)
    _residual_check((p[:, 1:] - (1 - eps * C) * p[:, :-1] - eps * grad) / np.sqrt(2 * C * eps))


# ---------------------------------------------------------------- stationary variances

def test_sgld_long_run_variance_is_the_ar1_formula(seed):
    "Exact gradient, constant steps: the long-run variance of each coordinate at three steps against (3), exact AR(1) SEs."
    gm = _gaussian()
    P, m = gm.precision, gm.mean
    h = np.array([0.002, 0.01, 0.03])                                    # h P from 0.02 (coordinate 2) to 1.5
    K, C, n = 3, 60, 1500
    var = sgld_variance(h[:, None], P)                                   # (K, 2)
    rng = np.random.default_rng(seed(5))
    x0 = m + np.sqrt(np.repeat(var, C, axis=0)) * rng.standard_normal((K * C, 2))   # start in the stationary law
    r = sgld(gm.model, step_size=np.repeat(h, C), batch_size=None, x0=x0, n_draws=n, n_warmup=0, n_chains=K * C,
             rng=seed(6))
    est = ((r.draws - m) ** 2).reshape(K, C * n, 2).mean(1)
    for k in range(K):
        for j in range(2):
            a = 1 - h[k] * P[j] / 2
            se = _se_mean_square(var[k, j] * a ** np.arange(n), n, C)
            # 6 comparisons at 5.5 exact SEs: false alarm < 6e-7
            assert abs(est[k, j] - var[k, j]) < Z * se, (k, j, est[k, j], var[k, j], se)
    # the formula itself: the textbook form h / (1 - (1 - h / (2 s^2))^2) and the expansion in (3)
    s2 = 1 / P[0]
    assert np.isclose(sgld_variance(0.01, P[0]), 0.01 / (1 - (1 - 0.01 / (2 * s2)) ** 2))
    assert np.isclose(sgld_variance(0.01, P[0], 7.0), s2 * (1 + 0.01 * 7 / 4) / (1 - 0.01 * P[0] / 4))


def test_sghmc_long_run_variance_is_the_lyapunov_solution(seed):
    "Exact gradient: SGHMC's long-run position variance at two steps against (6), with the exact VAR(1) SE."
    gm = _gaussian(noise_sd=(1.0, 1.0))
    P, m = gm.precision[0], gm.mean                                      # equal precisions, different means
    eps, Cf, n, C = np.array([0.03, 0.08]), 5.0, 1500, 60
    for e in eps:                                                         # (6) solves the Lyapunov equation
        A = np.array([[1, 1], [-e ** 2 * P, 1 - e * Cf - e ** 2 * P]])
        S = linalg.solve_discrete_lyapunov(A, np.diag([0, 2 * e * Cf * e ** 2]))
        assert np.isclose(S[0, 0], sghmc_variance(e, Cf, P), rtol=1e-10)
    # the momentum starts at N(0, 1), not at its stationary law: discard until the transient is below 1e-12
    rho = max(np.abs(np.linalg.eigvals(np.array([[1, 1], [-e ** 2 * P, 1 - e * Cf - e ** 2 * P]]))).max() for e in eps)
    n_warm = int(np.ceil(np.log(1e-12) / np.log(rho)))
    r = sghmc(gm.model, step_size=np.repeat(eps, C), friction=Cf, batch_size=None, x0=gm.mean, n_draws=n,
              n_warmup=n_warm, n_chains=2 * C, rng=seed(7))
    for k, e in enumerate(eps):
        A = np.array([[1, 1], [-e ** 2 * P, 1 - e * Cf - e ** 2 * P]])
        S = linalg.solve_discrete_lyapunov(A, np.diag([0, 2 * e * Cf * e ** 2]))
        gam, M = np.empty(n), S.copy()
        for lag in range(n):                                              # gamma(lag) = (A^lag Sigma)[0, 0]
            gam[lag] = M[0, 0]
            M = A @ M
        est = ((r.draws[k * C:(k + 1) * C] - m) ** 2).mean()             # both coordinates are identical here
        se = _se_mean_square(gam, n, C) / np.sqrt(2)                      # two independent coordinates per chain
        # 2 comparisons at 5.5 exact SEs: false alarm < 2e-7
        assert abs(est - S[0, 0]) < Z * se, (e, est, S[0, 0], se)


def test_psgld_with_frozen_preconditioner_is_sgld_with_step_eps_G(seed):
    "alpha = 1 keeps G = 1 / (lam + |gbar(x0)|): the long-run variance is (3) at h = eps G, exact AR(1) SE."
    gm = _gaussian()
    P, m = gm.precision, gm.mean
    y, s2 = gm.model.data[0], np.array([1.0, 4.0])
    x0, n, C = m + np.array([0.1, -0.3]), 1500, 100
    G = 1 / (1e-5 + np.abs((y.mean(0) - x0) / s2))
    eps = 0.2 / (G * P).max()                                             # eps G P <= 0.2 on both coordinates
    h = eps * G
    var = sgld_variance(h, P)
    a = 1 - h * P / 2
    n_warm = int(np.ceil(np.log(1e-9) / np.log(np.abs(a).max())))        # x0 is off the mean: wait until it is forgotten
    r = psgld(gm.model, step_size=eps, alpha=1.0, batch_size=None, x0=x0, n_draws=n, n_warmup=n_warm, n_chains=C,
              rng=seed(8))
    est = ((r.draws - m) ** 2).mean((0, 1))
    for j in range(2):
        se = _se_mean_square(var[j] * a[j] ** np.arange(n), n, C)
        assert abs(est[j] - var[j]) < Z * se, (j, est[j], var[j], se)    # 2 comparisons: false alarm < 2e-7


def test_psgld_first_step_from_the_mode_is_about_one_posterior_sd(seed):
    """Minibatches of n, started at the mode. V_0 >= Var(gbar_B) = noise_var / (N^2 n) and V_1 >= alpha V_0, so
    G_1 <= G_hat = 1 / sqrt(alpha noise_var / (N^2 n)) per coordinate; there the estimate g_hat has mean 0 and variance
    v = noise_var / n, so the first step dx = eps/2 G_1 g_hat + sqrt(eps G_1) xi has E[dx^2] <= (eps G_hat / 2)^2 v
    + eps G_hat (xi is independent of the batch and of G_1: no cross term), about one posterior variance for
    eps G_hat P <= 1/2. Fails for a V_0 without the variance term: at the
    mode the squared full-data gradient is ~0, G_1 ~ 10 G_hat and the first steps are ~10 sds long."""
    gm = _gaussian()
    N, n, P = 50, 5, gm.precision
    G_hat = 1 / np.sqrt(0.99 * gm.noise_var / (N ** 2 * n))
    eps = 0.5 / np.max(G_hat * P)
    bound = P * ((eps * G_hat / 2) ** 2 * gm.noise_var / n + eps * G_hat)          # (2,) in posterior variances
    assert np.all(bound < 3)
    C = 4000
    r = psgld(gm.model, step_size=eps, batch_size=n, x0=gm.mean, n_draws=1, n_warmup=0, n_chains=C, rng=seed(30))
    z = P * (r.draws[:, 0] - gm.mean) ** 2                                                 # (C, 2)
    # 2 comparisons of a mean of 4000 iid terms (all moments finite: Gaussian given the bounded G_1) at 5 SEs
    # one-sided: false alarm < 6e-7
    assert np.all(z.mean(0) < bound + 5 * z.std(0, ddof=1) / np.sqrt(C)), (z.mean(0), bound)
    assert r.n_grad == 2 * N + n                                  # start-up check, the pass that starts V, one update


def test_psgld_frozen_with_minibatches_starts_v_at_its_expected_square(seed):
    """alpha = 1 freezes V at V_0 = gbar(x0)^2 + Var_i(g_i(x0)) / n: pSGLD is then SGLD with the step h = eps G and the
    minibatch noise v = noise_var / n, whose long-run variance is (3). Per-chain variances of 40 independent chains, t
    test (t_39 at 1e-7 / 4 per comparison, 2 comparisons: false alarm < 1e-7). Any other V_0 changes G and fails (the
    squared full-data gradient alone makes G 2 and 7 times larger here)."""
    gm = _gaussian()
    P, m, n, R = gm.precision, gm.mean, 5, 40
    y, s2 = gm.model.data[0], np.array([1.0, 4.0])
    x0 = m + np.array([0.1, -0.3])
    G = 1 / (1e-5 + np.sqrt(((y.mean(0) - x0) / s2) ** 2 + (y / s2).var(0) / n))   # g_i = (y_i - theta) / sigma^2
    eps = 0.2 / (G * P).max()
    h = eps * G
    a = 1 - h * P / 2
    n_warm = int(np.ceil(np.log(1e-9) / np.log(np.abs(a).max())))                 # forget the start x0
    r = psgld(gm.model, step_size=eps, alpha=1.0, batch_size=n, x0=x0, n_draws=500, n_warmup=n_warm, n_chains=R,
              rng=seed(31))
    exact = sgld_variance(h, P, gm.noise_var / n)
    per_chain = ((r.draws - m) ** 2).mean(1)
    k = stats.t.isf(1e-7 / 4, R - 1)
    assert np.all(np.abs(per_chain.mean(0) - exact) < k * per_chain.std(0, ddof=1) / np.sqrt(R)), (per_chain.mean(0), exact)


def test_minibatch_long_run_variances(seed):
    "Minibatch noise: SGLD's and SGHMC's long-run variances against (3) and (6) with v = tau^2 / n, t test over chains."
    gm = _gaussian()
    P, m, n_b = gm.precision, gm.mean, 5
    v = gm.noise_var / n_b
    R, n = 40, 1000
    h = 0.2 / P.max()
    r1 = sgld(gm.model, step_size=h, batch_size=n_b, x0=m, n_draws=n, n_warmup=500, n_chains=R, rng=seed(9))
    e, Cf = np.sqrt(h / 2), 0.5 / np.sqrt(h / 2)
    r2 = sghmc(gm.model, step_size=e, friction=Cf, batch_size=n_b, x0=m, n_draws=n, n_warmup=500, n_chains=R,
               rng=seed(10))
    k = stats.t.isf(1e-7 / 8, R - 1)                    # 4 comparisons, two-sided t_39 at 1e-7 / 4 each: false alarm < 1e-7
    for r, exact in ((r1, sgld_variance(h, P, v)), (r2, sghmc_variance(e, Cf, P, v))):
        per_chain = ((r.draws - m) ** 2).mean(1)                          # (R, 2), independent chains
        # the transient from x0 = mean is over: (1 - hP/2)^1000 < 1e-10 for SGLD, and SGHMC's radius is sqrt(1 - 1/2)
        assert np.all(np.abs(per_chain.mean(0) - exact) < k * per_chain.std(0, ddof=1) / np.sqrt(R)), (per_chain.mean(0), exact)
        assert exact[0] > 1.5 / P[0]                                      # the noise term is material (> 50 %) here


# ---------------------------------------------------------------- bookkeeping

def test_thinning_warmup_and_moments(seed):
    "Kept draws are updates n_warmup + thin k (k = 1..); constant-step moments are the plain pooled mean and sd."
    gm = _gaussian()
    a = sgld(gm.model, step_size=0.01, batch_size=None, x0=gm.mean, n_draws=30, n_warmup=7, thin=3, n_chains=2,
             rng=seed(11))
    b = sgld(gm.model, step_size=0.01, batch_size=None, x0=gm.mean, n_draws=97, n_warmup=0, n_chains=2, rng=seed(11))
    assert np.array_equal(a.draws, b.draws[:, 7 + 2::3])                 # same random stream, draws 9, 12, ..., 96
    assert a.n_grad == 50 + (7 + 90) * 50                               # the start-up check's full gradient + updates
    m, s = b.moments()
    assert np.allclose(m, b.draws.mean((0, 1))) and np.allclose(s, b.draws.std((0, 1)))
    d = sgld(gm.model, step_size=0.01, decay=(5., 1.), batch_size=3, x0=gm.mean, n_draws=50, n_warmup=0, n_chains=3,
             rng=seed(12))
    w = d.step_size[..., None] / d.step_size.sum()
    assert np.allclose(d.moments()[0], (w * d.draws).sum((0, 1)))
    assert d.n_grad == 50 + 50 * 3


def test_default_warmup_discards_the_transient(seed):
    """Default n_warmup (None: n_draws * thin updates) forgets a start 30 posterior sds away. Full batch on the Gaussian
    example: SGLD is a linear Gaussian recursion whose stationary mean is the exact posterior mean, so the 20 chain
    means are iid Gaussian and t = (grand mean - exact) / (s / sqrt(20)) is exactly t_19 (up to the transient left
    after the 1000-update warm-up, (1 - hP/2)^1000 x 30 sds < 2e-3 sds, against a standard error of about 0.1 sd).
    2 coordinates at 1e-7 / 2 each (two-sided): false alarm < 1e-7. Catches the old default n_warmup = 0, which keeps
    the transient: its mean is off by about 30 / (1000 hP/2) = 3 sds in the slower coordinate."""
    gm = _gaussian()
    P, m, R = gm.precision, gm.mean, 20
    h = 0.02 / P.min()                                   # hP/2 = 0.01 in the slower coordinate, 0.04 in the faster
    x0 = m + 30 / np.sqrt(P)
    r = sgld(gm.model, step_size=h, batch_size=None, x0=x0, n_chains=R, rng=seed(14))
    cm = r.draws.mean(1)                                                          # (R, 2) chain means
    t = (cm.mean(0) - m) / (cm.std(0, ddof=1) / np.sqrt(R))
    assert np.all(np.abs(t) < stats.t.isf(1e-7 / 4, R - 1)), t
    # the default is resolved the same way by the three samplers: n_draws * thin warm-up updates (full batch: N each)
    N = gm.model.n_data
    for f in (sgld, psgld, sghmc):
        assert f(gm.model, step_size=1e-3, batch_size=None, n_draws=5, thin=2, rng=seed(15)).n_grad == N + 20 * N
        assert f(gm.model, step_size=1e-3, batch_size=None, n_draws=5, thin=2, n_warmup=0, rng=seed(15)).n_grad \
            == N + 10 * N                                                         # the old behaviour, on request


def test_sweep_step_size_is_the_step_the_schedule_ends_with(seed):
    "SweepResult.step_size: the constant step, or a (b + T - 1)^-gamma for a decaying schedule (catches the base a)."
    X, y = logistic_example(200)
    mod = logistic_model(X, y)
    kw = dict(n_steps=40, chains_per_step=2, batch_size=10, x0=np.zeros(3), rng=seed(16))
    ref_m, ref_s = np.zeros(3), np.ones(3)
    assert np.allclose(step_size_sweep("sgld", mod, [1e-4, 1e-3], ref_m, ref_s, **kw).step_size, [1e-4, 1e-3])
    s = step_size_sweep("sgld", mod, 0.05, ref_m, ref_s, decay=(10., 0.6), **kw)
    assert np.allclose(s.step_size, 0.05 * (10. + 39) ** -0.6)


def test_step_size_sweep_bookkeeping(seed):
    "The sweep's errors are those of the pooled chains of each step size, computed from SGMCMCResult.moments."
    X, y = logistic_example(200)
    mod = logistic_model(X, y)
    ref_m, ref_s = np.array([-0.5, 1.0, 2.0]), np.array([0.2, 0.2, 0.6])
    h = np.array([1e-4, 1e-3])
    s = step_size_sweep("sgld", mod, h, ref_m, ref_s, n_steps=40, chains_per_step=3, batch_size=10, rng=seed(13),
                        x0=np.zeros(3))
    r = sgld(mod, step_size=np.repeat(h, 3), batch_size=10, x0=np.zeros(3), n_draws=20, n_warmup=20, n_chains=6,
             rng=seed(13))
    for k in range(2):
        m, sd = r.moments(range(3 * k, 3 * k + 3))
        assert np.isclose(s.mean_error[k], np.sqrt(np.mean(((m - ref_m) / ref_s) ** 2)))
        assert np.allclose(s.sd_ratio[k], sd / ref_s)
        assert np.isclose(s.sd_error[k], np.sqrt(np.mean(np.log(sd / ref_s) ** 2)))


def test_psgld_and_sghmc_share_sglds_run_settings():
    "The run settings are declared once, in sgld, with its defaults (shares_parameters)."
    base = inspect.signature(sgld).parameters
    for f in (psgld, sghmc):
        sig = inspect.signature(f).parameters
        for name in ("decay", "batch_size", "x0", "n_draws", "n_chains", "n_warmup", "thin", "rng", "progress"):
            assert sig[name].default == base[name].default, (f.__name__, name)


# ---------------------------------------------------------------- bad inputs

@pytest.mark.parametrize("call, name", [
    (lambda gm: sgld(gm.model, step_size=0.), "step_size"),
    (lambda gm: sgld(gm.model, step_size=[0.1, 0.2, 0.3], n_chains=2), "step_size"),
    (lambda gm: sgld(gm.model, decay=(10., 0.5)), "decay"),
    (lambda gm: sgld(gm.model, decay=(0., 0.6)), "decay"),
    (lambda gm: sgld(gm.model, decay=3.), "decay"),
    (lambda gm: sgld(gm.model, batch_size=0), "batch_size"),
    (lambda gm: sgld(gm.model, x0=[0., 0., 0.]), "x0"),
    (lambda gm: sgld(gm.model, x0=[np.nan, 0.]), "x0"),
    (lambda gm: sgld(gm.model, n_chains=0), "n_chains"),
    (lambda gm: sgld(gm.model, n_warmup=-1), "n_warmup"),
    (lambda gm: sgld(gm.model, thin=0), "thin"),
    (lambda gm: sgld(lambda th: th, n_draws=3), "model"),
    (lambda gm: psgld(gm.model, alpha=0.), "alpha"),
    (lambda gm: psgld(gm.model, alpha=1.2), "alpha"),
    (lambda gm: psgld(gm.model, lam=-1.), "lam"),
    (lambda gm: sghmc(gm.model, friction=0.), "friction"),
    (lambda gm: sghmc(gm.model, step_size=0.2, friction=10.), "friction"),
    (lambda gm: sghmc(gm.model, friction=[1., 2., 3.], n_chains=2), "friction"),
    (lambda gm: sgld_variance(1.0, 5.0), "step_size"),
    (lambda gm: sgld_variance(0.1, -1.0), "precision"),
    (lambda gm: sghmc_variance(0.5, 1.0, 20.0), "step_size"),
    (lambda gm: sghmc_variance(0.1, 1.0, 1.0, -2.0), "grad_var"),
    (lambda gm: gm.model.grad(np.ones((2, 3))), "theta"),
    (lambda gm: MinibatchModel(lambda t: t, lambda t, y: t, (np.ones(3), np.ones(4)), 1), "data"),
    (lambda gm: MinibatchModel(lambda t: t, lambda t, y: t, np.ones(3), 0), "dim"),
    (lambda gm: logistic_model(np.ones((3, 2)), [0, 1, 2]), "y"),
    (lambda gm: gaussian_mean_model(np.ones(5)), "y"),
    (lambda gm: gaussian_mean_model(np.ones((5, 2)), noise_sd=[1., 0.]), "noise_sd"),
    (lambda gm: step_size_sweep("mala", gm.model, [0.1], gm.mean, [1., 1.]), "sampler"),
    (lambda gm: step_size_sweep("sgld", gm.model, [0.1], gm.mean, [1., 1., 1.]), "ref_sd"),
    (lambda gm: sgld_cv(gm.model, [0., 0., 0.], n_draws=3), "x_hat"),
    (lambda gm: sgld_cv(gm.model, [np.nan, 0.], n_draws=3), "x_hat"),
    (lambda gm: sgld_cv(lambda th: th, [0., 0.], n_draws=3), "model"),
    (lambda gm: cv_grad(gm.model, np.ones((2, 2)), [0.], batch_size=3), "x_hat"),
    (lambda gm: cv_grad(gm.model, np.ones((2, 3)), [0., 0.], batch_size=3), "theta"),
    (lambda gm: cv_grad(gm.model, np.ones((2, 2)), [0., 0.], batch_size=0), "batch_size"),
    (lambda gm: posterior_mode(gm.model, x0=[0.]), "x0"),
    (lambda gm: posterior_mode(None), "model"),
    (lambda gm: step_size_sweep("sgld_cv", gm.model, [0.1], gm.mean, [1., 1.]), "x_hat"),
])
def test_bad_inputs_raise_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call(_gaussian())


def test_model_output_shapes_are_checked():
    "A log likelihood that sums over the batch (shape (C,) instead of (C, n)) is caught at the start, naming log_lik."
    y = np.ones((10, 1))
    bad = MinibatchModel(lambda th: -0.5 * np.sum(th ** 2, -1), lambda th, yb: -0.5 * np.sum((yb - th[:, None]) ** 2, (1, 2)),
                         y, 1)
    with pytest.raises(ValueError, match="log_lik"):
        sgld(bad, n_draws=3)


# ---------------------------------------------------------------- SGLD-CV

def test_cv_gradient_is_the_full_gradient_on_the_gaussian_mean():
    "Per-example gradients (y_i - theta) / s^2 differ between theta and x_hat by the same vector for every i: no noise."
    gm = _gaussian()
    th = np.random.default_rng(5).normal(size=(8, 2))
    for x_hat, n in (([0.3, -1.0], 1), ([5.0, 2.0], 7), (gm.mean, None)):
        assert np.allclose(cv_grad(gm.model, th, x_hat, batch_size=n, rng=3), gm.model.grad(th), rtol=0, atol=1e-10)


def test_cv_gradient_is_unbiased_with_less_noise_on_logistic(seed):
    """Logistic regression (N = 1000): mean of 20000 control-variate estimates at a point 0.2 from the mode against the
    full gradient, each coordinate within 5.5 SEs of the estimates' own spread (3 comparisons of means of 20000 iid
    draws: false alarm about 1e-7); the noise sd at least 10 times below the plain estimate's (measured 12.8-20.8 times, by coordinate, at
    this distance; the sample sds of 20000 draws are within 2% of their values)."""
    model = logistic_model(*logistic_example(1000))
    mode = posterior_mode(model)
    x_hat = mode.x
    assert mode.n_grad % 1000 == 0 and mode.n_grad > 0
    assert np.allclose(model.grad(x_hat[None])[0], 0, atol=1e-3)
    th = np.repeat((x_hat + 0.2 * np.array([1.0, -1.0, 0.5]) / 1.5)[None], 20000, axis=0)
    G = cv_grad(model, th, x_hat, batch_size=50, rng=seed(1))
    exact = model.grad(th[:1])[0]
    assert np.all(np.abs(G.mean(0) - exact) < Z * G.std(0) / np.sqrt(len(G))), (G.mean(0), exact)
    plain = model.grad(th, batch_size=50, rng=seed(2))
    assert np.all(plain.std(0) > 10 * G.std(0)), (plain.std(0), G.std(0))


def test_sgld_cv_on_the_gaussian_mean_is_unadjusted_langevin(seed):
    """Long-run variance of SGLD-CV with batches of 5 against (3) with v = 0 (ULA), from the last positions of 4000
    independent chains after 200 updates started at the mean, h P = 0.5 and 0.127 in the two coordinates (the step is
    set by the larger precision): the sample variance of 4000 Gaussian draws has relative SE sqrt(2/3999) = 0.022,
    bound 5.5 SEs (2 comparisons; false alarm 1.3e-7 with the chi-square tail). Plain SGLD's variance would be 3.4 times larger in the first coordinate."""
    gm = _gaussian()
    P = gm.precision
    r = sgld_cv(gm.model, [0.0, 0.0], step_size=0.5 / P.max(), batch_size=5, x0=gm.mean, n_draws=1, n_warmup=199,
                n_chains=4000, rng=seed(3))
    h = 0.5 / P.max()
    ratio = r.draws[:, 0].var(0, ddof=1) / sgld_variance(h, P)
    assert np.all(np.abs(ratio - 1) < Z * np.sqrt(2 / 3999)), ratio
    assert sgld_variance(h, P, gm.noise_var / 5)[0] / sgld_variance(h, P)[0] > 3   # plain SGLD: 3.4 times ULA's
    N = gm.model.n_data
    assert r.n_grad == N + N + 200 * 2 * 5                 # start-up check, reference pass, two batches per update


def test_sgld_cv_shares_sglds_settings_and_sweeps():
    base = inspect.signature(sgld).parameters
    sig = inspect.signature(sgld_cv).parameters
    for name in ("step_size", "decay", "batch_size", "x0", "n_draws", "n_chains", "n_warmup", "thin", "rng", "progress"):
        assert sig[name].default == base[name].default, name
    gm = _gaussian()
    s = step_size_sweep("sgld_cv", gm.model, [0.01, 0.02], gm.mean, 1 / np.sqrt(gm.precision), n_steps=40,
                        chains_per_step=2, x_hat=gm.mean, batch_size=5, rng=0)
    assert s.sampler == "sgld_cv" and s.sd_ratio.shape == (2, 2)
