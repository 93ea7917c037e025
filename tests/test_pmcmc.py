"""Tests of bayesnotes.pmcmc: the RTS smoother against brute-force Gaussian conditioning, the particle smoothers
(genealogy, FFBS) and the particle MCMC samplers (PIMH, conditional SMC with and without ancestor sampling, particle
Gibbs for a parameter) against the exact answers of linear-Gaussian models, and input validation.

Every statistical bound is a multiple of a standard error that is exact, estimated from independent replicates,
or estimated from the chains by `diagnostics.mcse_mean`/`mcse_sd`; the comment at each check gives the number of
comparisons and the false-alarm probability."""
import numpy as np
import pytest
from scipy import linalg, stats

from bayesnotes.diagnostics import ess_bulk, mcse_mean, mcse_sd, rhat
from bayesnotes.smc import (FeynmanKac, LinearGaussianSSM, bootstrap_model, guided_model, nonmarkov_ssm, smc,
                            tracker_ssm, trajectories, ar1_example)
from bayesnotes.pmcmc import (ar1_gibbs_example, csmc, distinct_ancestors, ffbs, gaussian_log_transition,
                              genealogy_smoother, iterated_csmc, particle_gibbs, pimh, rts_smoother, update_rate)


def _joint_posterior(ssm, y):
    """Brute force: mean (T*dx,), covariance (T*dx, T*dx) of x_{0:T-1} | y and log p(y), by conditioning the joint
    Gaussian of (x, y). Independent of the Kalman recursions: x = mu + G z with z = (x_0 - m0, eps_1, ...)."""
    y = ssm.check_y(y)
    T, dx, dy = len(y), ssm.dim_x, ssm.dim_y
    G = np.zeros((T * dx, T * dx))
    mu = np.zeros(T * dx)
    for t in range(T):
        mu[t * dx:(t + 1) * dx] = np.linalg.matrix_power(ssm.A, t) @ ssm.m0
        for s in range(t + 1):
            G[t * dx:(t + 1) * dx, s * dx:(s + 1) * dx] = np.linalg.matrix_power(ssm.A, t - s)
    Sz = linalg.block_diag(ssm.P0, *[ssm.Q] * (T - 1))
    Sxx = G @ Sz @ G.T
    H = linalg.block_diag(*[ssm.C] * T)
    Syy = H @ Sxx @ H.T + linalg.block_diag(*[ssm.R] * T)
    Sxy = Sxx @ H.T
    K = linalg.solve(Syy, Sxy.T, assume_a="pos").T
    yv = y.ravel()
    mean = mu + K @ (yv - H @ mu)
    cov = Sxx - K @ Sxy.T
    return mean, 0.5 * (cov + cov.T), stats.multivariate_normal(H @ mu, Syy).logpdf(yv)


def _random_lgssm(rng):
    A = 0.5 * rng.standard_normal((2, 2))
    B = rng.standard_normal((2, 2))
    return LinearGaussianSSM(A=A, C=rng.standard_normal((1, 2)), Q=B @ B.T + 0.1 * np.eye(2), R=[[0.3]],
                             m0=rng.standard_normal(2), P0=np.eye(2))


# ---------------------------------------------------------------- the exact reference


@pytest.mark.parametrize("which", ["ar1", "random2d", "nonmarkov"])
def test_rts_matches_joint_gaussian(which):
    "RTS means, covariances and lag-one covariances equal those of the joint Gaussian posterior (small T, exact)."
    ssm = {"ar1": lambda: ar1_example()[0], "random2d": lambda: _random_lgssm(np.random.default_rng(7)),
           "nonmarkov": nonmarkov_ssm}[which]()        # nonmarkov: singular Q and P0
    T = 6
    _, y = ssm.simulate(T, rng=11)                      # data that only define the example
    res = rts_smoother(ssm, y)
    mean, cov, log_evidence = _joint_posterior(ssm, y)
    dx = ssm.dim_x
    blk = lambda s, t: cov[s * dx:(s + 1) * dx, t * dx:(t + 1) * dx]
    scale = max(1.0, np.abs(cov).max())
    assert np.allclose(res.means.ravel(), mean, atol=1e-9 * scale)
    for t in range(T):
        assert np.allclose(res.covs[t], blk(t, t), atol=1e-9 * scale)
    for t in range(T - 1):
        assert np.allclose(res.cross_covs[t], blk(t, t + 1), atol=1e-9 * scale)
    assert np.isclose(res.log_evidence, log_evidence, atol=1e-8)
    kf = ssm.kalman_filter(y)                           # the last smoothing marginal is the last filtering one
    assert np.allclose(res.means[-1], kf.means[-1]) and np.allclose(res.covs[-1], kf.covs[-1])


