"""Simulation-based calibration (nbs/09b_sbc.ipynb): uniform ranks for exact posterior draws, power against planted
bugs, the coverage of the simultaneous ECDF band, the book's samplers (slow) and bad input.

Every statistical assert states its false-alarm probability (the chance it fails for correct code)."""
import numpy as np
import pytest
from scipy import stats

from bayesnotes.sbc import (SBCResult, SBCWarning, ecdf_band, ecdf_inside, lognormal_metropolis, normal_sbc, pg_posterior,
                            pg_prior, pg_simulate, rank_histogram, default_n_bins, run_sbc, sbc_ranks, thin_draws, fig_rank_histogram,
                            fig_ecdf_difference)


def _exact_pg_fit(L):
    "Exact draws from the Gamma posterior of each replication (batched), on log lambda."
    def fit(Y, rng):
        a, b = pg_posterior(Y)
        return np.log(rng.gamma(a[:, None, None], 1.0 / b, size=(Y.shape[0], L, 1)))
    return fit


def test_exact_draws_give_uniform_ranks(seed):
    # Exact conjugate posterior draws: ranks uniform, so each chi-square p-value is U(0, 1) (R = 1000, 10 bins of 5 ranks,
    # 100 expected per bin: the chi-square approximation is accurate). 3 columns x 1e-4: false alarm 3e-4.
    for k, (L, batched) in enumerate(((49, True), (9, False))):
        fit = _exact_pg_fit(L)
        if not batched:
            fit1 = fit
            fit = lambda y, rng: fit1(y[None], rng)[0]
        r = sbc_ranks(pg_prior, pg_simulate, fit, 1000 if batched else 300, L, rng=seed(k), batched=batched,
                      independent=True)
        assert r.ranks.shape == (1000 if batched else 300, 1) and r.ranks.min() >= 0 and r.ranks.max() <= L
        assert np.all(rank_histogram(r, n_bins=10 if L == 49 else 5).pvalue > 1e-4)
    r = normal_sbc(rng=seed(3))
    assert rank_histogram(r).pvalue[0] > 1e-4


def test_mean_of_ranks_is_exact_under_the_null(seed):
    # A z-test of the mean rank, whose null law is known exactly: mean L/2, variance ((L+1)^2 - 1)/12 per rank.
    # R = 4000, |z| < 4.9: false alarm 1e-6.
    L, R = 19, 4000
    r = normal_sbc(n_reps=R, n_ranks=L, rng=seed(4))
    z = (r.ranks.mean() - L / 2) / np.sqrt(((L + 1) ** 2 - 1) / 12 / R)
    assert abs(z) < 4.9, z


def test_ties_are_broken_at_random(seed):
    # A discrete "parameter" (a Bernoulli coin, exact posterior of a coin flip observed without noise is the coin itself)
    # ties with every draw: the random tie-breaking must still give uniform ranks. R = 2000, L = 4, 5 bins:
    # false alarm 1e-4.
    r = sbc_ranks(lambda g, n: g.integers(0, 2, size=(n, 1)).astype(float), lambda th, g: th.copy(),
                  lambda Y, g: np.repeat(Y[:, None, :], 4, axis=1), 2000, 4, rng=seed(5), batched=True, independent=True)
    assert rank_histogram(r, n_bins=5).pvalue[0] > 1e-4


def test_power_against_a_too_narrow_posterior(seed):
    # Negative control: a posterior 30% too narrow, R = 300, L = 49. Power measured over 200 seeds: p < 1e-3 in 198 of
    # them (0.99; a posterior 20% too narrow: 0.5, 30% at R = 200: 0.89). Here 20 independent runs; the test asks for at
    # least 17 detections. P(Bin(20, 0.99) <= 16) = 4e-5 (false alarm if the power is 0.99; 0.03 if it were 0.95).
    hits = sum(rank_histogram(normal_sbc(0.7, n_reps=300, n_ranks=49, rng=np.random.SeedSequence([seed(6), i]))).pvalue[0]
               < 1e-3 for i in range(20))
    assert hits >= 17, hits


def test_ecdf_band_coverage_matches_its_level(seed):
    # The band is calibrated on M = 4000 null samples; its true coverage c then has sd sqrt(0.05 * 0.95 / 4000) = 0.0034
    # about 0.95 (the order statistic's Beta law). n = 4000 fresh null samples estimate c with sd 0.0034 more: total
    # sd 0.0049. Discreteness of the counts only raises the coverage (ties at gamma are inside): measured 0.945-0.958 at
    # (R, L) = (200, 49), (1000, 99), (500, 49), (100, 49), (50, 9), so at most +0.008. Bounds: 5 sd below 0.95, and
    # 0.008 + 4 sd above (0.978): false alarm below 1e-6 below and 3e-5 above, 4 comparisons. A band with coverage 0.98
    # (too wide) fails.
    for k, (R, L) in enumerate(((100, 49), (50, 9))):
        band = ecdf_band(R, L, level=0.95, n_sims=4000, rng=seed(10 + k))
        null = np.random.default_rng(seed(20 + k)).integers(0, L + 1, size=(R, 4000))
        cov = ecdf_inside(null, band, n_ranks=L).mean()
        assert 0.95 - 5 * 0.0049 < cov < 0.95 + 0.008 + 4 * 0.0049, (R, L, cov)


