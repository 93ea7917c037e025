"""Tests of bayesnotes.ais: annealed importance sampling against exact evidences (closed form of a Gaussian prior times
a Gaussian-mixture likelihood, checked by quadrature), its reduction to importance sampling, unbiasedness of Z_hat,
the effect of the number of temperatures, and input validation.

Statistical bounds are Student-t quantiles of the mean of R independent runs (standard error from the runs' spread)
at the false-alarm probability stated next to them, plus an explicit allowance for the known Jensen bias of log Z_hat."""
import numpy as np
import pytest
from scipy import integrate, stats

from bayesnotes.ais import ais, ais_temperature_study, ais_vs_importance, annealing_path, mixture_evidence_problem
from bayesnotes.montecarlo import importance_sample


def t_bound(R, alpha):
    "Two-sided Student-t quantile for the mean of R runs at false-alarm probability alpha."
    return stats.t.isf(alpha / 2, R - 1)


def test_exact_evidence_by_quadrature():
    "Eq. (3) against two-dimensional adaptive quadrature of prior x likelihood, for two weightings of the modes."
    for w in ((0.5, 0.3, 0.2), (0.1, 0.9)):
        pb = mixture_evidence_problem(dim=2, weights=w, prior_sd=2.0, mode_sd=0.7)
        f = lambda b, a: np.exp(pb.log_prior(np.array([[a, b]])) + pb.log_lik(np.array([[a, b]])))[0]
        Z, _ = integrate.dblquad(f, -9, 9, -9, 9, epsabs=1e-14, epsrel=1e-10)
        assert abs(np.log(Z) - pb.log_evidence) < 1e-7


def test_single_temperature_is_importance_sampling(seed):
    "betas = [0, 1]: the same random stream gives importance sampling from the prior, weight for weight."
    pb = mixture_evidence_problem(dim=3)

    class Prior:
        def rvs(self, size, random_state): return pb.prior_sample(random_state, size)
        def logpdf(self, x): return pb.log_prior(x)

    for n_mcmc in (0, 2):     # moves after the last (only) reweighting do not change the weights
        r = ais(pb.log_prior, pb.log_lik, pb.prior_sample, 400, betas=[0.0, 1.0], n_mcmc=n_mcmc, rng=seed(1))
        q = importance_sample(lambda x: pb.log_prior(x) + pb.log_lik(x), Prior(), 400, rng=seed(1))
        assert np.allclose(r.log_weights, q.log_weights, rtol=0, atol=1e-10)
        assert abs(r.log_evidence - q.log_evidence) < 1e-10 and abs(r.ess - q.ess) < 1e-6
        assert abs(r.log_evidence_stderr - q.log_evidence_stderr) < 1e-10


@pytest.fixture(scope="module")
def replicates(seed):
    "R = 30 independent AIS runs (N = 200, T = 64) on the d = 2 and d = 4 mixture problems."
    out = {}
    for d in (2, 4):
        pb = mixture_evidence_problem(dim=d)
        le = np.array([ais(*pb[:3], 200, n_temps=64, n_mcmc=2, scale=0.5, rng=seed(100 * d + k)).log_evidence
                       for k in range(30)])
        out[d] = (le, pb.log_evidence)
    return out


def test_log_evidence_matches_exact(replicates):
    "Mean of log Z_hat over 30 runs against the exact log Z, d = 2 and 4."
    for d, (le, exact) in replicates.items():
        R = le.size
        k = t_bound(R, 1e-6 / 2)   # 2 comparisons, family-wise false alarm 1e-6
        # E log Z_hat = log Z - Var(log Z_hat) / 2 + O(Var^2): the sample variance is the allowance
        assert abs(le.mean() - exact) < k * le.std(ddof=1) / np.sqrt(R) + le.var(ddof=1) / 2, (d, le.mean(), exact)


def test_evidence_estimate_is_unbiased(replicates):
    "E[Z_hat / Z] = 1: the mean over 30 runs of Z_hat / Z against 1 (t test), d = 2 and 4."
    for d, (le, exact) in replicates.items():
        ratio = np.exp(le - exact)
        R = ratio.size
        # 2 comparisons at family-wise false alarm 1e-6; Z_hat / Z has relative sd 0.1-0.3 here, so its mean over 30
        # runs is close to normal (the t statistic of a mildly skewed variable stays within this bound)
        k = t_bound(R, 1e-6 / 2)
        assert abs(ratio.mean() - 1) < k * ratio.std(ddof=1) / np.sqrt(R), (d, ratio.mean(), ratio.std(ddof=1))