def test_rts_rejects_a_nonlinear_model():
    with pytest.raises(ValueError, match="ssm"):
        rts_smoother(tracker_ssm(), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="y"):
        rts_smoother(ar1_example()[0], np.zeros((5, 3)))


# ---------------------------------------------------------------- particle smoothers


def test_genealogy_counts_and_draws(seed):
    "Distinct ancestors never decrease with t and end at N; genealogy draws are complete paths of the filter."
    ssm, _, y = ar1_example(30)
    res = smc(bootstrap_model(ssm, y), 50, seed(1), store_history=True)
    k = distinct_ancestors(res.ancestors)
    assert k.shape == (30,) and k[-1] == 50 and np.all(np.diff(k) >= 0) and k[0] >= 1
    d = genealogy_smoother(res, 20, seed(2))
    paths = trajectories(res)[:, :, 0]                  # (T, N): every draw must be one of these N columns
    assert d.shape == (20, 30, 1)
    assert all(np.any(np.all(paths.T == row[:, 0], axis=1)) for row in d)


def test_smoothing_means_within_mc_error(seed):
    """Genealogy and FFBS smoothing means (and FFBS second moments) agree with RTS, over R independent filter runs.

    The draws of one run are dependent (they share one particle system), so each run gives one estimate and the
    standard error comes from the spread of the R = 40 independent run estimates (t with 39 df). Particle smoothers
    are consistent, not unbiased: their O(1/N) bias must stay small against that SE. With the guided filter and
    N = 200 it is below one SE (measured with 1000 runs); the bootstrap filter is not used here because an outlier
    (y_12 = -3.5) collapses its ESS to 2 and biases it by several SEs."""
    T, N, M, R = 15, 200, 50, 40
    ssm, _, y = ar1_example(T)
    rts = rts_smoother(ssm, y)
    rng = np.random.default_rng(seed(3))
    gen, bs, bs2 = [], [], []
    for _ in range(R):
        res = smc(guided_model(ssm, y), N, rng, store_history=True)
        gen.append(trajectories(res)[:, :, 0] @ res.weights)   # the genealogy estimate, weighted (no extra draws)
        d = ffbs(res, ssm, M, rng)[:, :, 0]
        bs.append(d.mean(0))
        bs2.append(((d - rts.means[:, 0]) ** 2).mean(0))
    # 3 statistics x 15 times = 45 comparisons; P(|t_39| > 6) = 5.2e-7 each: false alarm < 2.4e-5 (plus the bias)
    for est, ref in ((gen, rts.means[:, 0]), (bs, rts.means[:, 0]), (bs2, rts.covs[:, 0, 0])):
        est = np.array(est)
        se = est.std(0, ddof=1) / np.sqrt(R)
        assert np.all(np.abs(est.mean(0) - ref) < 6 * se), ((est.mean(0) - ref) / se)


def test_smoothers_bad_input(seed):
    ssm, _, y = ar1_example(10)
    res = smc(bootstrap_model(ssm, y), 20, seed(4))             # no history
    with pytest.raises(ValueError, match="store_history"):
        genealogy_smoother(res, 5)
    with pytest.raises(ValueError, match="store_history"):
        ffbs(res, ssm, 5)
    res = smc(bootstrap_model(ssm, y), 20, seed(4), store_history=True)
    with pytest.raises(ValueError, match="M"):
        genealogy_smoother(res, 0)
    with pytest.raises(ValueError, match="M"):
        ffbs(res, ssm, 1.5)
    with pytest.raises(ValueError, match="log_transition"):
        ffbs(res, None, 5)
    with pytest.raises(ValueError, match="positive definite Q"):
        gaussian_log_transition(nonmarkov_ssm())
    with pytest.raises(ValueError, match="log_transition"):
        ffbs(res, lambda t, xp, x: np.zeros(3), 5)              # wrong number of values
    with pytest.raises(ValueError, match="ancestors"):
        distinct_ancestors(np.zeros(5, dtype=int))


def test_gaussian_log_transition_matches_scipy():
    ssm = tracker_ssm()
    lt = gaussian_log_transition(ssm)
    xp, x = np.array([[0.3, -1.0], [1.0, 2.0]]), np.array([[0.5, -0.7], [0.9, 2.4]])
    ref = [stats.multivariate_normal(ssm.f(xp[i:i + 1])[0], 0.01 * np.eye(2)).logpdf(x[i]) for i in range(2)]
    assert np.allclose(lt(1, xp, x), ref)