def test_ecdf_band_matches_exact_binomial_quantities(seed):
    # With one evaluation point the simultaneous band is the pointwise central interval of Binomial(R, 1/2) (the widest
    # symmetric interval whose outside has mass <= 1 - level). gamma is estimated from 20000 null samples; the mass
    # outside the interval is 0.041 (R = 20, 95%), 0.089 (R = 100, 90%), 0.035 (R = 100, 95%): each at least 5.6 sd
    # (sd sqrt(0.05 * 0.95 / 20000) = 0.0015) from the level, so a wrong interval is picked with probability < 1e-8.
    for k, (R, lev) in enumerate(((20, 0.95), (100, 0.9), (100, 0.95))):
        b = ecdf_band(R, 1, level=lev, n_sims=20000, rng=seed(30 + k))
        assert np.allclose(R * np.r_[b.lower, b.upper], stats.binom.ppf([(1 - lev) / 2, (1 + lev) / 2], R, 0.5))
    b = ecdf_band(200, 99, rng=seed(31))
    assert b.gamma < 0.05
    assert np.all(b.lower <= stats.binom.ppf(0.025, 200, b.z) / 200)
    assert np.all(b.upper >= stats.binom.ppf(0.975, 200, b.z) / 200)


def test_planted_hastings_bug_is_detected(seed):
    # The multiplicative Metropolis kernel without its Hastings factor samples Ga(a - 1, b). R = 500, 10 bins: the p-value of
    # log lambda was below 1e-15 at 5 seeds (largest 6e-16) (at R = 200: between 1e-10 and 3e-3 over 6 seeds). Asked: p < 1e-4 in 2 runs.
    # The correct kernel: 2 columns x 1e-4, false alarm 2e-4.
    for i in range(2):
        bad = run_sbc("Metropolis, no Hastings factor", 500, 49, rng=np.random.SeedSequence([seed(40), i]))
        assert rank_histogram(bad).pvalue[0] < 1e-4
    good = run_sbc("Metropolis", 500, 49, rng=seed(41))
    assert np.all(rank_histogram(good).pvalue > 1e-4)


def test_lognormal_metropolis_targets_the_right_law(seed):
    # One long chain per data set for 200 data sets with the same data: the mean of log lambda under Ga(a, b) is
    # digamma(a) - log b. 200 chains x 4000 draws, the chain mean's sd from the autocorrelation (ESS about 800 per
    # chain): sd of the grand mean about 0.35 / sqrt(200 * 800) < 0.001; tolerance 0.01 (>10 sd). Without the Hastings
    # factor the mean is digamma(a - 1) - log b, 1/(a - 1) = 0.2 lower at a = 6. False alarm < 1e-20.
    from scipy.special import digamma
    Y = np.tile([1.0, 2.0, 1.0], (200, 1))
    a, b = pg_posterior(Y[0])
    good = lognormal_metropolis(Y, 4000, rng=seed(42)).mean()
    bad = lognormal_metropolis(Y, 4000, hastings=False, rng=seed(43)).mean()
    assert abs(good - (digamma(a) - np.log(b))) < 0.01
    assert abs(bad - (digamma(a - 1) - np.log(b))) < 0.01


def test_advi_meanfield_is_under_dispersed(seed):
    # Posterior sds 0.44 times too small: p-values (10 bins) below about 1e-23 (1e-23 to 1e-36 over seeds 0-2); threshold 1e-10. Exact draws of the same
    # model pass: 2 columns x 1e-4, false alarm 2e-4.
    r = run_sbc("mean-field ADVI", 200, 49, rng=seed(50))
    h = rank_histogram(r, n_bins=10)
    assert np.all(h.pvalue < 1e-10)
    assert np.all(h.counts[[0, -1]] > h.upper[0])           # the U: both end bins above the 99% band
    assert np.all(rank_histogram(run_sbc("exact (regression)", 200, 49, rng=seed(51))).pvalue > 1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["NUTS", "MALA", "slice", "Gibbs", "tempered SMC"])
def test_book_samplers_pass_sbc(sampler, seed):
    # R = 400, L = 49 with chains twice as long: chi-square p > 1e-5 per column; at most 10 columns over the
    # parametrisation: false alarm 1e-4 in all. The chi-square test has little power against a small shift, so also
    # the mean rank: under uniform ranks on 0..L it has mean L/2 and sd sqrt(((L + 1)^2 - 1) / 12 / R), near-normal at
    # R = 400; |z| < 4.4 per column: false alarm 1e-5 each, 1e-4 over 10 columns (mild dependence of the product-chain
    # columns aside).
    r = run_sbc(sampler, 400, 49, rng=seed(60), scale=2.0)
    assert np.all(rank_histogram(r).pvalue > 1e-5)
    L, R = r.n_ranks, r.ranks.shape[0]
    z = (r.ranks.mean(0) - L / 2) / np.sqrt(((L + 1) ** 2 - 1) / 12 / R)
    assert np.all(np.abs(z) < 4.4), z