def test_more_temperatures_reduce_variance(seed):
    "Variance of log Z_hat at T = 1 against T = 128 (d = 3, N = 100, 16 runs each)."
    st = ais_temperature_study(n_temps=(1, 128), N=100, n_reps=16, rng=seed(7))
    v = st.log_evidence.var(axis=1, ddof=1)
    # measured ratio v(1) / v(128) about 20; if the true ratio is at least 4, the sample ratio falls below 1 with
    # probability P(F(15, 15) > 4) < 0.005, and at the measured ratio with probability < 1e-7
    assert v[1] < v[0], v
    # and the final weights' ESS grows (means of 16 runs: about 2 vs 40 particles; 3x is below 5 standard errors)
    assert st.ess[1].mean() > 3 * st.ess[0].mean(), st.ess.mean(axis=1)
    assert np.all(np.abs(st.log_evidence.mean(1) - st.exact) < t_bound(16, 1e-6 / 2) * st.log_evidence.std(1, ddof=1)
                  / 4 + st.log_evidence.var(1, ddof=1) / 2)   # 2 comparisons, false alarm 1e-6


def test_posterior_mode_probabilities(seed):
    "Weighted AIS particles give the posterior mode probabilities, known exactly (d = 2, modes far apart)."
    pb = mixture_evidence_problem(dim=2)
    v = 3.0 ** 2 + 0.5 ** 2
    logm = np.log([0.5, 0.3, 0.2]) - 0.5 * np.sum(pb.means ** 2, 1) / v     # p(mode k | data), unnormalised
    exact = np.exp(logm - logm.max()); exact /= exact.sum()
    R, est = 20, []
    for k in range(R):
        r = ais(*pb[:3], 300, n_temps=64, n_mcmc=2, scale=0.5, rng=seed(500 + k))
        W = np.exp(r.log_weights - r.log_weights.max()); W /= W.sum()
        lab = np.argmin(((r.particles[:, None, :] - pb.means) ** 2).sum(-1), axis=1)
        est.append([W[lab == j].sum() for j in range(3)])
    est = np.array(est)
    # self-normalised estimates: O(1/N) bias, negligible at N = 300 against their sd; 3 comparisons at 1e-6 in all
    kk = t_bound(R, 1e-6 / 3)
    assert np.all(np.abs(est.mean(0) - exact) < kk * est.std(0, ddof=1) / np.sqrt(R)), (est.mean(0), exact)


def test_likelihood_evaluations(seed):
    "A run costs N (1 + T k) likelihood evaluations: the log likelihood of the current points is cached, not recomputed."
    pb = mixture_evidence_problem(dim=2)
    for T, k in ((5, 3), (4, 0), (1, 2)):
        rows = []
        def log_lik(x):
            rows.append(len(x))
            return pb.log_lik(x)
        ais(pb.log_prior, log_lik, pb.prior_sample, 50, n_temps=T, n_mcmc=k, rng=seed(3))
        # an implementation that re-evaluates the current points before the moves and refreshes after them (as the
        # first version of `ais` did) spends N (1 + T (k + 2)) and fails here
        assert sum(rows) == 50 * (1 + T * k), (T, k, sum(rows))


def test_proposal_cov_is_recorded_and_reused(seed):
    "`proposal_cov` of a result holds the matrices the moves used: passing it back with the same stream replays the run."
    pb = mixture_evidence_problem(dim=3)
    r = ais(*pb[:3], 100, n_temps=6, n_mcmc=2, scale=0.5, rng=seed(4))
    assert r.proposal_cov.shape == (6, 3, 3)
    assert np.allclose(r.proposal_cov[0], np.cov(pb.prior_sample(np.random.default_rng(seed(4)), 100), rowvar=False),
                       rtol=1e-6)     # the first move uses the covariance of the prior draws
    q = ais(*pb[:3], 100, n_temps=6, n_mcmc=2, scale=0.5, rng=seed(4), proposal_cov=r.proposal_cov)
    # catches a fixed-covariance path that ignores `proposal_cov` or records other matrices than it uses
    assert np.allclose(q.log_weights, r.log_weights, rtol=0, atol=1e-8) and np.allclose(q.particles, r.particles, atol=1e-8)


