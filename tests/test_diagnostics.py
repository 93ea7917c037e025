"""Tests of bayesnotes.diagnostics (Vehtari et al. 2021): closed-form references (AR(1) chains), replicated Monte
Carlo checks with tolerances from the spread of the replicates, exact invariances, and the documented edge cases."""
import warnings
import numpy as np
import pytest

from bayesnotes.diagnostics import (rhat, ess_bulk, ess_tail, ess_mean, mcse_mean, mcse_sd, autocorr, summary,
                                    ar1_chains, _split, _tau_geyer)


@pytest.mark.parametrize("phi", [-0.3, 0.0, 0.5, 0.9])
def test_ess_of_ar1_matches_closed_form(phi, seed):
    # exact ESS of the mean for stationary AR(1) chains: S (1 - phi) / (1 + phi). Over 30 independent replications
    # the average estimate must be within 4 standard errors (sd of the replicates / sqrt(30)) of the exact value.
    rng = np.random.default_rng(seed(1))
    S = 4 * 2000
    rel = np.array([ess_mean(ar1_chains(phi, 4, 2000, rng)) for _ in range(30)]) / (S * (1 - phi) / (1 + phi))
    assert abs(rel.mean() - 1) < 4.9 * rel.std(ddof=1) / np.sqrt(len(rel))   # CLT: 4.9 se, false alarm 1e-6


def test_bulk_and_tail_ess_of_independent_draws(seed):
    """For independent draws every ESS is about S. Measured over 3000 sets of 4 x 1000 draws, ESS/S - 1 has mean -0.015
    (bulk, mean) and -0.038 (tail) and sd 0.044, but a long lower tail (down to -0.30: Geyer's sequence now and then
    keeps a spurious positive autocorrelation): one set fell beyond 0.2 in 0.13-0.2% of sets, and the long seed sweep
    met it (offset 73). The mean over 10 independent sets has sd about 0.014, so the bound 0.15 is more than 8 sd away
    from every bias; a false alarm needs several of the rare low sets in one run."""
    rng = np.random.default_rng(seed(3))
    xs = [rng.normal(size=(4, 1000)) for _ in range(10)]
    for f in (ess_bulk, ess_tail, ess_mean):
        assert abs(np.mean([f(x) / x.size for x in xs]) - 1) < 0.15, f.__name__


def test_mcse_against_replicated_runs(seed):
    # the MCSE must match the actual spread of the estimates over independent runs. With 200 runs the empirical sd
    # has a relative standard error of 1/sqrt(2 * 200) = 5%, so we allow 20%.
    rng = np.random.default_rng(seed(2))
    means, mcses, sds, mcse_sds = [], [], [], []
    for _ in range(200):
        x = ar1_chains(0.7, 4, 500, rng)
        means.append(x.mean()); mcses.append(mcse_mean(x))
        sds.append(x.std(ddof=1)); mcse_sds.append(mcse_sd(x))
    assert abs(np.mean(mcses) / np.std(means, ddof=1) - 1) < 0.2
    assert abs(np.mean(mcse_sds) / np.std(sds, ddof=1) - 1) < 0.2


def test_rhat_accepts_good_chains_and_flags_bad_ones(seed):
    for k in range(5):
        x = np.random.default_rng(seed(k)).normal(size=(4, 1000))
        assert rhat(x) < 1.01
        shifted = x.copy(); shifted[0] += 1.0          # one chain shifted by one standard deviation
        scaled = x.copy(); scaled[1] *= 3.0            # one chain with three times the scale
        assert rhat(shifted) > 1.05 and rhat(scaled) > 1.05


def test_split_rhat_catches_trends_that_unsplit_misses(seed):
    rng = np.random.default_rng(seed(0))
    t = np.linspace(-1, 1, 1000)
    x = rng.normal(size=(2, 1000)) * 0.5 + np.array([[2.0], [-2.0]]) * t
    from bayesnotes.diagnostics import _rhat_basic
    assert _rhat_basic(x[..., None])[0] < 1.01 < rhat(x)


