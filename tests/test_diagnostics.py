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
    # for independent draws every ESS is about S; one estimate has a relative sd of ~5% here (see the AR(1) test)
    x = np.random.default_rng(seed(3)).normal(size=(4, 1000))
    for f in (ess_bulk, ess_tail, ess_mean):
        assert abs(f(x) / x.size - 1) < 0.2


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