def test_fixed_proposal_cov_makes_particles_independent(seed):
    "With fixed `proposal_cov` a particle's path does not depend on the other particles; with the adaptive default it does."
    pb = mixture_evidence_problem(dim=2)
    def sampler(shift):
        def prior_sample(rng, N):
            x = pb.prior_sample(rng, N)
            x[1:] += shift            # move every particle but the first
            return x
        return prior_sample
    for cov, same in ((0.3 * np.eye(2), True), (None, False)):
        a, b = (ais(pb.log_prior, pb.log_lik, sampler(sh), 20, n_temps=5, n_mcmc=2, rng=seed(5), proposal_cov=cov)
                for sh in (0.0, 1.0))
        # fixed kernels: the first particle's weight and final state are the same whatever the others do (an
        # implementation that still used the cloud's covariance would fail); adaptive: the cloud couples them through
        # the proposal covariance of every temperature. (Asserting that the first particle's path differs, as this test
        # did, fails when it rejects all its 10 proposals in both runs: at 1 of 200 seed offsets.)
        if same:
            assert a.log_weights[0] == b.log_weights[0] and np.array_equal(a.particles[0], b.particles[0])
            assert np.array_equal(a.proposal_cov, b.proposal_cov)
        else:
            assert not np.allclose(a.proposal_cov, b.proposal_cov)


def test_fixed_proposal_cov_unbiased(seed):
    "With kernels fixed from a pilot run, E[Z_hat / Z] = 1 exactly: the mean over 30 runs against 1 (t test), d = 2."
    pb = mixture_evidence_problem(dim=2)
    pilot = ais(*pb[:3], 200, n_temps=32, n_mcmc=2, scale=0.5, rng=seed(600))
    ratio = np.exp([ais(*pb[:3], 100, n_temps=32, n_mcmc=2, scale=0.5, rng=seed(601 + k),
                        proposal_cov=pilot.proposal_cov).log_evidence - pb.log_evidence for k in range(30)])
    # false alarm 1e-6 (Z_hat / Z has relative sd about 0.1 here, so its mean over 30 runs is close to normal);
    # catches an acceptance ratio or weight update that is off (a kernel that is not pi_t-invariant biases Z_hat)
    assert abs(ratio.mean() - 1) < t_bound(30, 1e-6) * ratio.std(ddof=1) / np.sqrt(30), (ratio.mean(), ratio.std(ddof=1))


def test_ais_vs_importance_equal_cost(seed):
    "Both methods get N (1 + T k) likelihood evaluations; the importance-sampling runs are `ais` with one temperature."
    cmp = ais_vs_importance(dims=(2,), N=30, n_temps=4, n_mcmc=2, n_reps=3, rng=seed(8))
    assert cmp.cost == 30 * (1 + 4 * 2) and cmp.log_evidence.shape == (1, 2, 3) and cmp.ess.shape == (1, 2, 3)
    assert np.all(cmp.ess[0, 0] <= cmp.cost) and np.all(cmp.ess[0, 1] <= 30)   # an IS run with N draws would fail
    pb = mixture_evidence_problem(dim=2)
    s = np.random.default_rng(seed(8)).spawn(6)[0]     # the stream of the first importance-sampling run
    # the estimates are those of the former call with a (wasted) move after the only reweighting, n_mcmc = 1
    old = ais(*pb[:3], cmp.cost, betas=[0.0, 1.0], rng=s)
    assert cmp.log_evidence[0, 0, 0] == old.log_evidence and cmp.ess[0, 0, 0] == old.ess
    # independent streams: two int seeds one apart share no run (the SEED + k convention would share all but one)
    other = ais_vs_importance(dims=(2,), N=30, n_temps=4, n_mcmc=2, n_reps=3, rng=seed(9))
    assert not np.any(np.isin(other.log_evidence, cmp.log_evidence))