def test_rank_based_diagnostics_are_invariant_to_monotone_transforms(seed):
    x = np.random.default_rng(seed(4)).normal(size=(3, 400))
    y = np.exp(2 * x) + 5                                # strictly increasing transform: same ranks
    from bayesnotes.diagnostics import _rhat_basic, _rank_normalize
    bulk = lambda a: _rhat_basic(_rank_normalize(_split(a[..., None])))[0]
    assert np.isclose(bulk(x), bulk(y)) and np.isclose(ess_bulk(x), ess_bulk(y))
    assert np.isclose(ess_tail(x), ess_tail(y))          # quantile indicators select the same draws
    # (the folded "tail" R-hat uses |x - median| and is deliberately not rank-invariant)


def test_geyer_truncation_is_exact_for_known_sequence():
    # rho = 0.5^t: pairs sum to 1.5 * 0.25^k, all positive and decreasing, so tau = 1 + 2 sum_{t>=1} 0.5^t = 3
    # (up to the truncation at the end of the sequence)
    rho = 0.5 ** np.arange(60)
    assert abs(_tau_geyer(rho) - 3.0) < 1e-9
    # an increasing pair is replaced by the previous pair (initial monotone sequence)
    rho = np.array([1.0, 0.1, 0.0, 0.3, -0.5, -0.5, 0.0, 0.0, 0.0, 0.0])
    # pairs: 1.1, 0.3 (kept), then -1.0 stops the sum; the even term of the dropped pair is negative
    assert np.isclose(_tau_geyer(rho), -1 + 2 * (1.1 + 0.3))


def test_shapes_split_and_autocorr(seed):
    x = np.random.default_rng(seed(5)).normal(size=(4, 101, 3))
    assert rhat(x).shape == (3,) and ess_bulk(x).shape == (3,) and isinstance(rhat(x[..., 0]), float)
    s = _split(x.reshape(4, 101, 3))
    assert s.shape == (8, 50, 3) and np.array_equal(s[4], x[0, 51:])   # the middle draw of odd chains is dropped
    a = ar1_chains(0.8, 4, 20000, rng=seed(6))
    assert np.allclose(autocorr(a, 4).mean(0), 0.8 ** np.arange(5), atol=0.03)
    assert np.allclose(autocorr(a, 4, combined=True), 0.8 ** np.arange(5), atol=0.03)
    assert autocorr(a[0]).shape == (20000,)               # a 1-d array is one chain
    assert isinstance(ess_bulk(a[0]), float)


def test_constant_quantities_give_nan_with_a_warning(seed):
    x = np.random.default_rng(seed(7)).normal(size=(4, 100, 2))
    x[..., 1] = 3.0
    with pytest.warns(RuntimeWarning, match="constant"):
        r = rhat(x)
    assert np.isfinite(r[0]) and np.isnan(r[1])
    with pytest.warns(RuntimeWarning, match="constant"):
        e = ess_bulk(x)
    assert np.isnan(e[1])
    assert mcse_mean(x)[1] == 0.0                          # a constant is estimated exactly
    with pytest.warns(RuntimeWarning):
        s = summary(x)
    assert np.isnan(s.rhat[1]) and s.sd[1] == 0