# ---------------------------------------------------------------- conditional SMC is exact


@pytest.mark.parametrize("kind", ["bootstrap", "guided"])
@pytest.mark.parametrize("ancestor_sampling", [False, True])
def test_csmc_leaves_the_posterior_invariant(seed, kind, ancestor_sampling):
    """Draw x_ref from the exact posterior, apply one cSMC sweep with N = 3: the output is again an exact draw.

    R = 1500 independent repetitions give iid draws, so the standard errors are exact: sqrt(P_t / R) for the mean
    of x_t and sqrt(2 / R) P_t for the mean of (x_t - m_t)^2 (Gaussian fourth moment). 5 SEs, 2 statistics x 5
    times x 4 variants = 40 comparisons: false alarm < 40 * 5.7e-7 = 2.3e-5."""
    T, N, R = 5, 3, 1500
    ssm, _, y = ar1_example(T)
    mean, cov, _ = _joint_posterior(ssm, y)
    model = (bootstrap_model if kind == "bootstrap" else guided_model)(ssm, y)
    rng = np.random.default_rng(seed(5) + 10 * ancestor_sampling + (kind == "guided"))
    L = np.linalg.cholesky(cov)
    out = np.array([csmc(model, (mean + L @ rng.standard_normal(T))[:, None], N, rng,
                         ancestor_sampling=ancestor_sampling)[:, 0] for _ in range(R)])
    P = np.diag(cov)
    assert np.all(np.abs(out.mean(0) - mean) < 5 * np.sqrt(P / R))
    assert np.all(np.abs(((out - mean) ** 2).mean(0) - P) < 5 * np.sqrt(2 / R) * P)


def test_csmc_bad_input(seed):
    ssm, _, y = ar1_example(8)
    model = bootstrap_model(ssm, y)
    x = np.zeros((8, 1))
    with pytest.raises(ValueError, match="N"):
        csmc(model, x, 1, seed(6))
    with pytest.raises(ValueError, match="x_ref"):
        csmc(model, np.zeros((7, 1)), 5, seed(6))
    with pytest.raises(ValueError, match="x_ref"):
        csmc(model, np.zeros((8, 2)), 5, seed(6))
    with pytest.raises(ValueError, match="x_ref"):
        csmc(model, np.full((8, 1), np.nan), 5, seed(6))

    class NoSSM(FeynmanKac):
        T = 8
        def M0(self, rng, N): return rng.standard_normal((N, 1))
        def M(self, rng, t, xp): return xp + rng.standard_normal(xp.shape)
        def logG(self, t, xp, x): return -0.5 * x[:, 0] ** 2
    with pytest.raises(ValueError, match="log_transition"):
        csmc(NoSSM(), x, 5, seed(6), ancestor_sampling=True)
    with pytest.raises(ValueError, match="log_transition"):     # the default is ancestor sampling
        csmc(NoSSM(), x, 5, seed(6))
    assert csmc(NoSSM(), x[:, 0], 5, seed(6), ancestor_sampling=False).shape == (8, 1)   # a 1-d path is read as (T, 1)
    with pytest.raises(ValueError, match="model"):
        csmc(object(), x, 5, seed(6))


# ---------------------------------------------------------------- PIMH, particle Gibbs


def test_pimh_and_pgas_posterior_means(seed):
    """Posterior means of x_0, x_10, x_19 from PIMH and from PGAS agree with the RTS smoother.

    Bounds: 5.5 MCSEs (`diagnostics.mcse_mean`, from the chains' autocorrelation); 6 comparisons. With a known SE,
    P(|Z| > 5.5) = 3.8e-8 each (false alarm < 2.3e-7); the margin over 4.9 (1e-6) absorbs the error of an MCSE
    estimated from 2 chains of 400 draws."""
    T = 20
    ssm, _, y = ar1_example(T)
    rts = rts_smoother(ssm, y)
    model = bootstrap_model(ssm, y)
    runs = {"PIMH": pimh(model, 150, seed(7), n_warmup=20, n_draws=400).draws,   # acceptance about 0.6
            "PGAS": iterated_csmc(model, 10, seed(8), n_warmup=20, n_draws=400, ancestor_sampling=True)}
    for name, d in runs.items():
        assert d.shape == (2, 400, T, 1)
        for t in (0, 10, T - 1):
            x = d[:, :, t, 0]
            assert ess_bulk(x) > 50, (name, t)     # enough for the MCSE to mean something (measured: 146 to 271)
            assert abs(x.mean() - rts.means[t, 0]) < 5.5 * mcse_mean(x), (name, t, x.mean(), rts.means[t, 0])