def test_default_bins_have_equal_widths(seed):
    # L + 1 = 50 rank values: every default bin covers the same number of them (5), at R = 200 and R = 500.
    for R in (200, 500):
        h = rank_histogram(np.random.default_rng(seed(90)).integers(0, 50, size=(R, 1)), 49)
        assert np.all(np.diff(h.edges) == 5) and np.allclose(h.expected, R / 10), h.edges
    assert np.all(np.diff(rank_histogram(np.zeros((1000, 1), int), 99).edges) == 5)
    assert default_n_bins(200, 52) == 17 and default_n_bins(20, 49) == 2   # L + 1 = 53 prime; R = 20: 2 bins
    # Under the null the chi-square p-value is near uniform: 4000 columns of R = 200 uniform ranks (L = 49, 10 bins of
    # 20 expected). P(p < 0.05) has sd sqrt(0.05 * 0.95 / 4000) = 0.0034; 5 sd either side: false alarm below 1e-6
    # (plus the chi-square approximation's error, measured 0.048 at this R with 20 bins).
    p = rank_histogram(np.random.default_rng(seed(91)).integers(0, 50, size=(200, 4000)), 49).pvalue
    assert abs(np.mean(p < 0.05) - 0.05) < 5 * 0.0034, np.mean(p < 0.05)
    assert abs(np.mean(p < 0.5) - 0.5) < 5 * 0.0079, np.mean(p < 0.5)


def test_thinning_is_needed(seed):
    # Without thinning, L consecutive draws of a slowly mixing chain fake a U for a correct sampler: sbc_ranks warns.
    Y = pg_simulate(pg_prior(np.random.default_rng(seed(70)), 20), np.random.default_rng(seed(71)))
    draws = lognormal_metropolis(Y, 60, step=0.05, rng=seed(72))           # tiny steps: ESS far below L = 49
    with pytest.warns(SBCWarning, match="ESS"):
        sbc_ranks(lambda g, n: np.log(g.gamma(2.0, 1.0, size=(n, 1))), lambda th, g: pg_simulate(th, g),
                  lambda Yb, g: lognormal_metropolis(Yb, 60, step=0.05, rng=g), 20, 49, rng=seed(73), batched=True)
    assert draws.shape == (20, 60, 1)


def test_bad_input():
    pr = lambda g, n: g.normal(size=(n, 1))
    sim = lambda th, g: th + g.normal(size=th.shape)
    fit = lambda y, g: g.normal(size=(10, 1))
    with pytest.raises(ValueError, match="n_reps"):
        sbc_ranks(pr, sim, fit, n_reps=1, n_ranks=5)
    with pytest.raises(ValueError, match="n_ranks"):
        sbc_ranks(pr, sim, fit, n_reps=5, n_ranks=0)
    with pytest.raises(ValueError, match="draws"):
        sbc_ranks(pr, sim, lambda y, g: np.full((10, 1), np.inf), 5, 5)
    with pytest.raises(ValueError, match="draws"):
        sbc_ranks(pr, sim, lambda y, g: np.zeros((2, 2, 2, 1)), 5, 5)
    with pytest.raises(ValueError, match="at least n_ranks"):
        sbc_ranks(pr, sim, lambda y, g: np.zeros((3, 1)), 5, 5, independent=True)
    with pytest.raises(ValueError, match="batched fit"):
        sbc_ranks(pr, sim, lambda Y, g: np.zeros((4, 10, 1)), 5, 5, batched=True)
    with pytest.raises(ValueError, match="callable"):
        sbc_ranks(pr, sim, None, 5, 5)
    with pytest.raises(ValueError, match="n_ranks"):
        thin_draws(np.zeros((10, 1)), 0)
    with pytest.raises(ValueError, match="draws: each chain needs at least 4"):
        thin_draws(np.zeros((2, 3, 1)), 2)                  # 3 draws per chain: too few for an ESS
    assert thin_draws(np.zeros((2, 3, 1)), 2, independent=True)[0].shape == (2, 1)
    with pytest.raises(ValueError, match="ranks"):
        rank_histogram(np.array([0, 1, 2.5]), 3)
    with pytest.raises(ValueError, match="n_ranks is required"):
        rank_histogram(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="level"):
        rank_histogram(np.array([0, 1, 2]), 3, level=1.5)
    with pytest.raises(ValueError, match="n_reps"):
        ecdf_band(1, 5)
    with pytest.raises(ValueError, match="n_sims"):
        ecdf_band(10, 5, n_sims=3)
    with pytest.raises(ValueError, match="sampler"):
        run_sbc("hmc")
    with pytest.raises(ValueError, match="results"):
        fig_rank_histogram({})
    with pytest.raises(ValueError, match="rng"):
        ecdf_band(10, 5, rng="seed")


def test_figures_return_figures(seed):
    from matplotlib.figure import Figure
    r = normal_sbc(n_reps=50, n_ranks=9, rng=seed(80))
    assert isinstance(r, SBCResult)
    assert isinstance(fig_rank_histogram({"a": r, "b": r}), Figure)
    assert isinstance(fig_ecdf_difference(r), Figure)