def test_ais_vs_importance_counts_likelihood_evaluations(seed, monkeypatch):
    "Each run of either method makes exactly N (1 + T k) likelihood evaluations (the importance-sampling arm no move)."
    import bayesnotes.ais as mod
    rows, make = [], mod.mixture_evidence_problem
    def counted(dim, **kw):
        pb = make(dim, **kw)
        return pb._replace(log_lik=lambda x: rows.append(len(x)) or pb.log_lik(x))
    monkeypatch.setattr(mod, "mixture_evidence_problem", counted)
    cmp = mod.ais_vs_importance(dims=(2,), N=30, n_temps=4, n_mcmc=2, n_reps=3, rng=seed(8))
    # 3 runs of each method; an importance-sampling arm that moved its draws once after the reweighting (as the first
    # version did, with the default n_mcmc = 1) would spend 2 N (1 + T k) per run and fail here
    assert sum(rows) == 2 * 3 * cmp.cost == 2 * 3 * 30 * (1 + 4 * 2), sum(rows)


def test_bad_inputs():
    "Bad schedules, counts and callables raise ValueError naming the argument."
    pb = mixture_evidence_problem(dim=2)
    good = dict(log_prior=pb.log_prior, log_lik=pb.log_lik, prior_sample=pb.prior_sample, N=50)
    for bad, name in ((dict(betas=[0.0, 0.5]), "betas"), (dict(betas=[0.1, 1.0]), "betas"),
                      (dict(betas=[0.0, 0.7, 0.3, 1.0]), "betas"), (dict(betas=[0.0, np.nan, 1.0]), "betas"),
                      (dict(n_temps=0), "n_temps"), (dict(N=1), "N must be"),
                      (dict(n_mcmc=-1), "n_mcmc"), (dict(scale=-1.0), "scale"), (dict(log_lik=3), "log_lik"),
                      (dict(prior_sample=lambda rng, N: np.zeros((N + 1, 2))), "prior_sample"),
                      (dict(log_lik=lambda x: np.zeros(3)), "log_lik"),
                      (dict(proposal_cov=np.eye(3)), "proposal_cov"), (dict(proposal_cov=np.ones((3, 2, 2))), "proposal_cov"),
                      (dict(proposal_cov=-np.eye(2)), "proposal_cov"), (dict(proposal_cov=np.zeros((4, 2, 2))), "proposal_cov")):
        with pytest.raises(ValueError, match=name):
            ais(**{"n_temps": 3, **good, **bad})
    for bad, name in ((dict(dim=0), "dim"), (dict(prior_sd=0.0), "prior_sd"), (dict(weights=(0.5, -1.0)), "weights"),
                      (dict(weights=(1, 1, 1, 1)), "weights")):
        with pytest.raises(ValueError, match=name):
            mixture_evidence_problem(**bad)
    for bad, name in ((dict(dims=0), "dims"), (dict(n_reps=1), "n_reps"), (dict(n_temps=0), "n_temps")):
        with pytest.raises(ValueError, match=name):
            ais_vs_importance(**bad)



def test_annealing_path_is_one_run_stopped_early(seed):
    """AIS with the schedule beta_0..beta_t / beta_t on L^beta_t (how `annealing_path` stops a run at t) proposes the
    same points as the first t temperatures of the full run on the same stream; stopped at T it is the full run, and
    the importance-sampling ESS at beta = 1 is that of `ais` with betas = [0, 1] on the run's prior draws."""
    from bayesnotes.utils import as_rng
    pb = mixture_evidence_problem(dim=2)
    T, k, N = 8, 2, 60
    b = np.linspace(0, 1, T + 1) ** 4
    for t in (1, 3, T):
        seen = {"full": [], "stopped": []}
        def rec(key, scale):
            return lambda x: seen[key].append(x.copy()) or scale * pb.log_lik(x)
        ais(pb.log_prior, rec("full", 1.0), pb.prior_sample, N, betas=b, n_mcmc=k, scale=0.5, rng=seed(40))
        ais(pb.log_prior, rec("stopped", b[t]), pb.prior_sample, N, betas=b[: t + 1] / b[t], n_mcmc=k, scale=0.5,
            rng=seed(40))
        assert len(seen["stopped"]) == 1 + t * k
        for a, c in zip(seen["full"], seen["stopped"]):      # prior draws, then every batch of proposals
            assert np.allclose(a, c, rtol=0, atol=1e-12)
    p = annealing_path(dims=(1, 2), N=N, n_temps=T, n_mcmc=k, n_stops=4, rng=seed(41))
    assert list(p.stops) == [0, 2, 4, 6, 8] and p.ess_is.shape == (2, T + 1) and p.ess_ais.shape == (2, 5)
    assert p.particles.shape == p.log_weights.shape == (5, N) and p.cost == N * (1 + T * k)
    assert np.allclose(p.ess_is[:, 0], N) and np.allclose(p.ess_ais[:, 0], N)    # beta_0 = 0: equal weights
    assert np.all(np.diff(p.ess_is, axis=1) <= 1e-9 * N)     # ESS of w^beta never grows with beta (exact)
    g = as_rng(seed(41)).spawn(2)[0]                          # the d = 1 stream, replayed
    full = ais(*mixture_evidence_problem(1)[:3], N, n_temps=T, n_mcmc=k, scale=0.5, rng=g)
    assert np.array_equal(p.particles[-1], full.particles[:, 0]) and np.array_equal(p.log_weights[-1], full.log_weights)
    is1 = ais(*mixture_evidence_problem(1)[:3], N, betas=[0.0, 1.0], rng=as_rng(seed(41)).spawn(2)[0])
    assert abs(p.ess_is[0, -1] - is1.ess) < 1e-9
    for bad, name in ((dict(dims=(3,)), "dims"), (dict(N=1), "N"), (dict(n_temps=0), "n_temps"), (dict(n_stops=0), "n_stops")):
        with pytest.raises(ValueError, match=name):
            annealing_path(**bad)