def test_bad_input_raises(seed):
    with pytest.raises(ValueError, match="draws per chain"):
        rhat(np.zeros((4, 3)))                             # fewer than 4 draws
    with pytest.raises(ValueError, match="NaN or infinite"):
        ess_bulk(np.array([[0.0, 1.0, np.nan, 2.0, 3.0]]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        mcse_mean(np.array([[0.0, 1.0, np.inf, 2.0, 3.0]]))
    with pytest.raises(ValueError, match="scalar"):
        ess_tail(1.0)
    with pytest.raises(ValueError, match="numeric"):
        rhat([["a", "b", "c", "d"]])
    with pytest.raises(ValueError, match="max_lag"):
        autocorr(np.zeros((2, 10)) + np.arange(10), max_lag=10)
    x = np.random.default_rng(seed(0)).normal(size=(2, 50, 2))
    with pytest.raises(ValueError, match="names"):
        summary(x, names=["a"])
    with pytest.raises(ValueError, match="prob"):
        summary(x, prob=1.5)
    with pytest.raises(ValueError, match="phi"):
        ar1_chains(1.0, rng=seed(0))


def test_summary_table(seed):
    x = np.random.default_rng(seed(8)).normal(size=(4, 500, 2)) * [1.0, 2.0] + [0.0, 5.0]
    s = summary(x, names=["a", "b"], prob=0.8)
    assert s.names == ["a", "b"] and s.mean.shape == (2,)
    assert np.all(np.abs(s.mean - [0, 5]) < 5.3 * s.mcse_mean)   # false alarm <= 1e-6: 5.3 se covers up to 10 comparisons
    assert np.all(np.abs(s.sd - [1, 2]) < 5.3 * s.mcse_sd)   # false alarm <= 1e-6: 5.3 se covers up to 10 comparisons
    assert "ess_bulk" in str(s) and s._repr_markdown_().startswith("|")


# ------------------------------------------------------------------- reference: ArviZ's published algorithms
# A straightforward re-implementation of arviz.stats.diagnostics (_split_chains, _z_scale, _rhat, _rhat_rank, _ess,
# _ess_quantile, _mcse_quantile) for one quantity shaped (chain, draw), written from ArviZ's code: loops where ArviZ
# loops (Geyer's monotone step), its rank back-transform and its quantile rule (R type 7). ArviZ is not installed
# here, so this is the independent reference the package is checked against.
def _az_split(a):
    half = a.shape[1] // 2
    return np.vstack([a[:, :half], a[:, -half:]])


def _az_z_scale(a):
    from scipy import stats
    r = stats.rankdata(a, method="average").reshape(a.shape)
    return stats.norm.ppf((r - 3 / 8) / (a.size - 2 * 3 / 8 + 1))


def _az_rhat(a):
    n = a.shape[1]
    b = n * np.var(a.mean(axis=1), ddof=1)
    w = np.mean(np.var(a, axis=1, ddof=1))
    return np.sqrt((b / w + n - 1) / n)


def _az_rhat_rank(a):
    s = _az_split(a)
    return max(_az_rhat(_az_z_scale(s)), _az_rhat(_az_z_scale(np.abs(s - np.median(s)))))


def _az_ess(a):
    if np.max(a) - np.min(a) < np.finfo(float).resolution:   # ArviZ: identical values have ESS = the array's size
        return a.size
    m, n = a.shape
    c = a - a.mean(axis=1, keepdims=True)
    acov = np.array([[np.dot(c[j, :n - t], c[j, t:]) / n for t in range(n)] for j in range(m)])
    mean_var = np.mean(acov[:, 0]) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n + (np.var(a.mean(axis=1), ddof=1) if m > 1 else 0.0)
    rho = np.zeros(n)
    even = rho[0] = 1.0
    odd = rho[1] = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    t = 1
    while t < n - 3 and even + odd > 0.0:
        even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if even + odd >= 0:
            rho[t + 1], rho[t + 2] = even, odd
        t += 2
    max_t = t - 2
    if even > 0:
        rho[max_t + 1] = even
    t = 1
    while t <= max_t - 2:                                  # Geyer's initial monotone sequence, Stan's loop
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    tau = -1.0 + 2.0 * np.sum(rho[:max_t + 1]) + np.sum(rho[max_t + 1:max_t + 2])
    return m * n / max(tau, 1 / np.log10(m * n))


def _az_ess_quantile(a, p):
    return _az_ess(_az_split((a <= np.quantile(a, p)).astype(float)))


def _az_mcse_quantile(a, p):
    from scipy import stats
    ess = _az_ess_quantile(a, p)
    ppf = stats.beta.ppf([0.1586553, 0.8413447], ess * p + 1, ess * (1 - p) + 1)
    srt = np.sort(a.ravel())
    size = srt.size
    return (srt[int(np.ceil(np.nanmin((ppf[1] * size - 1, size - 1))))]
            - srt[int(np.floor(np.nanmax((ppf[0] * size - 1, 0))))]) / 2


@pytest.mark.parametrize("shape", [(3, 501), (4, 400), (2, 37), (1, 41)])
def test_matches_arviz_reference_odd_and_even_lengths(shape, seed):
    # Would have failed before the fix for odd lengths: R-hat folded at the median of ALL draws (middle ones included)
    # instead of the median of the split draws, e.g. 1.00324 instead of ArviZ's 1.00322 on 3 chains x 501.
    from bayesnotes.diagnostics import mcse_quantile
    rng = np.random.default_rng(seed(10))
    # chains with different scales and the same location: the tail (folded) half decides R-hat, where the fix acts
    x = ar1_chains(0.6, shape[0], shape[1], rng) * np.array([[0.5], [2.0], [1.0], [1.5]])[:shape[0]]
    if shape[0] > 1:
        assert np.isclose(rhat(x), _az_rhat_rank(x), rtol=0, atol=1e-9)
    assert np.isclose(ess_bulk(x), _az_ess(_az_z_scale(_az_split(x))), rtol=1e-9)
    assert np.isclose(ess_mean(x), _az_ess(_az_split(x)), rtol=1e-9)
    assert np.isclose(ess_tail(x), min(_az_ess_quantile(x, 0.05), _az_ess_quantile(x, 0.95)), rtol=1e-9)
    for p in (0.05, 0.3, 0.5, 0.9):
        assert np.isclose(mcse_quantile(x, p), _az_mcse_quantile(x, p), rtol=1e-9, atol=0)


def test_constant_tail_indicators_follow_arviz(seed):
    # ArviZ's rule (arviz.stats.diagnostics._ess, 0.23): input whose values are all identical (max - min below
    # np.finfo(float).resolution) has ESS = its size, here the 2 * (n_draw // 2) * n_chain split draws. A quantity with
    # 5% or more of its draws tied at its largest value has the constant indicator I(x <= q_0.95) = 1. Before the fix
    # ess_tail returned nan and mcse_quantile half the range of the draws in these cases.
    from bayesnotes.diagnostics import mcse_quantile
    rng = np.random.default_rng(seed(19))
    # (a) almost all draws tied at the top: both indicators constant (q_0.05 = q_0.95 = 1), so the tail ESS is the
    # number of split draws, 4 x 2 x 50 = 400 (and 3 x 2 x 50 = 300 for chains of odd length 101), and every
    # quantile's MCSE is 0: the order statistics around it all equal 1
    for shape, S_split in (((4, 100), 400), ((3, 101), 300)):
        b = np.ones(shape)
        b.flat[rng.choice(b.size, 3, replace=False)] = 0.0
        assert ess_tail(b) == S_split
        assert mcse_quantile(b, 0.95) == 0.0 and mcse_quantile(b, 0.5) == 0.0
    # (b) a normal variable censored at 1: 16% of the draws tie at the top, only the upper indicator is constant; the
    # tail ESS is the ESS of the lower one and the 95% quantile's MCSE is 0 (ArviZ's order statistics sit on the tie)
    x = np.minimum(ar1_chains(0.5, 4, 500, rng), 1.0)
    lower = _az_ess_quantile(x, 0.05)
    assert np.isfinite(lower) and np.isclose(ess_tail(x), lower, rtol=1e-9)
    assert mcse_quantile(x, 0.95) == 0.0 and mcse_quantile(x, 0.05) > 0
    # (c) binary draws: the indicator at the 95% quantile (the value 1) is constant; every value matches the reference
    z = (ar1_chains(0.3, 4, 300, rng) > 0.5).astype(float)
    assert np.isclose(ess_tail(z), min(_az_ess_quantile(z, 0.05), _az_ess_quantile(z, 0.95)), rtol=1e-9)
    for p in (0.05, 0.5, 0.95):
        assert np.isclose(mcse_quantile(z, p), _az_mcse_quantile(z, p), rtol=1e-9, atol=0)
    # a constant *quantity* keeps the documented nan ESS (the posterior package's NA), and a 0 MCSE
    with pytest.warns(RuntimeWarning, match="constant"):
        assert np.isnan(ess_tail(np.full((2, 10), 3.0)))


def test_rhat_of_odd_chains_ignores_the_middle_draw(seed):
    # ArviZ drops the middle draw of an odd-length chain before splitting, so it cannot influence anything: R-hat
    # of x equals R-hat of x without its middle draws (bulk and tail). Failed before the fix (tail folded at the
    # median of all draws, middle ones included).
    rng = np.random.default_rng(seed(11))
    for n in (5, 101, 1001):
        x = rng.standard_t(3, size=(4, n)) + np.array([[0.0], [0.3], [0.0], [0.1]])
        x[:, n // 2] = 1e3 * rng.normal(size=4)                 # extreme middle draws: must not matter
        assert rhat(x) == rhat(np.delete(x, n // 2, axis=1))


def test_mcse_quantile_matches_the_iid_formula(seed):
    # iid N(0, 1) draws: the MCSE of the p-quantile tends to sqrt(p (1 - p) / S) / f(q_p). One estimate is half the
    # gap between order statistics m = 2 sqrt(S p (1 - p)) >= 600 ranks apart, relative sd ~ sqrt(1/m + 0.02^2) <= 0.046
    # (exponential spacings plus the noise of the indicator ESS); the floor/ceil rule widens it by <= 2/m = 0.33%.
    # The mean of 20 runs has se <= 0.0102, so 0.055 is 5.1 se beyond the bias (2 comparisons: false alarm < 1e-6).
    from scipy import stats
    from bayesnotes.diagnostics import mcse_quantile
    rng = np.random.default_rng(seed(12))
    for p in (0.1, 0.5):
        classical = lambda S: np.sqrt(p * (1 - p) / S) / stats.norm.pdf(stats.norm.ppf(p))
        ratio = [mcse_quantile(x, p) / classical(x.size) for x in (rng.normal(size=(4, 250_000)) for _ in range(20))]
        assert abs(np.mean(ratio) - 1) < 0.055


def test_mcse_quantile_against_replicated_runs(seed):
    # the MCSE of the median must match the actual spread of the median estimate over 300 independent AR(1) runs:
    # the empirical sd has relative se 1/sqrt(2 * 300) = 4.1%, the mean of the MCSEs ~1%: 0.22 is 5.2 combined se
    from bayesnotes.diagnostics import mcse_quantile
    rng = np.random.default_rng(seed(13))
    med, mc = [], []
    for _ in range(300):
        x = ar1_chains(0.7, 4, 500, rng)
        med.append(np.median(x)); mc.append(mcse_quantile(x, 0.5))
    assert abs(np.mean(mc) / np.std(med, ddof=1) - 1) < 0.22


@pytest.mark.parametrize("phi", [0.0, 0.6, 0.95])
def test_e_bfmi_of_ar1_energies(phi, seed):
    # E-BFMI ~ 2 (1 - lag-1 autocorrelation of the energy): 2 for independent energies, 2 (1 - phi) for AR(1)
    # energies, with sd 2 sqrt((1 - phi^2) / N) per chain. 4 chains x 3 phis = 12 comparisons: 5.7 sd, false alarm < 1e-6
    from bayesnotes.diagnostics import e_bfmi
    N = 5000
    E = 3.0 + 2.0 * ar1_chains(phi, 4, N, np.random.default_rng(seed(14)))   # location and scale do not matter
    eb = e_bfmi(E)
    assert eb.shape == (4,)
    assert np.all(np.abs(eb - 2 * (1 - phi)) < 5.7 * 2 * np.sqrt((1 - phi ** 2) / N))


def test_e_bfmi_of_a_perfect_hmc_transition_is_one(seed):
    # exact Hamiltonian flow on N(0, I_d) with unit mass for time pi/2 maps (x, p') to (p', -x): every position is a
    # fresh exact draw, and consecutive energies share U(x_n), so E-BFMI -> 2 var K / var E = 1 (not 2). sd sqrt(2 / N)
    # by the delta method (04b); 4 chains x 2 dimensions = 8 comparisons at 5.7 sd: false alarm < 1e-7
    from bayesnotes.diagnostics import e_bfmi
    rng = np.random.default_rng(seed(20))
    N = 5000
    for d in (1, 25):
        x = rng.standard_normal((4, d))
        E = np.empty((4, N))
        for n in range(N):
            p = rng.standard_normal((4, d))
            x, p = p, -x
            E[:, n] = 0.5 * (x ** 2).sum(1) + 0.5 * (p ** 2).sum(1)
        assert np.all(np.abs(e_bfmi(E) - 1) < 5.7 * np.sqrt(2 / N)), (d, e_bfmi(E))


def test_e_bfmi_edge_cases(seed):
    from bayesnotes.diagnostics import e_bfmi, mcse_quantile
    E = np.random.default_rng(seed(15)).normal(size=(2, 100))
    assert np.isclose(e_bfmi(E[0])[0], e_bfmi(E)[0])                    # a 1-d array is one chain
    assert np.isclose(e_bfmi(E)[1], np.sum(np.diff(E[1]) ** 2) / np.sum((E[1] - E[1].mean()) ** 2))
    E[1] = 4.0
    with pytest.warns(RuntimeWarning, match="constant"):
        eb = e_bfmi(E)
    assert np.isfinite(eb[0]) and np.isnan(eb[1])
    with pytest.raises(ValueError, match="energy"):
        e_bfmi(np.zeros((2, 10, 3)))
    with pytest.raises(ValueError, match="prob"):
        mcse_quantile(E, 1.0)
    x = np.random.default_rng(seed(16)).normal(size=(4, 100, 2)); x[..., 1] = 2.0
    m = mcse_quantile(x, 0.3)
    assert m.shape == (2,) and m[0] > 0 and m[1] == 0.0                   # a constant is estimated exactly


def test_geyer_steps_reproduce_the_ess(seed):
    from bayesnotes.diagnostics import geyer_steps
    x = ar1_chains(0.8, 4, 1000, rng=seed(17))
    g = geyer_steps(x)
    assert np.isclose(ess_mean(x), x.size / max(g["tau"], 1 / np.log10(x.size)))
    assert np.all(g["pairs"][:g["cut"]] >= 0) and (g["cut"] == len(g["pairs"]) or g["pairs"][g["cut"]] < 0)   # invariant: Geyer's pair sums are positive up to the cut, by its definition
    # why the sum must be cut: a single chain's 1/N-normalised autocorrelations sum to exactly 0 over all lags
    assert abs(1 + 2 * autocorr(x[0])[1:].sum()) < 1e-9


def test_geyer_figure(seed):
    from matplotlib.figure import Figure
    from bayesnotes.diagnostics import fig_geyer_ar1, geyer_steps
    assert isinstance(fig_geyer_ar1(0.5, 500, rng=seed(18)), Figure)
    with pytest.raises(ValueError, match="one quantity"):
        geyer_steps(np.zeros((2, 10, 2)))


def test_short_chains_warn_and_keep_arviz_values(seed):
    # With 4-9 draws per chain the split halves have at most 4 draws, Geyer's pair loop never runs, tau_hat = 0 and the
    # ESS is the floor value S log10(S) whatever the draws (19.3 for four ramps 0, 1, 2, 3 that never move). ArviZ
    # returns that value from its min_draws=4, and we return the same (numbers agree with ArviZ), but every ESS/MCSE
    # function now warns. Catches a silent floor value, and a departure from ArviZ's numbers.
    from bayesnotes.diagnostics import mcse_quantile
    for n in (4, 7, 9):
        ramps = np.tile(np.arange(float(n)), (4, 1))
        for f in (ess_bulk, ess_tail, ess_mean, mcse_mean, mcse_sd, lambda x: mcse_quantile(x, 0.5)):
            with pytest.warns(RuntimeWarning, match="at least 10 draws per chain"):
                assert np.isfinite(f(ramps))
        with pytest.warns(RuntimeWarning, match="at least 10 draws per chain"):
            assert np.isclose(ess_mean(ramps), _az_ess(_az_split(ramps)), rtol=1e-12)
        with pytest.warns(RuntimeWarning, match="at least 10 draws per chain"):
            assert np.isclose(ess_bulk(ramps), _az_ess(_az_z_scale(_az_split(ramps))), rtol=1e-12)
        with pytest.warns(RuntimeWarning, match="at least 10 draws per chain"):
            s = summary(ramps)
        assert np.isfinite(s.rhat[0]) and s.rhat[0] > 1.5          # split R-hat sees the trend from 4 draws on
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert np.isfinite(rhat(ramps))
    # from 10 draws: no warning, and the values equal ArviZ's
    x = np.random.default_rng(seed(21)).normal(size=(4, 10))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isclose(ess_mean(x), _az_ess(_az_split(x)), rtol=1e-12)
        assert np.isclose(ess_bulk(x), _az_ess(_az_z_scale(_az_split(x))), rtol=1e-12)
        assert np.isclose(ess_tail(x), min(_az_ess_quantile(x, 0.05), _az_ess_quantile(x, 0.95)), rtol=1e-12)


def test_tiny_scale_quantity_warns(seed):
    # ArviZ's rule treats max - min < 1e-15 as "all identical" and gives ESS = S: an AR(1) chain (phi = 0.99,
    # 4 x 1000 draws, tau ~ 199) scaled by 1e-16 gets ess_mean = 4000 instead of about 16, and mcse_mean 16 times too
    # small. We keep ArviZ's value and warn; catches the silent version. Rescaled by 1e20 nothing changes and no warning.
    x = ar1_chains(0.99, 4, 1000, rng=seed(22))
    assert ess_mean(x) < 100
    for f in (ess_mean, mcse_mean):
        with pytest.warns(RuntimeWarning, match="less than 1e-15"):
            f(1e-16 * x)
    with pytest.warns(RuntimeWarning, match="less than 1e-15"):
        assert ess_mean(1e-16 * x) == x.size                      # ArviZ's value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isclose(ess_mean(1e20 * x), ess_mean(x), rtol=1e-9)
        assert np.isclose(mcse_mean(1e20 * x), 1e20 * mcse_mean(x), rtol=1e-9)


def test_mcse_sd_tiny_scale_warns(seed):
    # The MCSE of the sd takes the ESS of c^2 = (x - mean)^2, which lives on the squared scale: once x varies by less than
    # about sqrt(1e-15) ~ 3e-8, c^2 falls under ArviZ's "identical" rule (max - min < 1e-15) and gets the ESS S. An AR(1)
    # chain (phi = 0.9, 4 x 1000) scaled by 3e-9 then gets an MCSE of the sd about 3.4 times too small (0.0109 instead of
    # 0.0373 in units of the scale at rng 0), the same value as ArviZ's. We keep the value and warn, in mcse_sd and in
    # summary; catches the silent version. At scale 1e-7 nothing changes (exact invariance) and nothing warns.
    x = ar1_chains(0.9, 4, 1000, rng=seed(30))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = mcse_sd(x)
        assert np.isclose(mcse_sd(1e-7 * x), 1e-7 * ref, rtol=1e-9)
        assert np.isclose(summary(1e-7 * x).mcse_sd[0], 1e-7 * ref, rtol=1e-9)
        assert np.isclose(mcse_mean(3e-9 * x), 3e-9 * mcse_mean(x), rtol=1e-9)   # the mean's ESS is still fine here
    with pytest.warns(RuntimeWarning, match="squared deviations.*less than 1e-15"):
        tiny = mcse_sd(3e-9 * x) / 3e-9
    # the value it warns about: ESS(c^2) = S instead of about S / 9.5 (c^2 of a Gaussian AR(1) has rho_t = phi^(2t), so
    # tau = (1 + phi^2) / (1 - phi^2) = 9.5), hence sqrt(9.5) ~ 3 times too small; 0.5 leaves a wide margin at any seed
    assert tiny < 0.5 * ref
    with pytest.warns(RuntimeWarning, match="less than 1e-15"):
        summary(3e-9 * x)


def test_autocorr_combined_is_the_ess_estimator(seed):
    # autocorr(combined=True) is the multi-chain rho_t of the ESS applied to the chains as given: passed the split chains
    # it is exactly the sequence behind ess_mean, and on the unsplit chains it differs from it
    x = ar1_chains(0.8, 4, 1000, rng=seed(31))
    halves = np.concatenate([x[:, :500], x[:, 500:]])
    rho = autocorr(halves, combined=True)
    assert np.isclose(ess_mean(x), x.size / max(_tau_geyer(rho), 1 / np.log10(x.size)), rtol=1e-12)
    assert rho.shape == (500,) and not np.isclose(_tau_geyer(autocorr(x, combined=True)), _tau_geyer(rho), rtol=1e-6)
