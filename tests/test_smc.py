"""Tests of bayesnotes.smc: resampling schemes, the generic SMC loop against the Kalman filter,
SMC samplers against closed forms, and input validation.

Statistical checks use fixed seeds; every tolerance is a multiple of a Monte Carlo standard error that is
either known exactly or estimated from independent replicates (the comment at each check says which)."""
import inspect
import warnings

import numpy as np
import pytest
from scipy import stats

from bayesnotes.diagnostics import summary
from bayesnotes.smc import (RESAMPLING, FeynmanKac, GaussianSSM, LinearGaussianSSM, NonlinearGaussianSSM, SMCStep,
                            StateSpaceModel, ar1_pmmh_example, bimodal_target, bootstrap_filter, bootstrap_model,
                            genealogy, guided_model, ibis, loglik_spread, multinomial, nonmarkov_ssm, pmmh, pmmh_target,
                            resample, resampling_scheme, residual, smc, stratified, systematic, tempered_smc,
                            tracker_ssm, trajectories)


# ---------------------------------------------------------------- resampling

W10 = np.random.default_rng(123).dirichlet(np.ones(10))   # fixed, generic weights (no N*W is an integer)


def _offspring(scheme, W, R, seed):
    rng = np.random.default_rng(seed)
    return np.array([np.bincount(scheme(W, M=len(W), rng=rng), minlength=len(W)) for _ in range(R)])


@pytest.mark.parametrize("name", list(RESAMPLING))
def test_resampling_unbiased(name, seed):
    "E[offspring of m] = N W_m, checked by simulation for every scheme."
    R = 4000
    O = _offspring(RESAMPLING[name], W10, R, seed=seed(1))
    assert np.all(O.sum(1) == 10)
    se = O.std(0, ddof=1) / np.sqrt(R)        # standard error of each mean count, from the replicates
    # 10 components x 4 schemes: 5 standard errors keeps the family-wise false alarm rate below 1e-4
    assert np.all(np.abs(O.mean(0) - 10 * W10) < 5 * se + 1e-12), (O.mean(0), 10 * W10)


def test_multinomial_variance_exact_and_others_lower(seed):
    "Multinomial counts have Var = N W (1 - W); stratified, systematic and residual have less total variance."
    R = 4000
    exact = 10 * W10 * (1 - W10)
    v = {name: _offspring(s, W10, R, seed=seed(2)).var(0, ddof=1) for name, s in RESAMPLING.items()}
    # a sample variance of R draws has relative sd ~ sqrt(2/R) (x ~2 for non-Gaussian counts): allow 5 of those
    assert np.allclose(v["multinomial"], exact, rtol=5 * 2 * np.sqrt(2 / R))
    for name in ("stratified", "systematic", "residual"):
        assert v[name].sum() < 0.8 * exact.sum(), (name, v[name].sum(), exact.sum())
    # systematic: counts are always floor(N W) or ceil(N W); residual: at least floor(N W)
    Os = _offspring(systematic, W10, 500, seed=seed(3))
    assert np.all((Os == np.floor(10 * W10)) | (Os == np.ceil(10 * W10)))
    assert np.all(_offspring(residual, W10, 500, seed=seed(4)) >= np.floor(10 * W10))


def test_multinomial_no_offspring_probability(seed):
    "Equal weights: P(no offspring) = (1 - 1/N)^N (about 0.37), exactly Binomial; systematic never loses one."
    N, R = 50, 2000
    O = _offspring(multinomial, np.full(N, 1 / N), R, seed=seed(5))
    p = (1 - 1 / N) ** N
    lost = (O == 0).mean()
    # each replicate gives N exchangeable, nearly independent indicators; 5 binomial SEs of the pooled mean
    assert abs(lost - p) < 5 * np.sqrt(p * (1 - p) / (N * R))
    assert np.all(_offspring(systematic, np.full(N, 1 / N), 20, seed=seed(6)) == 1)


def test_systematic_counts_equal_inverse_cdf_definition(seed):
    "The O(N) offspring-count implementation of systematic resampling equals eq. 13.27 with u_n = (n + v)/M."
    from bayesnotes.smc import inverse_cdf
    rng = np.random.default_rng(seed(0))
    for N, M in [(1, 1), (2, 5), (7, 7), (100, 100), (100, 301)]:
        for k in range(20):
            W = rng.dirichlet(np.full(N, 0.3))
            if k % 4 == 0 and N > 2:
                W[rng.integers(N)] = 0; W /= W.sum()
            seed = int(rng.integers(1 << 30))
            v = np.random.default_rng(seed).random()
            assert np.array_equal(systematic(W, M=M, rng=seed), inverse_cdf((np.arange(M) + v) / M, W))


def test_resampling_M_and_zero_weights():
    W = np.array([0.0, 0.5, 0.0, 0.5, 0.0])
    for name, scheme in RESAMPLING.items():
        A = scheme(W, M=7, rng=0)
        assert A.shape == (7,) and set(A.tolist()) <= {1, 3}, name
    assert np.array_equal(resample(np.eye(4)[3], "stratified", rng=1), [3, 3, 3, 3])