# ---------------------------------------------------------------- one way to say a model (issue 32, item 2)
def test_ais_takes_targets_and_the_new_name_N(seed):
    "Targets (single-point autograd densities) give the run the vectorised callables give; n_particles= still works, warning."
    import warnings
    import autograd.numpy as anp
    from bayesnotes.targets import Target
    lp = lambda x: -0.5 * np.sum(x ** 2, axis=1)
    ll = lambda x: -2.0 * np.sum((x - 1.0) ** 2, axis=1)
    ps = lambda rng, N: rng.standard_normal((N, 2))
    ref = ais(lp, ll, ps, 100, n_temps=6, n_mcmc=2, rng=seed(20))
    calls = []
    def ll_batched(x): calls.append(np.shape(x)); return -2.0 * anp.sum((x - 1.0) ** 2, axis=-1)
    for got in (ais(Target(lambda x: -0.5 * anp.sum(x ** 2), 2), Target(lambda x: -2.0 * anp.sum((x - 1.0) ** 2), 2), ps,
                    N=100, n_temps=6, n_mcmc=2, rng=seed(20)),
                ais(lp, Target(ll_batched, 2, batched=True), ps, 100, n_temps=6, n_mcmc=2, rng=seed(20))):
        for f in ("log_weights", "particles", "acceptance", "log_evidence", "ess"):
            assert np.allclose(getattr(got, f), getattr(ref, f), rtol=0, atol=1e-12), f
    assert len(calls) == 1 + 6 * 2 and all(s[1:] == (2,) for s in calls)   # one call per evaluation: N (1 + T k) rows
    with pytest.raises(ValueError, match=r"^log_prior is a Target of dimension 3, but the particles \(drawn by prior_sample\)"):
        ais(Target(lambda x: anp.sum(x), 3), ll, ps, 100, n_temps=3, rng=seed(20))
    with pytest.warns(DeprecationWarning, match="'n_particles' is now called 'N'"):
        old = ais(lp, ll, ps, n_particles=100, n_temps=6, n_mcmc=2, rng=seed(20))
    assert np.array_equal(old.log_weights, ref.log_weights)
    with pytest.raises(TypeError, match="got 'N' and its old name 'n_particles'"):
        ais(lp, ll, ps, N=100, n_particles=100)
    with pytest.warns(DeprecationWarning, match="'n_particles' is now called 'N'"):
        a = ais_vs_importance(dims=(2,), n_particles=10, n_temps=2, n_mcmc=1, n_reps=2, rng=seed(21))
    assert np.array_equal(a.log_evidence, ais_vs_importance(dims=(2,), N=10, n_temps=2, n_mcmc=1, n_reps=2, rng=seed(21)).log_evidence)
    with pytest.warns(DeprecationWarning, match="'n_particles' is now called 'N'"):
        st = ais_temperature_study(n_temps=(1, 2), n_particles=10, n_reps=2, rng=seed(22))
    assert st.N == 10
    with pytest.warns(DeprecationWarning, match="TemperatureStudy.n_particles is now called N"):
        assert st.n_particles == 10