def test_pg_without_ancestor_sampling_sticks_at_early_times(seed):
    """With N = 5 and T = 30, plain PG hardly ever changes x_0, PGAS usually does (the classic picture).

    Over 150 transitions a rate's binomial SE is at most 0.041; measured rates are about 0.01 (PG) and 0.6 (PGAS),
    so the asserted gap of 0.3 is more than 10 SEs from both. PGAS runs with the defaults of `iterated_csmc`: this
    fails if the default is plain PG again (a frozen x_0 at every seed)."""
    ssm, _, y = ar1_example(30)
    model = bootstrap_model(ssm, y)
    pg = update_rate(iterated_csmc(model, 5, seed(9), n_warmup=10, n_draws=151, n_chains=1, ancestor_sampling=False))
    pgas = update_rate(iterated_csmc(model, 5, seed(9), n_warmup=10, n_draws=151, n_chains=1))   # default: PGAS
    assert pg.shape == (30,) and pgas[0] > pg[0] + 0.3
    assert pg[-1] > pg[0] + 0.3       # plain PG does renew the end of the path


@pytest.mark.slow   # over ~10 s quiet: in `make test-slow` (keeps `make test` inside its time budget)
def test_particle_gibbs_rho_against_quadrature(seed):
    """PGAS for the AR coefficient: posterior mean and sd of rho against the exact posterior (quadrature of prior x
    Kalman likelihood on a fine grid). 5.5 MCSEs (`mcse_mean`, `mcse_sd`), 2 comparisons: false alarm < 1e-7 with a
    known SE, the margin over 5.3 (1e-7) absorbing the estimation error of the MCSE."""
    y, make_model, update_rho, posterior_on = ar1_gibbs_example(T=30)
    res = particle_gibbs(make_model, update_rho, [[0.0], [0.95]], 10, seed(10), n_warmup=20, n_draws=500)
    assert res.theta.shape == (2, 500, 1) and res.paths.shape == (2, 500, 30, 1)
    grid = np.linspace(-1.5, 2.0, 3501)
    p = posterior_on(grid)
    m = np.trapezoid(grid * p, grid)
    sd = np.sqrt(np.trapezoid((grid - m) ** 2 * p, grid))
    r = res.theta[:, :, 0]
    assert rhat(r) < 1.1 and ess_bulk(r) > 50               # the chains mixed (a sanity check, not the test)
    assert abs(r.mean() - m) < 5.5 * mcse_mean(r), (r.mean(), m)
    assert abs(r.std(ddof=1) - sd) < 5.5 * mcse_sd(r), (r.std(ddof=1), sd)


def test_samplers_bad_input(seed):
    y, make_model, update_rho, _ = ar1_gibbs_example(T=10)
    model = make_model([0.5])
    with pytest.raises(ValueError, match="n_draws"):
        pimh(model, 10, seed(11), n_draws=0)
    with pytest.raises(ValueError, match="N"):
        iterated_csmc(model, 1, seed(11))
    with pytest.raises(ValueError, match="n_chains"):
        iterated_csmc(model, 5, seed(11), n_chains=0)

    class Open(FeynmanKac):                       # T = None: no fixed horizon
        def M0(self, rng, N): return np.zeros((N, 1))
        def M(self, rng, t, xp): return xp
        def logG(self, t, xp, x): return np.zeros(len(x))
    with pytest.raises(ValueError, match="T"):
        pimh(Open(), 10, seed(11))
    with pytest.raises(ValueError, match="theta0"):
        particle_gibbs(make_model, update_rho, [[0.1], [0.2], [0.3]], 5, seed(11), n_chains=2)
    with pytest.raises(ValueError, match="theta0"):
        particle_gibbs(make_model, update_rho, [np.nan], 5, seed(11))
    with pytest.raises(ValueError, match="update_theta"):
        particle_gibbs(make_model, lambda rng, x: np.zeros(2), [0.5], 5, seed(11), n_warmup=0, n_draws=2)
    with pytest.raises(ValueError, match="callable"):
        particle_gibbs(make_model, None, [0.5], 5, seed(11))
    with pytest.raises(ValueError, match="draws"):
        update_rate(np.zeros((2, 1, 5, 1)))