def test_resampling_returns_M_for_weights_off_by_rounding():
    "Weights summing to 1 + 9e-7 (which the checks accept) give exactly M ancestors with every scheme."
    # (failed before the fix: residual used M W unnormalised, and the floors of M W alone came to 4,000,002)
    W, M = np.array([0.5, 0.5]) * (1 + 9e-7), 4_000_000
    for name, scheme in RESAMPLING.items():
        A = scheme(W, M=M, rng=0)
        assert A.shape == (M,), (name, A.shape)
        if name != "multinomial":   # the other three put M/2 +- 1 ancestors on each of two equal weights
            assert np.all(np.abs(np.bincount(A, minlength=2) - M // 2) <= 2), (name, np.bincount(A))


def test_resampling_reproducible():
    for name in RESAMPLING:
        assert np.array_equal(resample(W10, name, rng=42), resample(W10, name, rng=42))


def test_resampling_registry_is_the_one_source():
    "Each scheme is registered once under its own name; `.core` is the bare scheme(W, M, rng) the SMC loop calls."
    assert list(RESAMPLING) == ["multinomial", "stratified", "systematic", "residual"]
    for name, fn in (("multinomial", multinomial), ("stratified", stratified), ("systematic", systematic),
                     ("residual", residual)):
        assert RESAMPLING[name] is fn and fn.__name__ == name and fn.__doc__
        assert np.array_equal(fn(W10, M=7, rng=3), fn.core(W10, 7, np.random.default_rng(3)))
        assert np.array_equal(resample(W10, scheme=name, rng=5, M=7), fn(W10, M=7, rng=5))


def test_resample_accepts_rng_none_spec7():
    "SPEC 7: rng=None draws fresh entropy, so `resample(W)` works and returns N valid ancestors."
    for name in RESAMPLING:
        A = resample(W10, name)
        assert A.shape == (10,) and A.min() >= 0 and A.max() < 10
        assert RESAMPLING[name](W10).shape == (10,)


def test_resampling_scheme_registers_a_new_scheme():
    def first_only(W, M, rng):
        "Every ancestor is particle 0 (a deliberately biased toy scheme)."
        return np.zeros(M, dtype=int)
    try:
        reg = resampling_scheme(first_only)
        assert RESAMPLING["first_only"] is reg and np.array_equal(resample(W10, "first_only", M=3, rng=0), [0, 0, 0])
        res = smc(_BadModel(None, 0.0), 20, 0, resampling="first_only", ess_threshold=1.0)
        assert res.resampled[1:].all()
    finally:
        RESAMPLING.pop("first_only", None)


# ---------------------------------------------------------------- Kalman filter: independent reference

def _joint_gaussian_y(ssm, T):
    "Mean and covariance of y_{0:T-1} and the cross-covariance Cov(x_t, y_{0:T-1}), by direct propagation."
    dx, dy = ssm.dim_x, ssm.dim_y
    P = [ssm.P0]
    for _ in range(1, T):
        P.append(ssm.A @ P[-1] @ ssm.A.T + ssm.Q)
    mean_x = [ssm.m0]
    for _ in range(1, T):
        mean_x.append(ssm.A @ mean_x[-1])
    cov_x = np.zeros((T * dx, T * dx))
    for t in range(T):
        for s in range(t + 1):
            c = np.linalg.matrix_power(ssm.A, t - s) @ P[s]           # Cov(x_t, x_s) for t >= s
            cov_x[t * dx:(t + 1) * dx, s * dx:(s + 1) * dx] = c
            cov_x[s * dx:(s + 1) * dx, t * dx:(t + 1) * dx] = c.T
    Cbig = np.kron(np.eye(T), ssm.C)
    cov_y = Cbig @ cov_x @ Cbig.T + np.kron(np.eye(T), ssm.R)
    return np.concatenate(mean_x), cov_x, Cbig @ np.concatenate(mean_x), cov_y, Cbig


@pytest.mark.parametrize("ssm", [LinearGaussianSSM(A=0.9, C=1.0, Q=1.0, R=0.5, P0=1 / 0.19),
                                 nonmarkov_ssm(),
                                 LinearGaussianSSM(A=[[0.9, 0.2], [-0.1, 0.8]], C=[[1.0, 0.5], [0.0, 1.0]],
                                                   Q=[[0.5, 0.1], [0.1, 0.3]], R=[[0.4, 0.1], [0.1, 0.2]],
                                                   m0=[1.0, -1.0], P0=np.eye(2))])
def test_kalman_matches_joint_gaussian(ssm, seed):
    "Kalman log-likelihood and filtering moments equal those from the joint Gaussian of (x, y)."
    T = 8
    _, y = ssm.simulate(T, rng=seed(0))
    kf = ssm.kalman_filter(y)
    mx, cx, my, cy, Cbig = _joint_gaussian_y(ssm, T)
    assert np.isclose(kf.log_evidence, stats.multivariate_normal(my, cy).logpdf(y.ravel()))
    dx, dy = ssm.dim_x, ssm.dim_y
    for t in (0, T // 2, T - 1):        # filtering: condition x_t on y_{0:t}
        k = (t + 1) * dy
        cxy = (cx @ Cbig.T)[t * dx:(t + 1) * dx, :k]
        gain = np.linalg.solve(cy[:k, :k], cxy.T).T
        m = mx[t * dx:(t + 1) * dx] + gain @ (y.ravel()[:k] - my[:k])
        P = cx[t * dx:(t + 1) * dx, t * dx:(t + 1) * dx] - gain @ cxy.T
        assert np.allclose(kf.means[t], m) and np.allclose(kf.covs[t], P)


# ---------------------------------------------------------------- particle filters vs Kalman

@pytest.fixture(scope="module")
def ar1(seed):
    ssm = LinearGaussianSSM(A=0.9, C=1.0, Q=1.0, R=0.5, P0=1 / 0.19)
    _, y = ssm.simulate(20, rng=seed(7))
    return ssm, y, ssm.kalman_filter(y)


@pytest.mark.parametrize("make", [bootstrap_model, guided_model])
def test_likelihood_estimate_unbiased(ar1, make, seed):
    "E[Zhat] = Z for both Feynman-Kac models, checked on the log scale: mean(log Zhat - log Z) = -Var / 2."
    # A t-test on the ratios Zhat / Z has a false-alarm rate far above its nominal one: the ratios are skewed
    # (roughly lognormal), so a sample usually misses their upper tail. e = log Zhat - log Z is close to N(mu, s^2)
    # (s^2 ~ 0.1 here), and E[exp e] = 1 means mu + s^2 / 2 = 0; on the chapter's T = 50 example at s^2 = 0.14 we
    # measured mu + s^2 / 2 = 0.0025 +- 0.0087 over 2000 runs, and 0.03 covers such departures from the lognormal
    # law. (mean + var/2) / (its estimated se) exceeds 5.5 with probability 5e-7..1e-6 for 100 normal errors with
    # s^2 in 0.07..0.2 (simulated, 2e6 batches). A filter missing a factor 1/N or reusing stale weights fails.
    ssm, y, kf = ar1
    rng = np.random.default_rng(seed(8))
    e = np.array([smc(make(ssm, y), 500, rng).log_evidence - kf.log_evidence for _ in range(100)])
    v = e.var(ddof=1)
    stat, se = e.mean() + v / 2, np.sqrt(v / 100 + v ** 2 / (2 * 99))
    assert abs(stat) < 5.5 * se + 0.03, (stat, se, v)
    # sanity: the lognormal regime. s^2 depends on the data set (seed(7)): over 120 data sets (40 runs each) its median
    # was 0.08 and it exceeded 1 at 2 (1.4 and 1.9: a surprising observation; the old bound v < 1 failed at seed offset
    # 101). At those rare data sets the false-alarm rate above, simulated for s^2 in 0.07..0.2, is only approximate.
    assert v < 4


def test_filtering_means_match_kalman(ar1, seed):
    "The average over runs of the particle filtering means equals the Kalman means within Monte Carlo error."
    ssm, y, kf = ar1
    rng = np.random.default_rng(seed(9))
    R = 40
    means = np.array([bootstrap_filter(ssm, y, 2000, rng).means[:, 0] for _ in range(R)])
    se = means.std(0, ddof=1) / np.sqrt(R)  # per-step standard error from 40 independent runs
    # (mean - Kalman) / se is Student t with 39 df per step (the O(1/N) bias of self-normalised estimates is far
    # below one se here); 20 steps at 6.8 se: false alarm 20 * P(|t_39| > 6.8) < 1e-6
    assert np.all(np.abs(means.mean(0) - kf.means[:, 0]) < 6.8 * se)
    # and a single run is already close: the median over steps of its sd across runs is below 0.1 of the posterior
    # sd (measured: 0.025-0.03 for a dozen data sets; the *maximum* over steps is not asserted, because one
    # surprising observation can make it 0.7 -- a property of the data, not of the filter). Each step's sd is
    # sigma_t * sqrt(chi2_39 / 39); exceeding 3x its value at half the steps has probability far below 1e-12.
    assert np.median(means.std(0, ddof=1) / np.sqrt(kf.covs[:, 0, 0])) < 0.1


def test_loglik_variance_falls_with_N(ar1, seed):
    "Var(log Zhat) is roughly proportional to 1/N: 16 times more particles cut it by well over 4."
    ssm, y, kf = ar1
    rng = np.random.default_rng(seed(10))
    v = {N: np.var([bootstrap_filter(ssm, y, N, rng).log_evidence for _ in range(30)], ddof=1) for N in (50, 800)}
    # v[50] / v[800] ~ 16 F(29, 29); its 1e-6 quantile is 16 * 0.15 = 2.4, so > 2.4 is a false alarm of 1e-6
    assert v[50] > 2.4 * v[800], v


def test_guided_beats_bootstrap_on_informative_data(seed):
    ssm = LinearGaussianSSM(A=0.9, C=1.0, Q=1.0, R=0.05, P0=1 / 0.19)
    _, y = ssm.simulate(30, rng=seed(11))
    rb = smc(bootstrap_model(ssm, y), 200, 12, ess_threshold=1.0)
    rg = smc(guided_model(ssm, y), 200, 12, ess_threshold=1.0)
    assert rg.ess.mean() > 3 * rb.ess.mean()
    lz = ssm.kalman_filter(y).log_evidence
    sd = {m.__name__: np.std([smc(m(ssm, y), 200, s).log_evidence - lz for s in range(15)])
          for m in (bootstrap_model, guided_model)}
    assert sd["guided_model"] < 0.5 * sd["bootstrap_model"], sd


def test_sis_and_history(seed):
    ssm = nonmarkov_ssm()
    _, y = ssm.simulate(6, rng=seed(0))
    sis = smc(bootstrap_model(ssm, y), 5, 1, ess_threshold=0.0, store_history=True)
    assert not sis.resampled.any() and np.all(sis.ancestors == np.arange(5))
    res = smc(bootstrap_model(ssm, y), 50, 1, ess_threshold=1.0, store_history=True)
    assert res.resampled[1:].all() and not res.resampled[0]
    assert len(res.history) == 6 and res.weight_history.shape == (6, 50)
    assert np.allclose(res.weight_history.sum(1), 1) and np.allclose(res.weight_history[-1], res.weights)
    paths = trajectories(res)
    assert paths.shape == (6, 50, 2) and np.allclose(paths[-1], res.particles)
    # each surviving path is consistent with the ancestors: the (z, s) state obeys s_t = beta s_{t-1} + z_t
    assert np.allclose(paths[1:, :, 1], 0.5 * paths[:-1, :, 1] + paths[1:, :, 0])


def test_genealogy_by_hand():
    anc = np.array([[0, 1, 2], [0, 0, 2], [1, 2, 2]])
    # final particles 0,1,2 have parents anc[2] = (1,2,2) at t=1, whose parents anc[1][(1,2,2)] = (0,2,2) at t=0
    assert np.array_equal(genealogy(anc), [[0, 2, 2], [1, 2, 2], [0, 1, 2]])


def test_adaptive_resampling_threshold(ar1):
    ssm, y, _ = ar1
    res = bootstrap_filter(ssm, y, 300, 13, ess_threshold=0.5)
    # resampling happens before step t exactly when the ESS after step t-1 fell below N/2
    assert np.array_equal(res.resampled[1:], res.ess[:-1] < 150)


def test_reproducible(ar1):
    ssm, y, _ = ar1
    a, b = bootstrap_filter(ssm, y, 100, 5), bootstrap_filter(ssm, y, 100, 5)
    assert a.log_evidence == b.log_evidence and np.array_equal(a.means, b.means)
    c = bootstrap_filter(ssm, y, 100, 6)
    assert c.log_evidence != a.log_evidence


def test_tracker_filter_beats_observations(seed):
    ssm = tracker_ssm()
    x, y = ssm.simulate(60, rng=seed(3))
    res = bootstrap_filter(ssm, y, 1000, 4)
    assert np.sqrt(np.mean((res.means - x) ** 2)) < 0.7 * np.sqrt(np.mean((y - x) ** 2))


def test_loglik_spread_function():
    err, n_rs = loglik_spread(100, n_rep=5)
    assert err.shape == (5,) and np.all(np.isfinite(err)) and n_rs > 0
    err0, n0 = loglik_spread(100, ess_threshold=0.0, n_rep=3)
    assert n0 == 0


# ---------------------------------------------------------------- SMC samplers

def _blr_problem(n=30, d=2, sigma=0.5, s0=1.0, seed=0):
    "Conjugate Bayesian linear regression with known noise: exact evidence and posterior."
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w_true = np.array([1.0, -0.5])[:d]
    y = X @ w_true + sigma * rng.standard_normal(n)
    log_prior = lambda w: stats.norm.logpdf(w, 0, s0).sum(1)
    log_lik = lambda w: stats.norm.logpdf(y[None, :], w @ X.T, sigma).sum(1)
    prior_sample = lambda rng, N: s0 * rng.standard_normal((N, d))
    logZ = stats.multivariate_normal(np.zeros(n), sigma ** 2 * np.eye(n) + s0 ** 2 * X @ X.T).logpdf(y)
    Sinv = X.T @ X / sigma ** 2 + np.eye(d) / s0 ** 2
    post_mean = np.linalg.solve(Sinv, X.T @ y / sigma ** 2)
    return (log_prior, log_lik, prior_sample), logZ, post_mean, np.linalg.inv(Sinv)


def test_tempered_smc_log_evidence_linear_regression(seed):
    (lp, ll, ps), logZ, pm, pcov = _blr_problem()
    runs = [tempered_smc(lp, ll, ps, 1000, seed(s)) for s in range(20)]
    le = np.array([r.log_evidence for r in runs])
    se = le.std(ddof=1) / np.sqrt(len(le))     # standard error of the mean from 20 independent runs
    # (mean - log Z) / se is Student t with 19 df: 7.1 se is a false alarm of 1e-6; the downward bias of log Zhat
    # (about Var/2 < 0.01 here) is added explicitly
    assert abs(le.mean() - logZ) < 7.1 * se + le.var() / 2 + 1e-3, (le, logZ)
    assert np.all(np.abs(le - logZ) < 0.5)
    for r in runs[:6]:
        assert r.temperatures[0] == 0 and r.temperatures[-1] == 1 and np.all(np.diff(r.temperatures) > 0)
        assert len(r.temperatures) == r.n_steps + 1 and 0.05 < r.acceptance.mean() < 0.9
        mean = r.weights @ r.particles
        # posterior mean of N weighted particles: SE ~ posterior sd / sqrt(ESS) (ESS ~ N/2 after the last step);
        # 2 coordinates x 6 runs at 6 approximate SEs (5.4 for 1e-6, widened for the ESS approximation)
        assert np.all(np.abs(mean - pm) < 6 * np.sqrt(np.diag(pcov) / r.ess[-1]))


def test_tempered_smc_ess_kept_at_target(seed):
    (lp, ll, ps), *_ = _blr_problem()
    r = tempered_smc(lp, ll, ps, 500, seed(1), ess_target=0.6)
    # every step but the last is chosen so that ESS = 0.6 N exactly (root finding), the last one keeps ESS >= 0.6 N
    assert np.allclose(r.ess[:-1], 300, rtol=1e-6) and r.ess[-1] >= 300 * (1 - 1e-6)


def test_tempered_smc_bimodal_both_modes(seed):
    lp, ll, ps = bimodal_target()
    runs = [tempered_smc(lp, ll, ps, 1000, seed(s), ess_target=0.95) for s in range(20)]
    mass = np.array([r.weights[r.particles[:, 0] > 0].sum() for r in runs])
    # by symmetry each mode has mass 1/2. With N = 1000 the binomial SE is 0.016; resample-move inflates it: we allow
    # 0.1 per run (about 6 binomial SEs, 20 runs) and, for the mean of the 20 runs, 7.1 replicate-based SEs (t_19:
    # false alarm 1e-6)
    assert np.all(np.abs(mass - 0.5) < 0.1), mass
    assert abs(mass.mean() - 0.5) < 7.1 * mass.std(ddof=1) / np.sqrt(len(mass))
    assert all(5 <= r.n_steps <= 12 for r in runs)       # the source's "8 steps"


def test_ibis_gaussian_known_variance(seed):
    "IBIS on y ~ N(mu, 1) with a N(0, 1) prior: exact posterior and evidence in closed form."
    rng = np.random.default_rng(seed(20))
    y = 2.0 + rng.standard_normal(25)
    log_prior = lambda th: stats.norm.logpdf(th[:, 0])
    log_lik = lambda th, yb: stats.norm.logpdf(np.asarray(yb).reshape(1, -1), th[:, :1], 1.0).sum(1)
    prior_sample = lambda rng, N: rng.standard_normal((N, 1))
    n = len(y)
    logZ = stats.multivariate_normal(np.zeros(n), np.eye(n) + np.ones((n, n))).logpdf(y)
    post_mean, post_var = y.sum() / (n + 1), 1 / (n + 1)
    runs = [ibis(log_prior, log_lik, prior_sample, y, 1000, seed(s)) for s in range(20)]
    le = np.array([r.log_evidence for r in runs])
    se = le.std(ddof=1) / np.sqrt(len(le))          # replicate-based standard error: Student t with 19 df
    assert abs(le.mean() - logZ) < 7.1 * se + le.var() / 2 + 1e-3, (le, logZ)   # t_19 at 7.1: false alarm 1e-6
    for r in runs[:5]:
        assert len(r.move_steps) >= 1 and np.all(np.diff(r.move_steps) > 0)   # invariant: move steps are recorded in increasing order
        # 5 runs at 5.5 approximate SEs (ESS-based): 5.2 for 1e-6, widened for the ESS approximation
        assert abs(r.means[-1, 0] - post_mean) < 5.5 * np.sqrt(post_var / r.ess[-1])
        assert abs(r.variances[-1, 0] / post_var - 1) < 0.25   # variance of 1000 weighted draws: rel. SE ~ 0.06


# ---------------------------------------------------------------- PMMH

def test_pmmh_matches_exact_posterior(seed):
    "PMMH on a short series: posterior mean of rho equals the exact (Kalman, grid) one within 4 MCSE."
    y, ssm_of, make_model, log_prior = ar1_pmmh_example(T=12, rng=seed(5))
    # (250 draws per chain left R-hat >= 1.1 at 2 seeds in 20: PMMH chains are sticky; 1000 draws)
    res = pmmh(make_model, log_prior, x0=[[0.0], [0.6]], N=40, rng=seed(1), step_size=0.5, n_warmup=100, n_draws=1000)
    assert res.draws.shape == (2, 1000, 1)
    grid = np.linspace(-0.995, 0.995, 399)
    ll = np.array([ssm_of(r).kalman_filter(y).log_evidence for r in grid])
    post = np.exp(ll - ll.max()); post /= np.trapezoid(post, grid)
    exact = np.trapezoid(grid * post, grid)
    s = summary(res.draws, names=["rho"])
    # MCSE from the diagnostics chapter (autocorrelation-aware); R-hat < 1.1 says the chains agree. 5.5 MCSE: 4.9
    # for a false alarm of 1e-6, widened for the error of an MCSE estimated from 2 short chains
    assert s.rhat[0] < 1.1 and abs(s.mean[0] - exact) < 5.5 * s.mcse_mean[0], (s.mean[0], exact, s.mcse_mean[0])


def test_pmmh_keeps_the_current_estimate(seed):
    "The pseudo-marginal rule: only proposals run a particle filter, the current state's estimate is reused."
    y, ssm_of, make_model, log_prior = ar1_pmmh_example(T=5)
    calls = []
    def counting(theta):
        calls.append(float(theta[0])); return make_model(theta)
    n = 40
    res = pmmh(counting, log_prior, x0=[0.0], N=20, rng=seed(0), n_chains=1, step_size=0.05, n_warmup=0, n_draws=n)
    assert np.all(np.abs(res.draws) < 0.9)   # small steps from 0: every proposal stays inside the prior support
    # one evaluation per proposal plus one or two at x0 (the kernel's init, and possibly a start-up check of the
    # driver); re-estimating the current state at every iteration as well would give about 2n calls
    assert n + 1 <= len(calls) <= n + 2, len(calls)
    # reproducible, and the target is a fresh random estimate at every call
    t = pmmh_target(make_model, log_prior, 1, 20, 3)
    a, b = t.logdensity(np.array([0.5])), t.logdensity(np.array([0.5]))
    t2 = pmmh_target(make_model, log_prior, 1, 20, 3)
    assert a != b and t2.logdensity(np.array([0.5])) == a
    assert t.logdensity(np.array([1.5])) == -np.inf
    with pytest.raises(ValueError, match="gradient"):
        t.grad(np.array([0.5]))


def test_pmmh_bad_inputs(seed):
    y, ssm_of, make_model, log_prior = ar1_pmmh_example(T=5)
    with pytest.raises(ValueError, match="x0"):
        pmmh(make_model, log_prior, x0=np.zeros((2, 2, 1)), N=10, rng=seed(0))
    with pytest.raises(ValueError, match="callable"):
        pmmh(None, log_prior, x0=[0.0], N=10, rng=seed(0))
    with pytest.raises(ValueError, match="N"):
        pmmh(make_model, log_prior, x0=[0.0], N=0, rng=seed(0))
    with pytest.raises(ValueError, match="x0"):
        pmmh(make_model, log_prior, x0=[[0.0], [0.1], [0.2]], N=10, rng=seed(0), n_chains=2)
    with pytest.raises(ValueError, match="step_size"):
        pmmh(make_model, log_prior, x0=[0.0], N=10, rng=seed(0), n_chains=2, step_size=[0.1, 0.2, 0.3])


def test_pmmh_chain_draws_do_not_depend_on_the_number_of_chains(seed):
    "Each chain owns its random streams: chain 0 is the same whether it runs alone or beside another chain."
    # (failed before the fix: one shared filter stream interleaved the particle filters of all chains)
    y, ssm_of, make_model, log_prior = ar1_pmmh_example(T=8)
    kw = dict(N=15, rng=seed(0), step_size=0.3, n_warmup=5, n_draws=30)
    one = pmmh(make_model, log_prior, x0=[[0.2]], n_chains=1, **kw)
    two = pmmh(make_model, log_prior, x0=[[0.2], [0.7]], n_chains=2, **kw)
    assert one.draws.shape == (1, 30, 1) and two.draws.shape == (2, 30, 1)
    assert np.array_equal(one.draws[0], two.draws[0])
    assert np.array_equal(one.stats.accept_prob[0], two.stats.accept_prob[0])
    assert not np.array_equal(two.draws[0], two.draws[1])


class _ExactGaussianFK(FeynmanKac):
    "A one-step model whose potential is the same for every particle, so log Z_hat = -|theta|^2 / 2 exactly."
    T = 1
    def __init__(self, theta): self.c = -0.5 * float(np.sum(np.asarray(theta) ** 2))
    def M0(self, rng, N): return np.zeros((N, 1))
    def M(self, rng, t, xp): return xp
    def logG(self, t, xp, x): return np.full(len(x), self.c)


@pytest.mark.filterwarnings("ignore:pmmh:RuntimeWarning")   # one-draw toy runs may accept nothing
def test_pmmh_target_accept_drives_the_step_size_heuristic(seed):
    "Without a step size, pmmh's initial scale comes from Stan's heuristic aimed at target_accept."
    # (failed before the fix: target_accept was ignored unless adapt=True, and the heuristic aimed at 0.8)
    # Exact N(0, I_30) target started at its mode: the log acceptance of one proposal of scale e is
    # -e^2 chi2_30 / 2. Aiming at 0.9 stops the halving at e <= 0.125 unless chi2_30 < 3.4 at e = 0.25
    # (probability 1e-10); aiming at 0.01 stops at e >= 0.25 unless chi2_30 > 147 at e = 0.25 (1e-20).
    kw = dict(x0=np.zeros(30), N=2, n_chains=1, n_warmup=0, n_draws=1)
    easy = pmmh(_ExactGaussianFK, lambda th: 0.0, rng=seed(0), target_accept=0.01, **kw).step_size[0]
    hard = pmmh(_ExactGaussianFK, lambda th: 0.0, rng=seed(0), target_accept=0.9, **kw).step_size[0]
    assert easy >= 0.25 and hard <= 0.125, (easy, hard)
    # a fixed step size without adaptation leaves target_accept nothing to do: refused, not ignored
    with pytest.raises(ValueError, match="target_accept"):
        pmmh(_ExactGaussianFK, lambda th: 0.0, rng=seed(0), step_size=0.1, target_accept=0.3, **kw)
    with pytest.raises(ValueError, match="target_accept"):
        pmmh(_ExactGaussianFK, lambda th: 0.0, rng=seed(0), target_accept=1.5, **kw)
    # with adaptation it is passed to the driver's dual averaging (the run only has to work here)
    res = pmmh(_ExactGaussianFK, lambda th: 0.0, rng=seed(0), **{**kw, "n_warmup": 30, "x0": np.zeros(2)},
               adapt=True, target_accept=0.3)
    assert res.draws.shape == (1, 1, 2)


def test_pmmh_warns_about_chains_that_cannot_mix(seed):
    "Chosen step sizes 10x apart, or a chain accepting under 3%, raise a RuntimeWarning; agreeing chains do not."
    # (failed before the fix: the heuristic gave step sizes [1, 0.002] on the chapter's example and pmmh was silent)
    from bayesnotes.smc import _check_pmmh_chains
    with pytest.warns(RuntimeWarning, match="differ by more than 10x"):
        _check_pmmh_chains([1.0, 0.00195], [0.5, 0.9], chosen=True)
    with pytest.warns(RuntimeWarning, match=r"chain\(s\) \[1\] accepted less than 3%"):
        _check_pmmh_chains([0.3, 0.3], [0.2, 0.01], chosen=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _check_pmmh_chains([1.0, 0.00195], [0.5, 0.9], chosen=False) == []   # the user chose them
        assert _check_pmmh_chains([0.3, 0.5], [0.2, 0.3], chosen=True) == []
    # end to end: a scale 1000 on rho in (-1, 1) puts a proposal inside the prior support with probability
    # 2 / (1000 sqrt(2 pi)) = 8e-4, so the mean acceptance probability of each chain is below 8e-4 on average; it
    # reaches 3% only if at least 6 of 200 proposals land in (-1, 1): Binomial(200, 8e-4) tail < 1e-12 per chain
    y, ssm_of, make_model, log_prior = ar1_pmmh_example(T=10)
    with pytest.warns(RuntimeWarning, match="accepted less than 3%"):
        pmmh(make_model, log_prior, x0=[0.5], N=20, rng=seed(2), step_size=1000.0, n_warmup=0, n_draws=200)


# ---------------------------------------------------------------- errors and validation

class _BadModel(FeynmanKac):
    T = 5
    def __init__(self, fail_at, value): self.fail_at, self.value = fail_at, value
    def M0(self, rng, N): return rng.standard_normal(N)
    def M(self, rng, t, xp): return xp + rng.standard_normal(len(xp))
    def logG(self, t, xp, x):
        return np.full(len(x), self.value) if t == self.fail_at else -0.5 * x ** 2


def test_weighted_moments_far_from_zero(seed):
    "The recorded weighted variance is right for particles at 1e4..1e6 with sd 1e-3 (no E[x^2] - m^2 cancellation)."
    # (failed before the fix: E[x^2] - m^2 gave 1.9e-6 instead of 9.6e-7 at 1e5, and 0 at 1e6); rounding of
    # L + d costs a relative 1e-7 of d at L = 1e6, far inside rtol 1e-5
    from bayesnotes.smc import _weighted_moments
    rng = np.random.default_rng(seed(3))
    d, W = 1e-3 * rng.standard_normal((500, 2)), rng.dirichlet(np.ones(500))
    v_exact = W @ (d - W @ d) ** 2
    for L in (1e4, 1e5, 1e6):
        m, v = _weighted_moments(W, L + d)
        assert np.allclose(v, v_exact, rtol=1e-5, atol=0) and np.allclose(m, L + W @ d, rtol=1e-14), (L, v, v_exact)


def test_smc_records_stack_into_the_result(seed):
    "The per-step records: log_evidence is exactly the sum of the increments; record t is row t of the result."
    ssm = LinearGaussianSSM(A=0.9, C=1.0, Q=1.0, R=0.5, P0=1 / 0.19)
    _, y = ssm.simulate(15, rng=seed(12))
    res = bootstrap_filter(ssm, y, 64, seed(13), store_history=True)
    assert res.log_evidence == float(res.log_lik_steps.sum())
    assert res.ess.shape == res.resampled.shape == res.log_lik_steps.shape == (15,) and not res.resampled[0]
    assert res.means.shape == res.variances.shape == (15, 1) and res.weight_history.shape == res.ancestors.shape
    assert np.array_equal(res.history[-1], res.particles) and np.array_equal(res.weight_history[-1], res.weights)
    assert np.array_equal(res.ancestors[0], np.arange(64))
    assert set(SMCStep._fields) >= {"t", "log_lik_step", "ess", "resampled", "ancestors"}


def test_nonlinear_ssm_with_linear_maps_reproduces_the_linear_model(seed):
    "The nonlinear SSM with f(x) = A x and h(x) = C x shares the Gaussian-noise code: same draws, same estimates."
    A, C, Q, R = np.array([[0.9, 0.1], [0.0, 0.8]]), np.array([[1.0, 0.5]]), np.eye(2), np.array([[0.3]])
    lin = LinearGaussianSSM(A=A, C=C, Q=Q, R=R, P0=Q)
    nonlin = NonlinearGaussianSSM(lambda x: x @ A.T, lambda x: x @ C.T, Q, R, m0=np.zeros(2), P0=Q)
    x1, y1 = lin.simulate(12, rng=seed(14))
    x2, y2 = nonlin.simulate(12, rng=seed(14))
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
    r1, r2 = bootstrap_filter(lin, y1, 50, seed(15)), bootstrap_filter(nonlin, y1, 50, seed(15))
    assert r1.log_evidence == r2.log_evidence and np.array_equal(r1.means, r2.means)


def test_all_weights_zero_names_the_step():
    with pytest.raises(ValueError, match=r"t=3.*zero weight"):
        smc(_BadModel(3, -np.inf), 50, 0)


def test_nan_potential_names_the_step():
    with pytest.raises(ValueError, match=r"NaN.*t=2"):
        smc(_BadModel(2, np.nan), 50, 0)


def test_bad_inputs_raise_value_error(ar1):
    ssm, y, _ = ar1
    model = bootstrap_model(ssm, y)
    with pytest.raises(ValueError, match="N"):
        smc(model, 0, 1)
    with pytest.raises(ValueError, match="rng"):
        smc(model, 10, 1.5)
    with pytest.raises(ValueError, match="resampling"):
        smc(model, 10, 1, resampling="bogus")
    with pytest.raises(ValueError, match="scheme"):
        resample(W10, "bogus", rng=0)
    with pytest.raises(ValueError, match="ess_threshold"):
        smc(model, 10, 1, ess_threshold=1.5)
    with pytest.raises(ValueError, match="model"):
        smc(object(), 10, 1)
    with pytest.raises(ValueError, match="y must have shape"):
        bootstrap_model(ssm, np.ones((5, 2)))
    with pytest.raises(ValueError, match="y must be finite"):
        bootstrap_model(ssm, [1.0, np.nan])
    with pytest.raises(ValueError, match="W"):
        resample([0.5, 0.6], "systematic", rng=0)
    with pytest.raises(ValueError, match="W"):
        systematic(np.ones((2, 2)) / 4, M=4, rng=0)
    with pytest.raises(ValueError, match="M"):
        stratified(W10, M=0, rng=0)
    with pytest.raises(ValueError, match="R must be positive definite"):
        LinearGaussianSSM(A=1.0, C=1.0, Q=1.0, R=0.0)
    with pytest.raises(ValueError, match="Q must be positive semi-definite"):
        LinearGaussianSSM(A=1.0, C=1.0, Q=-1.0, R=1.0)
    with pytest.raises(ValueError, match="C must"):
        LinearGaussianSSM(A=np.eye(2), C=np.ones((1, 3)), Q=np.eye(2), R=1.0)
    with pytest.raises(ValueError, match="guided|sample_optimal"):
        guided_model(tracker_ssm(), np.zeros((3, 2)))

    class WrongN(_BadModel):
        def M(self, rng, t, xp): return xp[:-1]
    with pytest.raises(ValueError, match="first axis N"):
        smc(WrongN(9, 0.0), 20, 0)


def test_sampler_bad_inputs():
    (lp, ll, ps), *_ = _blr_problem()
    with pytest.raises(ValueError, match="log_lik must return one value per particle"):
        tempered_smc(lp, lambda w: ll(w)[:, None], ps, 100, 0)
    with pytest.raises(ValueError, match="log_lik returned NaN"):
        tempered_smc(lp, lambda w: np.full(len(w), np.nan), ps, 100, 0)
    with pytest.raises(ValueError, match="prior_sample"):
        tempered_smc(lp, ll, lambda rng, N: np.zeros((N + 1, 2)), 100, 0)
    with pytest.raises(ValueError, match="ess_target"):
        tempered_smc(lp, ll, ps, 100, 0, ess_target=1.0)
    with pytest.raises(ValueError, match="n_mcmc"):
        tempered_smc(lp, ll, ps, 100, 0, n_mcmc=-1)
    with pytest.raises(ValueError, match="log_prior must be callable"):
        ibis(None, ll, ps, np.zeros(3), 100, 0)
    with pytest.raises(ValueError, match="data"):
        ibis(lp, lambda w, yb: ll(w), ps, np.zeros(0), 100, 0)


# ---------------------------------------------------------------- model hooks

@pytest.mark.parametrize("cls, hooks", [
    (FeynmanKac, {"M0": ["rng", "N"], "M": ["rng", "t", "xp"], "logG": ["t", "xp", "x"]}),
    (StateSpaceModel, {"sample_initial": ["rng", "N"], "sample_transition": ["rng", "t", "xp"],
                       "log_obs": ["t", "x", "yt"], "sample_obs": ["rng", "t", "x"]}),
    (GaussianSSM, {"f": ["xp"], "h": ["x"]})])
def test_model_hooks_declare_their_signature_docs_and_a_named_error(cls, hooks):
    """The hooks a subclass defines are declared once each: the signature the engine calls, a comment for every
    parameter (from the one glossary `_hook_parameters`, as show_doc renders it) and an error naming the subclass."""
    docments = pytest.importorskip("fastcore.docments").docments   # nbdev's dependency, not the package's
    class Bare(cls):
        pass
    for name, params in hooks.items():
        hook = getattr(cls, name)
        assert hook.__name__ == name and hook.__doc__
        assert list(inspect.signature(hook).parameters) == ["self", *params]
        docs = docments(hook)
        assert all(docs[p] for p in params), (name, docs)
        with pytest.raises(NotImplementedError, match=rf"^Bare must define {name}\({', '.join(params)}\)$"):
            getattr(Bare(), name)(*[None] * len(params))
    assert docments(StateSpaceModel.sample_transition)["xp"] == docments(FeynmanKac.M)["xp"]   # one glossary


# ---------------------------------------------------------------- one way to say a model: Targets (issue 32, item 2)
import autograd.numpy as anp
from bayesnotes.targets import Target


def _gauss_pair():
    "The same prior N(0, I_2) and likelihood as vectorised functions, single-point autograd densities and batched ones."
    lp = lambda th: -0.5 * np.sum(th ** 2, axis=1)
    ll = lambda th: -2.0 * np.sum((th - 1.0) ** 2, axis=1)
    lp1 = lambda x: -0.5 * anp.sum(x ** 2)                    # one point (2,), as NUTS takes it
    ll1 = lambda x: -2.0 * anp.sum((x - 1.0) ** 2)
    ps = lambda rng, N: rng.standard_normal((N, 2))
    return lp, ll, lp1, ll1, ps


def _same_run(a, b, fields):
    for f in fields:
        x, y = np.asarray(getattr(a, f), float), np.asarray(getattr(b, f), float)
        assert x.shape == y.shape and np.allclose(x, y, rtol=0, atol=1e-12), f


def test_tempered_smc_takes_targets(seed):
    "A Target (row by row, or batched) gives the run the vectorised callables give with the same seed."
    lp, ll, lp1, ll1, ps = _gauss_pair()
    ref = tempered_smc(lp, ll, ps, 200, seed(1), ess_target=0.8)
    fields = ("particles", "weights", "log_evidence", "temperatures", "ess", "acceptance")
    _same_run(tempered_smc(Target(lp1, 2), Target(ll1, 2), ps, 200, seed(1), ess_target=0.8), ref, fields)
    _same_run(tempered_smc(Target(lp1, 2), ll, ps, 200, seed(1), ess_target=0.8), ref, fields)   # one of each
    assert ref.n_steps > 2                                # several reweightings and moves were compared


def test_batched_target_is_called_once_per_evaluation(seed):
    "A batched Target is evaluated in one call per batch (as many calls as the vectorised function); a plain one row by row."
    lp, ll, lp1, ll1, ps = _gauss_pair()
    calls = {"vec": [], "batched": [], "rows": 0}
    def ll_vec(th): calls["vec"].append(th.shape); return ll(th)
    def ll_batched(x): calls["batched"].append(np.shape(x)); return -2.0 * anp.sum((x - 1.0) ** 2, axis=-1)
    def ll_row(x): calls["rows"] += 1; return ll1(x)
    a = tempered_smc(lp, ll_vec, ps, 100, seed(2), ess_target=0.8)
    b = tempered_smc(lp, Target(ll_batched, 2, batched=True), ps, 100, seed(2), ess_target=0.8)
    c = tempered_smc(lp, Target(ll_row, 2), ps, 100, seed(2), ess_target=0.8)
    assert calls["batched"] == calls["vec"] and all(len(s) == 2 for s in calls["vec"])
    assert calls["rows"] == sum(s[0] for s in calls["vec"])
    assert a.log_evidence == b.log_evidence and abs(a.log_evidence - c.log_evidence) < 1e-12


def test_target_of_the_wrong_dim_is_refused():
    lp, ll, lp1, ll1, ps = _gauss_pair()
    with pytest.raises(ValueError, match=r"^log_lik is a Target of dimension 3, but the particles \(drawn by prior_sample\) "
                                         r"have dimension 2"):
        tempered_smc(lp, Target(ll1, 3), ps, 50, 0)
    with pytest.raises(ValueError, match=r"^log_prior is a Target of dimension 1"):
        ibis(Target(lp1, 1), lambda th, yb: ll(th), ps, np.zeros(3), 50, 0)
    with pytest.raises(ValueError, match=r"^log_lik of ibis must be a function"):
        ibis(lp, Target(ll1, 2), ps, np.zeros(3), 50, 0)


def test_ibis_takes_a_target_prior(seed):
    "IBIS's prior as a Target (its likelihood depends on the data, so it stays a function): the same run."
    y = np.array([0.3, 1.1, -0.4, 0.8, 1.5, 0.2])
    log_prior = lambda th: -0.5 * np.sum(th ** 2, axis=1)
    log_lik = lambda th, yb: -0.5 * np.sum((np.asarray(yb).reshape(1, -1) - th[:, :1]) ** 2, axis=1)
    ps = lambda rng, N: rng.standard_normal((N, 1))
    ref = ibis(log_prior, log_lik, ps, y, 200, seed(3), ess_threshold=0.8)
    got = ibis(Target(lambda x: -0.5 * anp.sum(x ** 2), 1), log_lik, ps, y, 200, seed(3), ess_threshold=0.8)
    _same_run(got, ref, ("particles", "weights", "log_evidence", "ess", "move_steps", "acceptance"))
    assert len(ref.move_steps) >= 1


def test_resamplers_old_positional_order_warns_and_agrees():
    "systematic(W, M, rng) and resample(W, scheme, rng, M), the old orders, work for one release with a DeprecationWarning."
    for name, fn in RESAMPLING.items():
        with pytest.warns(DeprecationWarning, match=r"pass M= and rng= by keyword"):
            old = fn(W10, 7, 3)
        assert np.array_equal(old, fn(W10, M=7, rng=3))
        with pytest.warns(DeprecationWarning, match=r"pass M= and rng= by keyword"):
            old = resample(W10, name, 3, 7)
        assert np.array_equal(old, resample(W10, name, M=7, rng=3))
        with pytest.warns(DeprecationWarning, match=r"got rng by position"):
            assert np.array_equal(resample(W10, name, 3), resample(W10, name, rng=3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                    # the keyword calls do not warn
        systematic(W10, M=5, rng=0); resample(W10, "residual", M=5, rng=0); resample(W10)
    with pytest.raises(TypeError, match="'rng' by position and by keyword"):
        resample(W10, "systematic", 3, rng=3)
    assert list(inspect.signature(systematic).parameters)[-2:] == ["M", "rng"]
    assert inspect.signature(systematic).parameters["M"].kind is inspect.Parameter.KEYWORD_ONLY


def test_pmmh_takes_the_prior_as_a_target(seed):
    "One way to say a model (issue 32): the prior may be a Target, as the samplers take it; same draws as the function."
    from bayesnotes.targets import Target
    y, ssm_of, make_model, log_prior = ar1_pmmh_example(T=6)
    kw = dict(x0=[0.1], N=15, rng=seed(0), n_chains=1, step_size=0.3, n_warmup=5, n_draws=20)
    prior_t = Target(lambda th: float(log_prior(th)), 1, grad=lambda th: np.zeros(1))   # any gradient: pmmh never asks
    a, b = pmmh(make_model, log_prior, **kw), pmmh(make_model, prior_t, **kw)
    assert np.array_equal(a.draws, b.draws)
    with pytest.raises(ValueError, match="log_prior has dimension 2, but theta has dimension 1"):
        pmmh(make_model, Target(lambda th: 0.0, 2, grad=lambda th: np.zeros(2)), **kw)
